//! `berthd store check [<file>]`: open a wallet database (migrating it if it is older),
//! check its integrity and invariants, and print a summary.

use std::path::Path;

use crate::store::{Store, StoreConfig};

pub async fn check(path: &Path) -> anyhow::Result<()> {
    let config = StoreConfig {
        full_check: true,
        ..StoreConfig::default()
    };
    let (store, report) = Store::open_async(path, &config).await?;
    println!(
        "integrity: {}; schema: version {} (found {})",
        if report.integrity_ok {
            "ok"
        } else {
            "repaired"
        },
        report.schema_now,
        report.schema_found
    );
    let r = store.verify_invariants().await?;
    println!(
        "invariants: ok ({} vtxos, {} movements, {} round states, {} devices)",
        r.vtxos, r.movements, r.round_states, r.devices
    );
    Ok(())
}
