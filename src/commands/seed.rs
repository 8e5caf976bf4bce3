//! `berthd seed status | seal`: how the seed is kept, and sealing barkd's plaintext
//! file (`docs/seed.md`).

use crate::datadir::Layout;

/// `berthd seed status` and `berthd seed seal`. They work beside a running daemon: the
/// daemon already holds the seed it unlocked, and reads the envelope at its next start.
pub fn run(layout: &Layout, command: &crate::cli::SeedCommand) -> anyhow::Result<()> {
    use crate::keys::{Kdf, SeedStatus};
    let settings = crate::config::settings::berth_toml(layout)?;
    let seeds = crate::keys::Seeds::new(
        layout.seed_files(),
        crate::config::settings::seed_settings(&settings),
    );
    match command {
        crate::cli::SeedCommand::Status => match seeds.status()? {
            SeedStatus::None => {
                println!(
                    "seed: none (no wallet has been created in {})",
                    layout.root().display()
                );
                // What create will do, so an owner can check before the phrase exists.
                match (seeds.seals_with(), seeds.seals_when_present()) {
                    (None, None) => println!(
                        "a new seed: plaintext mnemonic file (no key source is configured)"
                    ),
                    (Some(with), optional) => println!(
                        "a new seed: sealed with {}{}",
                        with.names().join(" + "),
                        optional.map_or(String::new(), |s| format!(
                            " (+ {} if it answers then)",
                            s.names().join(" + ")
                        ))
                    ),
                    (None, Some(optional)) => println!(
                        "a new seed: sealed with {} if it answers then, else the plaintext \
                         mnemonic file",
                        optional.names().join(" + ")
                    ),
                }
            }
            SeedStatus::Plaintext => println!(
                "seed: plaintext mnemonic file (barkd's format; `berthd seed seal` seals it)"
            ),
            SeedStatus::Sealed {
                version,
                sources,
                binding,
                kdf,
            } => {
                println!("seed: sealed (envelope version {version})");
                println!("key sources: {}", sources.join(" + "));
                if !binding.is_empty() {
                    println!("bound to secure element: {binding}");
                }
                if let Kdf::Argon2id(p) = kdf {
                    println!(
                        "passphrase KDF: Argon2id, {} KiB, {} iterations, {} lanes",
                        p.memory_kib, p.iterations, p.parallelism
                    );
                }
            }
        },
        crate::cli::SeedCommand::Seal => {
            let sources = seeds.seal_plaintext()?;
            println!(
                "seed sealed with {}; the plaintext mnemonic file is gone",
                sources.names().join(" + ")
            );
        }
    }
    Ok(())
}
