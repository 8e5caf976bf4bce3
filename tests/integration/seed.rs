//! The sealed seed through the real `berthd`: a passphrase from the environment or
//! given at create, a systemd credential file, no source (barkd's plaintext file) and
//! `berthd seed seal`; restarts unlock the same wallet; wrong or missing keys stop the
//! start with a clear message, except a passphrase nobody gave yet: berthd starts locked
//! and `POST /api/v1/wallet/unlock` takes it; the phrase never lands in a log or a
//! datadir file once sealed.

use crate::harness;

use std::path::Path;

use harness::*;

const MNEMONIC: &str =
    "legal winner thank year wave sausage worth useful legal winner thank yellow";
const PASSPHRASE: &str = "a long passphrase for the test";
/// The cheapest costs berth.toml accepts (OWASP's minimum), to keep the tests quick.
const CHEAP_ARGON2: &str = "argon2_memory_kib = 19456\nargon2_iterations = 2\n";

fn fingerprint() -> String {
    let mnemonic = bark::bip39::Mnemonic::parse(MNEMONIC).expect("valid");
    bark::WalletSeed::new_from_mnemonic(bitcoin::Network::Regtest, &mnemonic)
        .fingerprint()
        .to_string()
}

fn create_body() -> String {
    let dead = format!("http://127.0.0.1:{}", free_port());
    serde_json::json!({
        "network": "regtest",
        "mnemonic": MNEMONIC,
        "ark_server": dead,
        "chain_source": { "esplora": { "url": dead } },
        "force": true,
    })
    .to_string()
}

fn auth(datadir: &Path) -> String {
    format!("Bearer {}", token(datadir))
}

/// Import the wallet; the phrase the API gives back and the fingerprint match.
fn create(daemon: &Daemon, datadir: &Path) {
    let bearer = auth(datadir);
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &[("Authorization", &bearer)],
        &create_body(),
    );
    assert_eq!(status, 200, "{raw}");
    assert_eq!(
        json_of(&raw)["fingerprint"].as_str(),
        Some(fingerprint().as_str())
    );
}

/// The wallet after a restart: its fingerprint, and the phrase through
/// `GET /api/v1/wallet/mnemonic` (which needs the seed unlocked).
fn assert_unlocks(daemon: &Daemon, datadir: &Path) {
    let bearer = auth(datadir);
    let (status, raw) = daemon.get("/api/v1/wallet", &[("Authorization", &bearer)]);
    assert_eq!(
        (status, json_of(&raw)["fingerprint"].as_str()),
        (200, Some(fingerprint().as_str()))
    );
    let (status, raw) = daemon.get("/api/v1/wallet/mnemonic", &[("Authorization", &bearer)]);
    assert_eq!(
        (status, json_of(&raw)["mnemonic"].as_str()),
        (200, Some(MNEMONIC)),
        "{raw}"
    );
}

/// No file under the datadir holds the phrase, or any word-pair of it.
fn assert_no_plaintext(datadir: &Path) {
    let words: Vec<&str> = MNEMONIC.split(' ').collect();
    let needles: Vec<String> = words.windows(2).map(|w| w.join(" ")).collect();
    let mut stack = vec![datadir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("list") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            for needle in &needles {
                assert!(
                    !text.contains(needle.as_str()),
                    "{} holds {needle:?}",
                    path.display()
                );
            }
        }
    }
}

