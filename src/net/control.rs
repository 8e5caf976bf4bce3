//! The control socket, `<datadir>/control.sock`: a Unix socket serving `api::control`
//! to berthd's own user only. `berthd pair` talks to the running daemon through it, so
//! opening a pairing window needs local access to the box, not a token.
//!
//! Three locks on it, each enough alone:
//! - the socket is 0600 from the moment its name appears: it is bound inside a fresh
//!   0700 directory, restricted there, and only then renamed into place ([`bind`]), so
//!   no one else can connect between the bind and the chmod;
//! - the datadir around it is 0700 (`datadir::Layout::make_private`);
//! - every connection's peer is checked by its credentials (`SO_PEERCRED`): only
//!   berthd's own user and root are served ([`serve`]). Root is let in because it can
//!   read the datadir's admin token anyway; refusing it would protect nothing.

use std::future::Future;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use hyper_util::rt::TokioIo;

/// Connections served at once: a person running `berthd pair` needs one.
const MAX_CONNECTIONS: usize = 16;
/// Time open connections get to finish when the daemon stops.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Bind the control socket at `path` (the datadir's, `datadir::Layout`). A socket file
/// left by a daemon that did not stop cleanly is replaced: the caller holds the datadir
/// lock, so no other daemon owns it.
///
/// The socket is bound in a new 0700 directory beside `path` (`path` + `.tmp`), made
/// 0600 there and renamed to `path`: a socket's mode is only settable after `bind`
/// created it, and until then it has whatever the umask gave it.
pub fn bind(path: &Path) -> anyhow::Result<tokio::net::UnixListener> {
    remove_if_present(path)?;
    let staging = crate::fsutil::temporary_of(path);
    match std::fs::remove_dir_all(&staging) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot remove the stale {}", staging.display()));
        }
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))?;
    let bound = bind_in(&staging, path);
    let _ = std::fs::remove_dir_all(&staging);
    bound
}

fn bind_in(staging: &Path, path: &Path) -> anyhow::Result<tokio::net::UnixListener> {
    // A short name: a socket path has at most 107 bytes.
    let inside = staging.join("s");
    let listener = tokio::net::UnixListener::bind(&inside)
        .with_context(|| format!("cannot listen on {}", inside.display()))?;
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot restrict {}", inside.display()))?;
    std::fs::rename(&inside, path)
        .with_context(|| format!("cannot move the control socket to {}", path.display()))?;
    Ok(listener)
}

fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove the stale {}", path.display())),
    }
}

/// Whether a peer with `peer_uid` may use the control socket of a daemon running as
/// `own_uid`: the same user, or root.
fn may_connect(peer_uid: u32, own_uid: u32) -> bool {
    peer_uid == own_uid || peer_uid == 0
}

/// What a refused peer reads: an HTTP answer, so `berthd pair` can say why.
fn refusal(own_uid: u32) -> Vec<u8> {
    let body = format!(
        "{{\"message\":\"only berthd's own user (uid {own_uid}) may use its control socket\"}}"
    );
    format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serve `app` on the control socket until `shutdown` resolves, then let open requests
/// finish (briefly). A connection from another user (by `SO_PEERCRED`, see
/// [`may_connect`]) is answered 403 and closed before anything of it is read.
pub async fn serve(
    listener: tokio::net::UnixListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()>,
) {
    let own_uid = rustix::process::geteuid().as_raw();
    let limits = crate::net::listener::ServerLimits {
        max_connections: MAX_CONNECTIONS,
        drain_timeout: DRAIN_TIMEOUT,
        ..crate::net::listener::ServerLimits::default()
    };
    let admit = move |stream: &tokio::net::UnixStream| match stream.peer_cred() {
        Ok(peer) if may_connect(peer.uid(), own_uid) => Ok(()),
        Ok(peer) => {
            tracing::warn!(peer_uid = peer.uid(), peer_pid = ?peer.pid(),
                "refused a control socket connection from another user");
            Err(refusal(own_uid))
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot tell who connected to the control socket; refused");
            Err(Vec::new())
        }
    };
    crate::net::listener::serve_unix(listener, app, limits, shutdown, admit).await;
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
