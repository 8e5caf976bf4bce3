//! The vault and its key sources: golden envelopes of every kind, tampering, wrong
//! keys and bindings, the fake secure element, atomic replacement.

use std::path::{Path, PathBuf};

use embedded_hal_mock::eh1::delay::NoopDelay;
use zeroize::Zeroizing;

use super::atecc608::Atecc608;
use super::atecc608::fake::FakeAtecc608;
use super::sources::{Combined, CredentialFile, Passphrase, SecureElement};
use super::*;

/// A datadir's seed files, named as `datadir::Layout` names them.
fn files(dir: &Path) -> SeedFiles {
    SeedFiles {
        sealed: dir.join("seed.sealed"),
        plaintext: dir.join("mnemonic"),
    }
}

const PHRASE: &str = "abandon abandon abandon abandon abandon abandon abandon abandon \
                      abandon abandon abandon about";
const PASSPHRASE: &str = "correct horse battery staple";
const SERIAL: [u8; 9] = [0x01, 0x23, 0x6e, 0x4b, 0x9a, 0x10, 0x22, 0x33, 0xee];
const SLOT: u8 = 2;
/// Cheap costs for tests (the envelope records them, so opening uses the same).
const TEST_ARGON2: KdfParams = KdfParams {
    memory_kib: 256,
    iterations: 1,
    parallelism: 1,
};

fn slot_key() -> [u8; 32] {
    core::array::from_fn(|i| (i as u8).wrapping_mul(7).wrapping_add(3))
}

fn passphrase(text: &str) -> Box<dyn KeySource> {
    Box::new(Passphrase::new(Zeroizing::new(text.to_string())).expect("non-empty"))
}

/// A credential file with fixed contents, in `dir`.
fn credential(dir: &Path, byte: u8) -> Box<dyn KeySource> {
    let path = dir.join(format!("credential-{byte}"));
    std::fs::write(&path, [byte; 32]).expect("credential");
    Box::new(CredentialFile::new(path))
}

fn chip(serial: [u8; 9], key: [u8; 32]) -> FakeAtecc608 {
    FakeAtecc608::new(serial, [(SLOT, key)])
}

fn secure_element(fake: FakeAtecc608) -> Box<dyn KeySource> {
    Box::new(SecureElement::new(
        Atecc608::new(fake, NoopDelay, atecc608::DEFAULT_ADDRESS),
        SLOT,
    ))
}

/// The kinds with a golden file: name, a source that opens it, its KDF.
fn kinds(dir: &Path) -> Vec<(&'static str, Box<dyn KeySource>, Kdf)> {
    vec![
        (
            "passphrase",
            passphrase(PASSPHRASE),
            Kdf::Argon2id(TEST_ARGON2),
        ),
        ("credential", credential(dir, 0x5a), Kdf::None),
        (
            "secure-element",
            secure_element(chip(SERIAL, slot_key())),
            Kdf::None,
        ),
        (
            "combined",
            Box::new(
                Combined::new(vec![
                    passphrase(PASSPHRASE),
                    credential(dir, 0x5a),
                    secure_element(chip(SERIAL, slot_key())),
                ])
                .expect("three kinds"),
            ),
            Kdf::Argon2id(TEST_ARGON2),
        ),
    ]
}

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seed")
        .join(format!("v1-{name}.sealed"))
}

/// Envelopes written by an earlier build still open: one file per version and kind.
/// `BERTH_BLESS=1` writes them (only when the format version changes).
#[test]
fn golden_envelopes_of_every_kind_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, mut source, kdf) in kinds(dir.path()) {
        let path = golden(name);
        if std::env::var_os("BERTH_BLESS").is_some() {
            let written = dir.path().join(name);
            SeedVault::new(written.clone())
                .seal(PHRASE, source.as_mut(), kdf)
                .expect("seal");
            std::fs::create_dir_all(path.parent().expect("dir")).expect("fixtures dir");
            std::fs::copy(&written, &path).expect("bless");
        }
        let vault = SeedVault::new(path.clone());
        let envelope = vault.envelope().expect("parses");
        assert_eq!(envelope.version, 1);
        assert_eq!(envelope.sources, source.sources(), "{name}");
        assert_eq!(envelope.kdf, kdf, "{name}");
        let expected_binding = if name == "secure-element" || name == "combined" {
            SERIAL.to_vec()
        } else {
            Vec::new()
        };
        assert_eq!(envelope.binding, expected_binding, "{name}");
        let opened = vault.open(source.as_mut()).expect(name);
        assert_eq!(opened.as_str(), PHRASE, "{name}");
        // Parsing and writing back gives the same bytes.
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(envelope.to_bytes(), bytes, "{name}");
    }
}

