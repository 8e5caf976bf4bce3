//! A gRPC proxy in front of captaind for scenarios where the Ark server fails one
//! method transiently, as an overloaded or restarting server would, and passes
//! everything else through.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::stack::{Berthd, Stack};

/// A gRPC proxy in front of captaind: each call goes through unchanged, except calls
/// to the methods [`ArkProxy::fail`] names, which it answers itself with `INTERNAL`
/// (not a rejection to bark: it retries the step later) and counts.
pub struct ArkProxy {
    url: String,
    gate: Arc<Gate>,
    /// Runs the proxy; dropped with it.
    _rt: tokio::runtime::Runtime,
}

#[derive(Default)]
struct Gate {
    failing: Mutex<HashSet<String>>,
    failed: Mutex<HashMap<String, u32>>,
}

impl Gate {
    /// Whether to fail a call to `path` (`/bark_server.ArkService/<method>`); counts it.
    fn fails(&self, path: &str) -> bool {
        let method = path.rsplit('/').next().unwrap_or_default();
        if !self.failing.lock().expect("gate").contains(method) {
            return false;
        }
        *self
            .failed
            .lock()
            .expect("gate")
            .entry(method.to_string())
            .or_default() += 1;
        true
    }
}

impl ArkProxy {
    /// Listen on a free loopback port; `upstream` is captaind's `http://host:port`.
    pub fn start(upstream: &str) -> ArkProxy {
        let upstream = upstream
            .strip_prefix("http://")
            .expect("captaind speaks plain HTTP/2 on loopback")
            .to_string();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("proxy runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let gate = Arc::new(Gate::default());
        rt.spawn(accept(listener, upstream, Arc::clone(&gate)));
        ArkProxy {
            url: format!("http://127.0.0.1:{port}"),
            gate,
            _rt: rt,
        }
    }

    /// A berthd whose wallet (created) reaches captaind through this proxy. Its
    /// watchdog stays out of the way: only the API moves funds in these scenarios.
    pub fn berthd(&self, stack: &Stack, name: &str) -> Berthd {
        let datadir = stack.datadir_with_config(name, "[watchdog]\nenabled = false\n");
        std::fs::write(datadir.join("config.toml"), stack.bark_config(&self.url))
            .expect("config.toml");
        let berthd = Berthd::start(name, &datadir);
        let (status, body) = berthd.post("/api/v1/wallet/create", json!({"network": "regtest"}));
        assert_eq!(status, 200, "create: {body}");
        berthd
    }

    /// Fail every call to `method` from now on.
    pub fn fail(&self, method: &str) {
        self.gate
            .failing
            .lock()
            .expect("gate")
            .insert(method.to_string());
    }

    /// Pass every call through from now on.
    pub fn heal(&self) {
        self.gate.failing.lock().expect("gate").clear();
    }

    /// How many calls to `method` were failed so far.
    pub fn failed(&self, method: &str) -> u32 {
        self.gate
            .failed
            .lock()
            .expect("gate")
            .get(method)
            .copied()
            .unwrap_or_default()
    }
}

/// Each client connection gets its own connection to captaind (HTTP/2 with prior
/// knowledge on both sides, as tonic speaks it without TLS).
async fn accept(listener: tokio::net::TcpListener, upstream: String, gate: Arc<Gate>) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let upstream = upstream.clone();
        let gate = Arc::clone(&gate);
        tokio::spawn(async move {
            // Without captaind the client's connection just closes, as captaind's would.
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                return;
            };
            let Ok((sender, connection)) = hyper::client::conn::http2::handshake::<
                _,
                _,
                hyper::body::Incoming,
            >(TokioExecutor::new(), TokioIo::new(server))
            .await
            else {
                return;
            };
            tokio::spawn(connection);
            let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                let mut sender = sender.clone();
                let gate = Arc::clone(&gate);
                let upstream = upstream.clone();
                async move {
                    if gate.fails(request.uri().path()) {
                        // A trailers-only gRPC answer: the status in the headers.
                        let failed = hyper::Response::builder()
                            .header("content-type", "application/grpc")
                            .header("grpc-status", "13")
                            .header("grpc-message", "failed by the e2e proxy")
                            .body(axum::body::Body::empty())
                            .expect("a gRPC error response");
                        return Ok::<_, hyper::Error>(failed);
                    }
                    let (mut parts, body) = request.into_parts();
                    let path = parts
                        .uri
                        .path_and_query()
                        .map_or("/", |p| p.as_str())
                        .to_string();
                    parts.uri = format!("http://{upstream}{path}")
                        .parse()
                        .expect("an upstream URI");
                    let response = sender
                        .send_request(hyper::Request::from_parts(parts, body))
                        .await?;
                    Ok(response.map(axum::body::Body::new))
                }
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(client), service)
                .await;
        });
    }
}

/// The answer (`status`, raw response, body) to a request sent again with the key of
/// one answered `first` with 202: the same answer, replayed by the key layer.
pub fn assert_replayed_202(
    first: &serde_json::Value,
    (status, raw, again): (u16, String, serde_json::Value),
) {
    assert_eq!(
        (status, &again),
        (202, first),
        "the retry with the same key gets the first answer"
    );
    assert!(
        raw.to_ascii_lowercase()
            .contains("idempotent-replayed: true"),
        "{raw}"
    );
}
