//! Seed unlock time per key source: one envelope sealed per source in a temporary
//! datadir, then opened again and again, as berthd does at every start.
//!
//! Figures printed (min / median / max over the runs):
//! - passphrase: Argon2id at Berth's default costs (64 MiB, 3 passes, 1 lane), and at
//!   16 and 256 MiB to show how the time scales with memory;
//! - credential file (HKDF);
//! - secure element, through the ATECC608 driver against the behavioural fake chip: the
//!   driver's own cost only. A real chip adds its wake (1.5 ms), the MAC's execution
//!   (at most 55 ms) and the I²C transfers at 100 kHz (about 7 ms); see docs/seed.md;
//! - all three combined.
//!
//! Run: `scripts/bench-seed` (`cargo bench --bench seed`). `BERTH_BENCH_RUNS` sets the
//! runs per source (default 10).

use std::time::{Duration, Instant};

use berth::keys::atecc608::fake::FakeAtecc608;
use berth::keys::atecc608::{Atecc608, DEFAULT_ADDRESS};
use berth::keys::sources::{Combined, CredentialFile, Passphrase, SecureElement};
use berth::keys::{DEFAULT_ARGON2, Kdf, KdfParams, KeySource, SeedVault};
use zeroize::Zeroizing;

const PHRASE: &str = "legal winner thank year wave sausage worth useful legal winner thank yellow";

/// No-op delay: the fake chip answers at once.
struct NoDelay;

impl embedded_hal::delay::DelayNs for NoDelay {
    fn delay_ns(&mut self, _: u32) {}
}

fn passphrase() -> Box<dyn KeySource> {
    Box::new(Passphrase::new(Zeroizing::new("a passphrase".into())).expect("non-empty"))
}

fn secure_element() -> Box<dyn KeySource> {
    let chip = FakeAtecc608::new([1, 2, 3, 4, 5, 6, 7, 8, 9], [(9, [0x42; 32])]);
    Box::new(SecureElement::new(
        Atecc608::new(chip, NoDelay, DEFAULT_ADDRESS),
        9,
    ))
}

fn measure(
    name: &str,
    dir: &std::path::Path,
    runs: usize,
    mut source: Box<dyn KeySource>,
    kdf: Kdf,
) {
    let vault = SeedVault::new(dir.join(format!("{name}.sealed")));
    vault.seal(PHRASE, source.as_mut(), kdf).expect("seal");
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let phrase = vault.open(source.as_mut()).expect("open");
            let took = start.elapsed();
            assert_eq!(phrase.as_str(), PHRASE);
            took
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<32} min {:>9.3} ms  median {:>9.3} ms  max {:>9.3} ms  ({runs} runs)",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    );
}

fn main() {
    let runs = std::env::var("BERTH_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10usize)
        .max(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let credential = dir.path().join("berth-seed");
    std::fs::write(&credential, [0x5a; 32]).expect("credential");
    let argon2 = |memory_mib: u32| {
        Kdf::Argon2id(KdfParams {
            memory_kib: memory_mib * 1024,
            ..DEFAULT_ARGON2
        })
    };

    println!("seed unlock (open the envelope, derive the key, decrypt):");
    for mib in [16, 64, 256] {
        let label = if mib == 64 {
            "passphrase, 64 MiB t=3 (default)".to_string()
        } else {
            format!("passphrase, {mib} MiB t=3")
        };
        measure(&label, dir.path(), runs, passphrase(), argon2(mib));
    }
    measure(
        "credential file",
        dir.path(),
        runs,
        Box::new(CredentialFile::new(credential.clone())),
        Kdf::None,
    );
    measure(
        "secure element (fake chip)",
        dir.path(),
        runs,
        secure_element(),
        Kdf::None,
    );
    let combined = Combined::new(vec![
        passphrase(),
        Box::new(CredentialFile::new(credential)),
        secure_element(),
    ])
    .expect("three kinds");
    measure(
        "combined (all three, default)",
        dir.path(),
        runs,
        Box::new(combined),
        Kdf::Argon2id(DEFAULT_ARGON2),
    );
}