/// A wallet that waits for its passphrase: `GET /wallet` and `/health` say so, wallet
/// requests are refused with what to do, a wrong passphrase opens nothing, the right
/// one unlocks it (and only once).
fn assert_locked_then_unlocks(daemon: &Daemon, datadir: &Path) {
    let bearer = auth(datadir);
    let (status, raw) = daemon.get("/api/v1/wallet", &[("Authorization", &bearer)]);
    assert_eq!(status, 200, "{raw}");
    let wallet = json_of(&raw);
    assert_eq!(wallet["fingerprint"].as_str(), Some(fingerprint().as_str()));
    assert_eq!(
        (wallet["locked"].as_bool(), wallet["loaded"].as_bool()),
        (Some(true), Some(false))
    );
    let (_, raw) = daemon.get("/health", &[("Authorization", &bearer)]);
    let health = json_of(&raw);
    assert_eq!(health["wallet"]["locked"], serde_json::json!(true), "{raw}");
    assert!(raw.contains("the wallet is locked"), "{raw}");
    for path in ["/api/v1/wallet/mnemonic", "/api/v1/wallet/balance"] {
        let (status, raw) = daemon.get(path, &[("Authorization", &bearer)]);
        assert_eq!(status, 503, "{path}: {raw}");
        assert!(raw.contains("/api/v1/wallet/unlock"), "{path}: {raw}");
    }

    let unlock = |passphrase: &str| {
        daemon.post(
            "/api/v1/wallet/unlock",
            &[("Authorization", &bearer)],
            &serde_json::json!({ "passphrase": passphrase }).to_string(),
        )
    };
    let (status, raw) = unlock("");
    assert_eq!(status, 400, "{raw}");
    assert!(raw.contains("empty"), "{raw}");
    let started = std::time::Instant::now();
    let (status, raw) = unlock("not the passphrase");
    assert_eq!(status, 400, "{raw}");
    assert!(raw.contains("does not open the seed"), "{raw}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "a wrong guess is slowed"
    );
    let (status, raw) = daemon.get("/api/v1/wallet", &[("Authorization", &bearer)]);
    assert_eq!(
        json_of(&raw)["locked"],
        serde_json::json!(true),
        "{status} {raw}"
    );
    // Only an admin may try.
    let (status, _) = daemon.post(
        "/api/v1/wallet/unlock",
        &[],
        &serde_json::json!({ "passphrase": PASSPHRASE }).to_string(),
    );
    assert_eq!(status, 401);

    let (status, raw) = unlock(PASSPHRASE);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(
        json_of(&raw)["fingerprint"].as_str(),
        Some(fingerprint().as_str())
    );
    assert_unlocks(daemon, datadir);
    let (_, raw) = daemon.get("/api/v1/wallet", &[("Authorization", &bearer)]);
    assert_eq!(json_of(&raw)["locked"], serde_json::json!(false), "{raw}");
    let (status, raw) = unlock(PASSPHRASE);
    assert_eq!(status, 422, "not locked any more: {raw}");
}

fn start_fails(datadir: &Path, env: &[(&str, &str)]) -> String {
    match Daemon::try_start_with_env(datadir, &["--expose-mnemonic", "--no-logfile"], env) {
        Ok(_) => panic!("berthd started without the seed's key"),
        Err(output) => output,
    }
}