/// Every single byte changed, in every golden file: a clear error, never a phrase.
#[test]
fn any_tampered_byte_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, mut source, _) in kinds(dir.path()) {
        let original = std::fs::read(golden(name)).expect("golden");
        let path = dir.path().join("tampered");
        for i in 0..original.len() {
            let mut bytes = original.clone();
            bytes[i] ^= 0x01;
            std::fs::write(&path, &bytes).expect("write");
            let outcome = SeedVault::new(path.clone()).open(source.as_mut());
            match outcome {
                Err(
                    KeyError::Malformed(_)
                    | KeyError::WrongKey
                    | KeyError::WrongBinding { .. }
                    | KeyError::MissingSource { .. },
                ) => {}
                Err(other) => panic!("{name} byte {i}: unexpected error {other}"),
                Ok(_) => panic!("{name} byte {i}: a tampered envelope opened"),
            }
            assert_eq!(
                std::fs::read(&path).expect("read"),
                bytes,
                "nothing written"
            );
        }
        // Truncated and extended files too.
        for bytes in [
            &original[..original.len() - 1],
            &[original.as_slice(), &[0]].concat(),
        ] {
            std::fs::write(&path, bytes).expect("write");
            assert!(matches!(
                SeedVault::new(path.clone()).open(source.as_mut()),
                Err(KeyError::Malformed(_))
            ));
        }
    }
}

#[test]
fn a_wrong_passphrase_credential_or_chip_key_is_a_wrong_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: Vec<(&str, Box<dyn KeySource>)> = vec![
        ("passphrase", passphrase("correct horse battery stapler")),
        ("credential", credential(dir.path(), 0x5b)),
        ("secure-element", secure_element(chip(SERIAL, [9; 32]))),
    ];
    for (name, mut wrong) in cases {
        let vault = SeedVault::new(golden(name));
        let before = std::fs::read(vault.path()).expect("read");
        let error = vault.open(wrong.as_mut()).expect_err(name);
        assert!(matches!(error, KeyError::WrongKey), "{name}: {error}");
        assert!(error.to_string().contains("wrong key"), "{error}");
        assert_eq!(std::fs::read(vault.path()).expect("read"), before);
    }
}

#[test]
fn another_chip_or_missing_sources_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut other_chip = secure_element(chip([0xaa; 9], slot_key()));
    let error = SeedVault::new(golden("secure-element"))
        .open(other_chip.as_mut())
        .expect_err("another chip");
    assert_eq!(
        error.to_string(),
        "the seed is bound to secure element 01236e4b9a102233ee, but the one found is aaaaaaaaaaaaaaaaaa"
    );
    // The combined seed with only a passphrase: says which sources it needs.
    let error = SeedVault::new(golden("combined"))
        .open(passphrase(PASSPHRASE).as_mut())
        .expect_err("missing sources");
    let message = error.to_string();
    assert!(
        message.contains("sealed with passphrase + credential + secure-element")
            && message.contains("berthd has passphrase"),
        "{message}"
    );
    // A credential too short to be a key.
    let short = dir.path().join("short");
    std::fs::write(&short, b"hunter2").expect("write");
    let error = SeedVault::new(golden("credential"))
        .open(&mut CredentialFile::new(short))
        .expect_err("short credential");
    assert!(
        error.to_string().contains("at least 32 random bytes"),
        "{error}"
    );
}

#[test]
fn an_exhausted_or_failing_chip_is_an_error_not_a_key() {
    let mut fake = chip(SERIAL, slot_key());
    fake.set_mac_limit(Some(0));
    let error = SeedVault::new(golden("secure-element"))
        .open(secure_element(fake).as_mut())
        .expect_err("limit reached");
    assert!(matches!(error, KeyError::SecureElement(_)), "{error}");
    assert!(error.to_string().contains("execution error"), "{error}");

    // A bad CRC on the wire is retried and the seed opens.
    let mut fake = chip(SERIAL, slot_key());
    fake.set_busy_polls(2);
    fake.corrupt_next_response_crc();
    let opened = SeedVault::new(golden("secure-element"))
        .open(secure_element(fake).as_mut())
        .expect("opens after a retry");
    assert_eq!(opened.as_str(), PHRASE);
}

