//! The listener: our own accept loop over hyper's HTTP/1.1 connections.
//!
//! Why not `axum::serve`: it serves every connection through hyper-util's HTTP/1-or-2
//! auto-detection, which cost about 57 KB per open connection here (measured with 1,000
//! idle long-polls), has no header-read timeout (a client that opens a connection and
//! sends nothing holds it forever) and no connection cap. This loop serves HTTP/1.1
//! with websocket upgrades, caps open connections (beyond the cap, new ones wait in the
//! kernel's backlog), and gives a connection 30 seconds to send its request headers.
//! TLS (and h2 by ALPN) comes on top of this loop with the LAN-access issue.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tower::ServiceExt as _;

/// Limits of the listener.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Time a connection has to send a request's headers.
    pub header_read_timeout: Duration,
    /// Time open connections get to finish when the daemon stops.
    pub drain_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Serve `app` on `listener` until `shutdown` resolves, then let open requests finish
/// (up to the drain timeout).
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    // Tells every connection to finish its current request and close.
    let (closing, closing_rx) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: pause instead of spinning.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            app.clone().oneshot(request.map(axum::body::Body::new))
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let mut closing = closing_rx.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                _ = async { closing.wait_for(|c| *c).await.map(|_| ()) } => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    closing.send_replace(true);
    // Every connection holds a slot until it ends: all slots back means all closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain_timeout, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("some connections were still open when the drain timeout passed");
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::*;

    async fn start(limits: ServerLimits) -> (u16, tokio::sync::oneshot::Sender<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let app = Router::new().route("/ping", axum::routing::get(|| async { "pong" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, app, limits, async move {
            let _ = stopped.await;
        }));
        (port, stop)
    }

    fn ping(stream: &mut TcpStream) -> String {
        stream
            .write_all(b"GET /ping HTTP/1.1\r\nHost: t\r\n\r\n")
            .expect("write");
        let mut buf = [0u8; 512];
        let n = stream.read(&mut buf).expect("read");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_connection_is_closed_and_connections_are_capped() {
        let limits = ServerLimits {
            max_connections: 2,
            header_read_timeout: Duration::from_millis(300),
            drain_timeout: Duration::from_secs(1),
        };
        let (port, _stop) = start(limits).await;
        tokio::task::spawn_blocking(move || {
            // Sends nothing: closed once the header timeout passes.
            let mut silent = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            silent
                .set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            let started = std::time::Instant::now();
            let mut buf = [0u8; 64];
            let n = silent.read(&mut buf).unwrap_or(0);
            assert!(
                String::from_utf8_lossy(&buf[..n]).is_empty()
                    || String::from_utf8_lossy(&buf[..n]).contains("408"),
                "closed (or 408) without a request"
            );
            assert!(started.elapsed() < Duration::from_secs(3));

            // Two keep-alive connections fill the cap; a third waits for a slot.
            let mut a = TcpStream::connect(("127.0.0.1", port)).expect("a");
            let mut b = TcpStream::connect(("127.0.0.1", port)).expect("b");
            assert!(ping(&mut a).contains("pong"));
            assert!(ping(&mut b).contains("pong"));
            let mut c = TcpStream::connect(("127.0.0.1", port)).expect("c");
            c.set_read_timeout(Some(Duration::from_millis(150)))
                .expect("timeout");
            c.write_all(b"GET /ping HTTP/1.1\r\nHost: t\r\n\r\n")
                .expect("write");
            let mut buf = [0u8; 512];
            assert!(
                c.read(&mut buf).is_err(),
                "not served while the cap is reached"
            );
            drop(a);
            c.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            let n = c.read(&mut buf).expect("served once a slot frees");
            assert!(String::from_utf8_lossy(&buf[..n]).contains("pong"));
        })
        .await
        .expect("client");
    }
}