#[test]
fn a_passphrase_from_the_environment_seals_the_seed_and_unlocks_it_after_restart() {
    let (_tmp, datadir) = datadir_with_berth_toml(&format!("[seed]\n{CHEAP_ARGON2}"));
    let env = [("BERTH_SEED_PASSPHRASE", PASSPHRASE)];
    let daemon =
        Daemon::try_start_with_env(&datadir, &["--expose-mnemonic", "-v"], &env).expect("starts");
    create(&daemon, &datadir);
    assert!(datadir.join("seed.sealed").exists());
    assert!(
        !datadir.join("mnemonic").exists(),
        "no plaintext when a source is configured"
    );
    assert_unlocks(&daemon, &datadir);
    assert_eq!(daemon.terminate().0.code(), Some(0));

    let daemon =
        Daemon::try_start_with_env(&datadir, &["--expose-mnemonic", "-v"], &env).expect("restarts");
    assert_unlocks(&daemon, &datadir);
    assert_eq!(daemon.terminate().0.code(), Some(0));

    let wrong = start_fails(&datadir, &[("BERTH_SEED_PASSPHRASE", "not the passphrase")]);
    assert!(wrong.contains("wrong key"), "{wrong}");
    assert!(!wrong.contains("legal winner"), "{wrong}");

    // No passphrase at all: berthd starts locked and waits for one.
    let daemon = Daemon::try_start_with_env(&datadir, &["--expose-mnemonic", "-v"], &[])
        .expect("starts locked");
    assert_locked_then_unlocks(&daemon, &datadir);
    assert_eq!(daemon.terminate().0.code(), Some(0));

    let status = berthd_with_env(&datadir, &["seed", "status"], &[]);
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{shown}");
    assert!(shown.contains("key sources: passphrase"), "{shown}");
    assert!(shown.contains("Argon2id, 19456 KiB"), "{shown}");
    // The debug log (at -v) and every other file: no phrase.
    assert_no_plaintext(&datadir);

    // The envelope copied alone into another datadir (a copied card, no passphrase):
    // berthd cannot open it and will not create a wallet over it.
    let (_other_tmp, other) = new_datadir();
    std::fs::create_dir_all(&other).expect("datadir");
    std::fs::copy(datadir.join("seed.sealed"), other.join("seed.sealed")).expect("copy");
    let daemon = Daemon::start(&other, &[]);
    let bearer = auth(&other);
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &[("Authorization", &bearer)],
        &create_body(),
    );
    assert_eq!(status, 422, "{raw}");
    let message = json_of(&raw)["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("cannot open") && message.contains("BERTH_SEED_PASSPHRASE"),
        "{message}"
    );
    assert!(other.join("seed.sealed").exists(), "left as it was");
}

#[test]
fn a_passphrase_given_at_create_seals_the_seed_and_the_restarted_daemon_waits_for_it() {
    // No key source configured: the passphrase alone seals the seed.
    let (_tmp, datadir) = datadir_with_berth_toml(&format!("[seed]\n{CHEAP_ARGON2}"));
    let daemon =
        Daemon::try_start_with_env(&datadir, &["--expose-mnemonic", "-v"], &[]).expect("starts");
    let bearer = auth(&datadir);
    let mut body: serde_json::Value = serde_json::from_str(&create_body()).expect("json");
    body["seed_passphrase"] = serde_json::json!("short");
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &[("Authorization", &bearer)],
        &body.to_string(),
    );
    assert_eq!(status, 400, "{raw}");
    assert!(raw.contains("at least 8 characters"), "{raw}");
    assert!(!datadir.join("seed.sealed").exists() && !datadir.join("mnemonic").exists());

    body["seed_passphrase"] = serde_json::json!(PASSPHRASE);
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &[("Authorization", &bearer)],
        &body.to_string(),
    );
    assert_eq!(status, 200, "{raw}");
    assert!(datadir.join("seed.sealed").exists());
    assert!(!datadir.join("mnemonic").exists());
    // Usable at once: the passphrase it was just given is kept while berthd runs.
    assert_unlocks(&daemon, &datadir);
    assert_eq!(daemon.terminate().0.code(), Some(0));

    let status = berthd_with_env(&datadir, &["seed", "status"], &[]);
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(shown.contains("key sources: passphrase"), "{shown}");

    let daemon = Daemon::try_start_with_env(&datadir, &["--expose-mnemonic", "-v"], &[])
        .expect("starts locked");
    assert_locked_then_unlocks(&daemon, &datadir);
    assert_eq!(daemon.terminate().0.code(), Some(0));
    // Neither the phrase nor the passphrase is in the log or any datadir file.
    assert_no_plaintext(&datadir);
    let log = std::fs::read_to_string(datadir.join("debug.log")).expect("the log");
    assert!(
        log.contains("the wallet was unlocked"),
        "the log is this run's"
    );
    assert!(!log.contains(PASSPHRASE), "the passphrase is in the log");
}

