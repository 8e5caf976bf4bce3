//! `berthd tls show`: the CA pin clients check and the certificates' details, made
//! first if they do not exist yet.

use crate::datadir::Layout;
use crate::tls::ServerIdentity;

pub fn show(layout: &Layout) -> anyhow::Result<()> {
    layout.ensure()?;
    let settings = crate::config::settings::berth_toml(layout)?;
    let source = crate::config::settings::tls_source(layout, &settings);
    let identity = ServerIdentity::open(source.clone())?;
    println!("pin: {}", identity.ca_pin());
    let summary = crate::tls::describe(&source)?;
    println!("CA valid until: {}", summary.ca_not_after.to_rfc3339());
    if summary.ca_permits.is_empty() {
        println!("CA may sign for: any name (no name constraints)");
    } else {
        println!("CA may sign for: {}", summary.ca_permits.join(", "));
    }
    if let Some(leaf) = summary.leaf {
        println!(
            "leaf valid from {} until {}",
            leaf.not_before.to_rfc3339(),
            leaf.not_after.to_rfc3339()
        );
        println!("leaf names: {}", leaf.names.join(", "));
    }
    Ok(())
}
