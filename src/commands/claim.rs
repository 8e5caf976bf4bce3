//! `berthd claim reset`: open the box's claim with a new code, on the box itself (so it
//! needs local access, not a token), and show it for a browser or phone to use. The
//! running daemon reads the claim at each attempt: no restart is needed.

use anyhow::Context;

use crate::access::claim::Claim;
use crate::datadir::Layout;

pub fn reset(layout: &Layout) -> anyhow::Result<()> {
    layout.ensure()?;
    let settings = crate::config::settings::berth_toml(layout)?;
    let code = Claim::new(layout.claim(), settings.claim.reset_ttl())
        .reset()
        .context("opening the claim")?;
    // The pin lets the claiming browser or phone check it reached this box.
    let source = crate::config::settings::tls_source(layout, &settings);
    let pin = crate::tls::ServerIdentity::open(source)
        .map(|identity| identity.ca_pin())
        .context("reading the TLS identity")?;
    let uri = format!(
        "berth://claim?v=1&h={}.local&pin={pin}&t={}",
        crate::tls::hostname(),
        code.expose()
    );
    let qr = qrcode::QrCode::new(uri.as_bytes())
        .context("the claim URI does not fit in a QR code")?
        .render::<qrcode::render::unicode::Dense1x2>()
        .quiet_zone(true)
        .build();
    println!("{qr}");
    println!("Claim code: {}", code.expose());
    println!("Link: {uri}");
    println!(
        "It works once (POST /api/v1/claim), for a new admin device, within {} hours; any \
         earlier claim code is void. The TLS pin is {pin}.",
        settings.claim.reset_code_hours.get()
    );
    Ok(())
}