/// A key source that gives a different key every time: a seal must notice (the
/// read-back fails), put the previous envelope back and leave no trace.
struct Forgetful(u8);

impl KeySource for Forgetful {
    fn sources(&self) -> Sources {
        Sources::CREDENTIAL
    }
    fn key(&mut self, _: &[u8; 16], _: &Kdf) -> Result<sources::Key, KeyError> {
        self.0 = self.0.wrapping_add(1);
        Ok(Zeroizing::new([self.0; 32]))
    }
}

#[test]
fn a_seal_that_does_not_read_back_keeps_the_previous_envelope() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vault = SeedVault::new(dir.path().join("seed.sealed"));
    let mut good = credential(dir.path(), 1);
    vault.seal(PHRASE, good.as_mut(), Kdf::None).expect("seal");
    let before = std::fs::read(vault.path()).expect("read");

    let error = vault
        .seal("another phrase", &mut Forgetful(0), Kdf::None)
        .expect_err("read-back fails");
    assert!(error.to_string().contains("did not read back"), "{error}");
    assert_eq!(
        std::fs::read(vault.path()).expect("read"),
        before,
        "put back"
    );
    assert!(!dir.path().join("seed.sealed.prev").exists());
    assert_eq!(vault.open(good.as_mut()).expect("opens").as_str(), PHRASE);

    // Without a previous envelope, a failed seal leaves nothing.
    let fresh = SeedVault::new(dir.path().join("fresh.sealed"));
    fresh
        .seal(PHRASE, &mut Forgetful(0), Kdf::None)
        .expect_err("read-back fails");
    assert!(!fresh.exists());

    // A successful re-seal replaces it and removes the previous copy.
    let mut other = credential(dir.path(), 2);
    vault
        .seal(PHRASE, other.as_mut(), Kdf::None)
        .expect("re-seal");
    assert!(!dir.path().join("seed.sealed.prev").exists());
    assert!(matches!(vault.open(good.as_mut()), Err(KeyError::WrongKey)));
    assert_eq!(vault.open(other.as_mut()).expect("opens").as_str(), PHRASE);
}