#[test]
fn a_systemd_credential_seals_the_seed_and_is_needed_to_start() {
    // The appliance's settings (board/common's 40-appliance.toml), on a box whose
    // secure element is configured but not fitted: the credential alone seals.
    let (tmp, datadir) = datadir_with_berth_toml(
        "[seed]\nsources = [\"credential\"]\noptional_sources = [\"secure-element\"]\n\
         secure_element_slot = 9\ni2c_bus = \"/dev/berth-test-no-such-i2c\"\n",
    );
    let before = berthd_with_env(&datadir, &["seed", "status"], &[]);
    let shown = String::from_utf8_lossy(&before.stdout);
    assert!(
        shown.contains("a new seed: sealed with credential (+ secure-element if it answers then)"),
        "{shown}"
    );
    let credentials = tmp.path().join("credentials");
    std::fs::create_dir_all(&credentials).expect("dir");
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("random");
    std::fs::write(credentials.join("berth-seed"), secret).expect("credential");
    let dir = credentials.to_string_lossy().into_owned();
    let env = [("CREDENTIALS_DIRECTORY", dir.as_str())];

    let daemon =
        Daemon::try_start_with_env(&datadir, &["--expose-mnemonic"], &env).expect("starts");
    create(&daemon, &datadir);
    assert!(datadir.join("seed.sealed").exists() && !datadir.join("mnemonic").exists());
    assert_eq!(daemon.terminate().0.code(), Some(0));

    let daemon =
        Daemon::try_start_with_env(&datadir, &["--expose-mnemonic"], &env).expect("restarts");
    assert_unlocks(&daemon, &datadir);
    assert_eq!(daemon.terminate().0.code(), Some(0));

    let status = berthd_with_env(&datadir, &["seed", "status"], &[]);
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(
        shown.lines().any(|l| l == "key sources: credential") && !shown.contains("bound to"),
        "{shown}"
    );

    // Without the credential (another machine, a copied card): a clear refusal.
    let missing = start_fails(&datadir, &[]);
    assert!(missing.contains("CREDENTIALS_DIRECTORY"), "{missing}");
    std::fs::write(credentials.join("berth-seed"), [7u8; 32]).expect("another credential");
    let wrong = start_fails(&datadir, &env);
    assert!(wrong.contains("wrong key"), "{wrong}");
    assert_no_plaintext(&datadir);
}

#[test]
fn without_a_source_the_seed_is_plaintext_until_seed_seal() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &["--expose-mnemonic"]);
    create(&daemon, &datadir);
    assert_eq!(daemon.terminate().0.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(datadir.join("mnemonic")).expect("barkd's plaintext file"),
        MNEMONIC
    );
    let log = std::fs::read_to_string(datadir.join("debug.log")).expect("log");
    assert!(
        log.contains("plaintext mnemonic file"),
        "the warning: {log}"
    );

    // `seed seal` with nothing configured says what to configure.
    let refused = berthd_with_env(&datadir, &["seed", "seal"], &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("BERTH_SEED_PASSPHRASE"));

    std::fs::write(
        datadir.join("berth.toml"),
        format!("[seed]\n{CHEAP_ARGON2}"),
    )
    .expect("toml");
    let env = [("BERTH_SEED_PASSPHRASE", PASSPHRASE)];
    let sealed = berthd_with_env(&datadir, &["seed", "seal"], &env);
    let said = String::from_utf8_lossy(&sealed.stdout);
    assert!(
        sealed.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&sealed.stderr)
    );
    assert!(said.contains("sealed with passphrase"), "{said}");
    assert!(!datadir.join("mnemonic").exists(), "the plaintext is gone");
    assert!(!datadir.join("seed.sealed.prev").exists());

    let daemon =
        Daemon::try_start_with_env(&datadir, &["--expose-mnemonic"], &env).expect("restarts");
    assert_unlocks(&daemon, &datadir);
    assert_eq!(daemon.terminate().0.code(), Some(0));
    // The log from before sealing never held the phrase either.
    assert_no_plaintext(&datadir);
}
