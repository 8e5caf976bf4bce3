//! The listener: our own accept loop, serving the API over TLS (HTTP/1.1 or h2, chosen
//! by ALPN) or, on loopback, plain HTTP/1.1.
//!
//! Why not `axum::serve`: it serves every connection through hyper-util's HTTP/1-or-2
//! auto-detection, which cost about 57 KB per open connection here (measured with 1,000
//! idle long-polls), has no header-read timeout (a client that opens a connection and
//! sends nothing holds it forever), no TLS and no connection cap. This loop:
//! - caps open connections (beyond the cap, new ones wait in the kernel's backlog), and
//!   the share one source address may hold (beyond it, its new connections are closed
//!   at once), so one misbehaving client cannot take every slot;
//! - gives a connection `tls_handshake_timeout` to finish its TLS handshake, and
//!   `header_read_timeout` to send each request's headers (HTTP/1.1), so idle or
//!   slow-dripping clients cannot pin connections;
//! - bounds h2 connections' concurrent streams and pings idle ones;
//! - supports websocket upgrades (over HTTP/1.1);
//! - hands each request the peer's address (`axum::extract::ConnectInfo`), which the
//!   auth-failure backoff keys on, and the address it arrived at ([`LocalAddr`]), which
//!   the `Host` check accepts as a name of this machine.
//!
//! The TLS configuration is read at every accept, so a re-issued certificate is served
//! without a restart. Body size and request time limits are router layers (`api`).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tower::ServiceExt as _;

/// Limits of the listener.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Most connections one source address may hold open at once.
    pub max_connections_per_source: usize,
    /// Time a connection has to complete its TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Time a connection has to send a request's headers (HTTP/1.1).
    pub header_read_timeout: Duration,
    /// Most concurrent requests on one h2 connection.
    pub max_h2_streams: u32,
    /// Time open connections get to finish when the daemon stops.
    pub drain_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 4096,
            // A quarter: a phone, a browser and a script on one laptop need a handful; a
            // reverse proxy on the box itself is one source too, so not much less.
            max_connections_per_source: 1024,
            tls_handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            max_h2_streams: 64,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Limits on one request once it is in, applied by the router (`api::limits`).
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Longest time from the request's headers to the response's.
    pub request_timeout: Duration,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            // The largest bodies are lists of VTXO ids or outputs: kilobytes.
            max_body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(120),
        }
    }
}

/// Where the TLS configuration comes from: asked at every accept, so the source can
/// swap in a re-issued certificate at any time.
pub trait TlsConfigSource: Send + Sync {
    fn current(&self) -> Arc<rustls::ServerConfig>;
}

/// Berth's identity (generated or user-supplied) swaps in a renewed certificate by
/// handing out a new configuration.
impl TlsConfigSource for crate::tls::ServerIdentity {
    fn current(&self) -> Arc<rustls::ServerConfig> {
        self.config()
    }
}

/// How connections are served.
#[derive(Clone)]
pub enum Transport {
    /// Plain HTTP/1.1 (loopback, or behind something that protects the port).
    Plain,
    /// TLS; h2 when the client offers it by ALPN, HTTP/1.1 otherwise.
    Tls(Arc<dyn TlsConfigSource>),
}

impl Transport {
    /// The URL scheme it serves.
    pub fn scheme(&self) -> &'static str {
        match self {
            Transport::Plain => "http",
            Transport::Tls(_) => "https",
        }
    }
}

/// The scheme a connection speaks (TLS or not), in each of its requests' extensions:
/// a page's `Origin` must name it (`console::session::same_origin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// The address a connection arrived at, in each of its requests' extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddr(pub SocketAddr);

/// Open connections by source address, to hold each to its share of the slots.
#[derive(Debug)]
struct Sources {
    limit: usize,
    open: std::sync::Mutex<HashMap<IpAddr, usize>>,
}

/// One connection counted against its source until dropped.
struct SourceSlot(Arc<Sources>, IpAddr);

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self.0.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

impl Sources {
    /// Count a connection from `ip`; `None` when its source holds its share already.
    /// The map holds only sources with open connections, so it is bounded by the
    /// connection cap.
    fn open(self: &Arc<Self>, ip: IpAddr) -> Option<SourceSlot> {
        let ip = ip.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(SourceSlot(Arc::clone(self), ip))
    }
}