#[test]
fn seeds_seal_with_the_configured_sources_or_write_plaintext_with_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = Seeds::new(files(dir.path()), SeedSettings::default());
    assert_eq!(
        plain.create(PHRASE).expect("create"),
        SeedLocation::Plaintext
    );
    assert_eq!(plain.status().expect("status"), SeedStatus::Plaintext);
    assert!(plain.create(PHRASE).is_err(), "never overwrites a seed");

    // `seed seal`: the plaintext becomes an envelope, then disappears.
    let settings = SeedSettings {
        seal_with: Some(Sources::PASSPHRASE),
        passphrase: Some(Zeroizing::new(PASSPHRASE.into())),
        argon2: Some(TEST_ARGON2),
        ..SeedSettings::default()
    };
    let sealed = Seeds::new(files(dir.path()), settings.clone());
    assert_eq!(sealed.seal_plaintext().expect("seal"), Sources::PASSPHRASE);
    assert!(!dir.path().join("mnemonic").exists());
    assert_eq!(sealed.read().expect("read").as_str(), PHRASE);
    match sealed.status().expect("status") {
        SeedStatus::Sealed {
            sources, binding, ..
        } => {
            assert_eq!(sources, vec!["passphrase"]);
            assert!(binding.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert!(sealed.seal_plaintext().is_err(), "sealed already");
    // Nothing in the datadir holds the phrase or any of its words in a row.
    for entry in std::fs::read_dir(dir.path()).expect("list") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("read");
        assert!(!bytes.windows(7).any(|w| w == b"abandon"));
    }
    // Another passphrase cannot read it; none at all says what is missing.
    let wrong = Seeds::new(
        files(dir.path()),
        SeedSettings {
            passphrase: Some(Zeroizing::new("nope".into())),
            ..settings.clone()
        },
    );
    assert!(matches!(wrong.read(), Err(KeyError::WrongKey)));
    let missing = Seeds::new(files(dir.path()), SeedSettings::default());
    let error = missing.read().expect_err("no passphrase");
    assert!(error.to_string().contains(PASSPHRASE_ENV), "{error}");

    sealed.remove().expect("remove");
    assert_eq!(sealed.location(), None);
}

/// The appliance's settings: the credential always, the secure element where one is
/// fitted and answers. Without a chip the seed is sealed with the credential alone
/// (and opens without one); with one, it is bound to it too.
#[test]
fn an_optional_secure_element_joins_the_seal_only_when_it_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let credential = dir.path().join("berth-seed");
    std::fs::write(&credential, [7u8; 32]).expect("credential");
    let settings = SeedSettings {
        seal_with: Some(Sources::CREDENTIAL),
        seal_when_present: Some(Sources::SECURE_ELEMENT),
        credential: Some(credential),
        secure_element: Some(SecureElementSettings {
            bus: dir.path().join("no-such-i2c-bus"),
            address: atecc608::DEFAULT_ADDRESS,
            slot: Some(SLOT),
        }),
        ..SeedSettings::default()
    };

    // No chip: the real I²C opener finds no bus.
    let absent = dir.path().join("absent");
    std::fs::create_dir(&absent).expect("dir");
    let seeds = Seeds::new(files(&absent), settings.clone());
    assert_eq!(seeds.create(PHRASE).expect("create"), SeedLocation::Sealed);
    match seeds.status().expect("status") {
        SeedStatus::Sealed {
            sources, binding, ..
        } => {
            assert_eq!(sources, vec!["credential"]);
            assert!(binding.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(seeds.read().expect("read").as_str(), PHRASE);
    assert!(!absent.join("mnemonic").exists());

    // A chip that answers (the fake behind the same driver): bound to it as well, and
    // the credential alone no longer opens the seed.
    let present = dir.path().join("present");
    std::fs::create_dir(&present).expect("dir");
    let with_chip = |seeds: Seeds| {
        seeds.with_secure_element(std::sync::Arc::new(|_: &SecureElementSettings| {
            Ok(secure_element(chip(SERIAL, slot_key())))
        }))
    };
    let seeds = with_chip(Seeds::new(files(&present), settings.clone()));
    seeds.create(PHRASE).expect("create");
    match seeds.status().expect("status") {
        SeedStatus::Sealed {
            sources, binding, ..
        } => {
            assert_eq!(sources, vec!["credential", "secure-element"]);
            assert_eq!(binding, vault::hex(&SERIAL));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(seeds.read().expect("read").as_str(), PHRASE);
    let chip_gone = Seeds::new(files(&present), settings);
    assert!(chip_gone.read().is_err(), "the chip is needed now");
}

#[test]
fn secret_holding_types_do_not_print_their_secrets() {
    let shown = format!(
        "{:?} {:?}",
        Passphrase::new(Zeroizing::new(PASSPHRASE.into())).expect("non-empty"),
        SeedSettings {
            passphrase: Some(Zeroizing::new(PASSPHRASE.into())),
            ..SeedSettings::default()
        }
    );
    assert!(!shown.contains("horse"), "{shown}");
    assert!(shown.contains("redacted"), "{shown}");
}

/// A restart, for every kind: a fresh seal, then fresh source instances (a new fake
/// chip holding the same key, the same credential file, the passphrase typed again)
/// open it to the same wallet fingerprint.
#[test]
fn every_kind_unlocks_the_same_wallet_after_a_restart() {
    let fingerprint = |phrase: &str| {
        let mnemonic = bark::bip39::Mnemonic::parse(phrase).expect("valid");
        bark::WalletSeed::new_from_mnemonic(bitcoin::Network::Regtest, &mnemonic).fingerprint()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let sealed_by = kinds(dir.path());
    let reopened_by = kinds(dir.path());
    for ((name, mut sealer, kdf), (_, mut opener, _)) in sealed_by.into_iter().zip(reopened_by) {
        let vault = SeedVault::new(dir.path().join(format!("{name}.sealed")));
        vault.seal(PHRASE, sealer.as_mut(), kdf).expect("seal");
        drop(sealer);
        let opened = vault.open(opener.as_mut()).expect(name);
        assert_eq!(fingerprint(&opened), fingerprint(PHRASE), "{name}");
    }
}
