//! A gRPC proxy in front of captaind for scenarios where the Ark server fails one
//! method transiently, as an overloaded or restarting server would, refuses one with
//! the words captaind uses, or rejects one VTXO as a round input, as it does one it
//! holds unusable, and passes everything else through.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::stack::{Berthd, Stack};

/// A gRPC proxy in front of captaind: each call goes through unchanged, except calls
/// to the methods [`ArkProxy::fail`] names, which it answers itself with `INTERNAL`
/// (not a rejection to bark: it retries the step later) and counts, calls to those
/// [`ArkProxy::refuse`] names, answered `INVALID_ARGUMENT` with its message, and round
/// submissions with the VTXO [`ArkProxy::reject_input`] names.
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
    /// Methods refused, with captaind's message for the refusal.
    refusing: Mutex<HashMap<String, String>>,
    /// A VTXO (its id string and its 36 bytes as the protocol carries them) refused as
    /// a round input.
    unusable: Mutex<Option<(String, Vec<u8>)>>,
    /// Round submissions refused for it, and passed through.
    rejected: Mutex<u32>,
    submitted: Mutex<u32>,
}

/// captaind's round submission.
const SUBMIT_PAYMENT: &str = "/bark_server.ArkService/SubmitPayment";

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

    /// The message to refuse a call to `path` with, if it is refused; counts it as
    /// failed.
    fn refuses(&self, path: &str) -> Option<String> {
        let method = path.rsplit('/').next().unwrap_or_default();
        let message = self.refusing.lock().expect("gate").get(method).cloned()?;
        *self
            .failed
            .lock()
            .expect("gate")
            .entry(method.to_string())
            .or_default() += 1;
        Some(message)
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
        self.berthd_with(stack, name, "[watchdog]\nenabled = false\n", "")
    }

    /// [`ArkProxy::berthd`] with this `berth.toml`, and these lines added to bark's
    /// `config.toml`.
    pub fn berthd_with(&self, stack: &Stack, name: &str, berth_toml: &str, bark: &str) -> Berthd {
        let datadir = stack.datadir_with_config(name, berth_toml);
        let config = stack.bark_config(&self.url) + bark;
        std::fs::write(datadir.join("config.toml"), config).expect("config.toml");
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

    /// Refuse every call to `method` from now on as captaind refuses a request it
    /// will not serve: `INVALID_ARGUMENT` with `message`.
    pub fn refuse(&self, method: &str, message: &str) {
        self.gate
            .refusing
            .lock()
            .expect("gate")
            .insert(method.to_string(), message.to_string());
    }

    /// Pass every call through from now on.
    pub fn heal(&self) {
        self.gate.failing.lock().expect("gate").clear();
        self.gate.refusing.lock().expect("gate").clear();
    }

    /// Refuse from now on every round submission that has `vtxo` among its inputs, as
    /// captaind refuses an input it holds unusable: `INVALID_ARGUMENT`, the VTXO's id in
    /// the `identifiers` metadata (bark drops those inputs and submits the rest again).
    pub fn reject_input(&self, vtxo: &str) {
        let id: ark::VtxoId = vtxo.parse().expect("a VTXO id");
        *self.gate.unusable.lock().expect("gate") =
            Some((vtxo.to_string(), id.to_bytes().to_vec()));
    }

    /// Round submissions refused for the unusable input, and those passed through.
    pub fn submissions(&self) -> (u32, u32) {
        (
            *self.gate.rejected.lock().expect("gate"),
            *self.gate.submitted.lock().expect("gate"),
        )
    }

    /// How many calls to `method` were failed or refused so far.
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
                axum::body::Body,
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
                    if let Some(message) = gate.refuses(request.uri().path()) {
                        return Ok(rejection(&message, None));
                    }
                    let (mut parts, body) = request.into_parts();
                    let mut body = axum::body::Body::new(body);
                    let unusable = gate.unusable.lock().expect("gate").clone();
                    if let Some((id, bytes)) =
                        unusable.filter(|_| parts.uri.path() == SUBMIT_PAYMENT)
                    {
                        // Read the request to look for the VTXO among its inputs (a
                        // submission is a few kilobytes).
                        let Ok(whole) = axum::body::to_bytes(body, 1 << 20).await else {
                            return Ok(rejection("unreadable submission", None));
                        };
                        if whole.windows(bytes.len()).any(|w| w == bytes.as_slice()) {
                            *gate.rejected.lock().expect("gate") += 1;
                            return Ok(rejection("input vtxo(s) not spendable", Some(&id)));
                        }
                        *gate.submitted.lock().expect("gate") += 1;
                        body = axum::body::Body::from(whole);
                    }
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

/// A trailers-only gRPC `INVALID_ARGUMENT` answer, with the unusable input's id in the
/// `identifiers` metadata as captaind sends it.
fn rejection(message: &str, identifiers: Option<&str>) -> hyper::Response<axum::body::Body> {
    let mut response = hyper::Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", "3")
        .header("grpc-message", message);
    if let Some(ids) = identifiers {
        response = response.header("identifiers", ids);
    }
    response
        .body(axum::body::Body::empty())
        .expect("a gRPC error response")
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