/// Serve `app` on `listener` until `shutdown` resolves, then let open requests finish
/// (up to the drain timeout).
pub async fn serve(
    listener: tokio::net::TcpListener,
    transport: Transport,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) {
    let accept = || listener.accept();
    let sources = Arc::new(Sources {
        limit: limits.max_connections_per_source,
        open: Default::default(),
    });
    let drain = accept_loop(accept, limits, shutdown, move |stream, peer, closing| {
        let _ = stream.set_nodelay(true);
        let (app, transport) = (app.clone(), transport.clone());
        let source = sources.open(peer.ip());
        let local = stream.local_addr().ok();
        let addrs = Some((peer, local));
        async move {
            // Dropping the stream closes it: this source holds its share already.
            let Some(_source) = source else {
                tracing::debug!(peer = %peer.ip(), "closed a connection beyond its source's share");
                return;
            };
            match transport {
                Transport::Plain => {
                    serve_connection(stream, Scheme::Http, false, addrs, app, limits, closing)
                        .await;
                }
                Transport::Tls(source) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(source.current());
                    let handshake =
                        tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(stream));
                    match handshake.await {
                        Ok(Ok(tls)) => {
                            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                            serve_connection(tls, Scheme::Https, h2, addrs, app, limits, closing)
                                .await;
                        }
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        }
    })
    .await;
    // Refuse new connections while the open ones finish.
    drop(listener);
    drain.wait().await;
}

/// Serve `app` on a Unix socket (the local control socket) until `shutdown` resolves.
/// `admit` looks at each connection before anything of it is read (the control socket
/// checks its peer's credentials): `Err(answer)` writes `answer` and closes it unserved.
pub async fn serve_unix(
    listener: tokio::net::UnixListener,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
    admit: impl Fn(&tokio::net::UnixStream) -> Result<(), Vec<u8>>,
) {
    let accept = || listener.accept();
    let drain = accept_loop(
        accept,
        limits,
        shutdown,
        move |mut stream, _peer, closing| {
            let verdict = admit(&stream);
            let app = app.clone();
            async move {
                match verdict {
                    Ok(()) => {
                        serve_connection(stream, Scheme::Http, false, None, app, limits, closing)
                            .await
                    }
                    Err(answer) => {
                        use tokio::io::AsyncWriteExt as _;
                        let _ = tokio::time::timeout(Duration::from_secs(1), async {
                            let _ = stream.write_all(&answer).await;
                            let _ = stream.shutdown().await;
                        })
                        .await;
                    }
                }
            }
        },
    )
    .await;
    drop(listener);
    drain.wait().await;
}

/// The accept loop under both listeners: take a connection slot, accept, hand the
/// connection to `handle` on a task of its own holding the slot. When `shutdown`
/// resolves, stop accepting and tell every connection to close after its current
/// request; the returned future waits for them, up to the drain timeout.
async fn accept_loop<S, P, A, AF, H, HF>(
    mut accept: A,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
    handle: H,
) -> Drain
where
    A: FnMut() -> AF,
    AF: Future<Output = std::io::Result<(S, P)>>,
    H: Fn(S, P, tokio::sync::watch::Receiver<bool>) -> HF,
    HF: Future<Output = ()> + Send + 'static,
{
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
            accepted = accept() => accepted,
            _ = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: pause instead of spinning.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let connection = handle(stream, peer, closing_rx.clone());
        tokio::spawn(async move {
            connection.await;
            drop(slot);
        });
    }
    closing.send_replace(true);
    Drain { slots, limits }
}

/// The connections still open after the accept loop stopped.
struct Drain {
    slots: Arc<tokio::sync::Semaphore>,
    limits: ServerLimits,
}

impl Drain {
    /// Wait until they have all closed, or the drain timeout passed.
    async fn wait(self) {
        // Every connection holds a slot until it ends: all slots back means all closed.
        let all = u32::try_from(self.limits.max_connections).unwrap_or(u32::MAX);
        if tokio::time::timeout(self.limits.drain_timeout, self.slots.acquire_many(all))
            .await
            .is_err()
        {
            tracing::warn!("some connections were still open when the drain timeout passed");
        }
    }
}

/// Serve one connection until it ends, or until `closing` turns true (then finish the
/// current request and close). `addrs` (the peer's address and ours) is `None` for the
/// local control socket.
pub async fn serve_connection<I>(
    io: I,
    scheme: Scheme,
    h2: bool,
    addrs: Option<(SocketAddr, Option<SocketAddr>)>,
    app: Router,
    limits: ServerLimits,
    closing: tokio::sync::watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let mut request = request.map(axum::body::Body::new);
        request.extensions_mut().insert(scheme);
        if let Some((peer, local)) = addrs {
            request.extensions_mut().insert(ConnectInfo(peer));
            if let Some(local) = local {
                request.extensions_mut().insert(LocalAddr(local));
            }
        }
        app.clone().oneshot(request)
    });
    let io = TokioIo::new(io);
    let ended = if h2 {
        let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_h2_streams)
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(20))
            .serve_connection(io, service);
        until_closing(connection, closing, |c| c.graceful_shutdown()).await
    } else {
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .serve_connection(io, service)
            .with_upgrades();
        until_closing(connection, closing, |c| c.graceful_shutdown()).await
    };
    if let Err(e) = ended {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Drive `connection` to its end; once `closing` turns true, ask it to shut down
/// gracefully and wait for that.
async fn until_closing<C>(
    connection: C,
    mut closing: tokio::sync::watch::Receiver<bool>,
    graceful: impl FnOnce(Pin<&mut C>),
) -> C::Output
where
    C: Future,
{
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        ended = connection.as_mut() => ended,
        _ = async { closing.wait_for(|c| *c).await.map(|_| ()) } => {
            graceful(connection.as_mut());
            connection.await
        }
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
        tokio::spawn(serve(listener, Transport::Plain, app, limits, async move {
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
    async fn an_unfinished_tls_handshake_is_cut_off() {
        let dir = tempfile::tempdir().expect("tempdir");
        let identity =
            crate::tls::ServerIdentity::open(crate::tls::TlsSource::generated_in(dir.path()))
                .expect("identity");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let app = Router::new().route("/ping", axum::routing::get(|| async { "pong" }));
        let limits = ServerLimits {
            tls_handshake_timeout: Duration::from_millis(300),
            ..ServerLimits::default()
        };
        tokio::spawn(serve(
            listener,
            Transport::Tls(identity),
            app,
            limits,
            std::future::pending(),
        ));
        tokio::task::spawn_blocking(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            // The first bytes of a ClientHello, then nothing.
            s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).expect("write");
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            let started = std::time::Instant::now();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap_or(0);
            assert_eq!(n, 0, "closed without an answer");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
        })
        .await
        .expect("client");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_connection_is_closed_and_connections_are_capped() {
        let limits = ServerLimits {
            max_connections: 2,
            header_read_timeout: Duration::from_millis(300),
            drain_timeout: Duration::from_secs(1),
            ..ServerLimits::default()
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
