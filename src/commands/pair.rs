//! `berthd pair`: open a pairing window on the running daemon, through its control
//! socket (so pairing needs local access to the box, not a token), and show the QR
//! code for the phone to scan.

use anyhow::Context;

use crate::datadir::Layout;

/// Open a pairing window on the running daemon and show the QR code.
pub async fn run(layout: &Layout, scopes: &[String], name: Option<&str>) -> anyhow::Result<()> {
    let request = crate::api::control::OpenWindowRequest {
        scopes: scopes.to_vec(),
        name: name.map(String::from),
    };
    let body = serde_json::to_vec(&request).context("encoding the request")?;
    let (status, answer) =
        crate::net::control::post(&layout.control_socket(), "/pairing", body).await?;
    if !status.is_success() {
        let message = serde_json::from_slice::<serde_json::Value>(&answer)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(String::from))
            .unwrap_or_else(|| String::from_utf8_lossy(&answer).into_owned());
        anyhow::bail!("berthd refused to open a pairing window ({status}): {message}");
    }
    let window: crate::api::control::OpenWindowResponse =
        serde_json::from_slice(&answer).context("reading berthd's answer")?;
    let qr = qrcode::QrCode::new(window.uri.as_bytes())
        .context("the pairing URI does not fit in a QR code")?
        .render::<qrcode::render::unicode::Dense1x2>()
        .quiet_zone(true)
        .build();
    println!("{qr}");
    println!(
        "Scan this with the phone, or enter the link by hand:\n{}",
        window.uri
    );
    println!(
        "Scopes: {}. The code works once, until {} (10 minutes).",
        window.scopes.join(", "),
        chrono::DateTime::from_timestamp(window.expires_at as i64, 0)
            .map(|t| t.to_rfc3339())
            .unwrap_or_else(|| window.expires_at.to_string())
    );
    Ok(())
}
