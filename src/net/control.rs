//! The control socket, `<datadir>/control.sock`: a Unix socket only local users with
//! access to the datadir can open (the file is 0600 in a 0700 directory), serving
//! `api::control`. `berthd pair` talks to the running daemon through it, so opening a
//! pairing window needs local access to the box, not a token.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::Context;
use hyper_util::rt::TokioIo;

/// Bind the control socket at `path` (the datadir's, `datadir::Layout`). A socket file
/// left by a daemon that did not stop cleanly is replaced: the caller holds the datadir
/// lock, so no other daemon owns it.
pub fn bind(path: &Path) -> anyhow::Result<tokio::net::UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).with_context(|| format!("cannot remove the stale {}", path.display()));
        }
    }
    let listener = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot restrict {}", path.display()))?;
    Ok(listener)
}

/// POST `body` (JSON) to `path` of the running daemon's control socket, `socket`: the
/// status and the response body.
pub async fn post(
    socket: &Path,
    path: &str,
    body: Vec<u8>,
) -> anyhow::Result<(axum::http::StatusCode, Vec<u8>)> {
    let stream = tokio::net::UnixStream::connect(&socket)
        .await
        .with_context(|| {
            format!(
                "cannot reach berthd at {} (is it running with this datadir?)",
                socket.display()
            )
        })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("cannot talk to berthd over its control socket")?;
    tokio::spawn(connection);
    let request = axum::http::Request::post(path)
        .header(axum::http::header::HOST, "localhost")
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from(body))
        .context("building the request")?;
    let response = sender
        .send_request(request)
        .await
        .context("berthd did not answer on its control socket")?;
    let status = response.status();
    let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), 1024 * 1024)
        .await
        .context("reading berthd's answer")?;
    Ok((status, bytes.to_vec()))
}
