//! A real browser for tests: Debian's headless Chromium, driven over the Chrome
//! DevTools Protocol (`tests/integration/browser.rs` drives the console with it, and
//! so does the regtest stack's household scenario).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::harness;

/// What a walk through a page with the Tab key found (`Page::keyboard_walk`).
#[derive(Debug)]
pub struct KeyboardWalk {
    /// The first element Tab reached.
    pub first: String,
    /// Visible focusable elements Tab never reached.
    pub unreached: Vec<String>,
    /// Elements reached without a visible focus mark.
    pub unmarked: Vec<String>,
}

/// Headless Chromium with a DevTools port, killed when dropped.
pub struct Chromium {
    child: Child,
    _profile: tempfile::TempDir,
    port: u16,
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Chromium {
    /// Start it; `spki_pins`: the SPKI hashes (standard base64, comma separated) of the
    /// certificates it accepts beside the system's, empty for none.
    pub fn start(binary: &Path, spki_pins: &str) -> Chromium {
        let profile = tempfile::tempdir().expect("profile");
        let port = harness::free_port();
        let child = Command::new(binary)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--window-size=900,1400",
                &format!("--remote-debugging-port={port}"),
                &format!("--user-data-dir={}", profile.path().display()),
                // The box's own CA and leaf, by their keys: as a user who compared the
                // pin would trust them (and nothing else).
                &format!("--ignore-certificate-errors-spki-list={spki_pins}"),
                "about:blank",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        Chromium {
            child,
            _profile: profile,
            port,
        }
    }

    /// The DevTools websocket of its page.
    pub fn page_socket(&self) -> String {
        let mut url = None;
        harness::wait_until("chromium's DevTools", 30, || {
            let Some(body) = devtools_get(self.port, "/json/list") else {
                return false;
            };
            let list: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            url = list.as_array().and_then(|targets| {
                targets
                    .iter()
                    .find(|t| t["type"] == "page")
                    .and_then(|t| t["webSocketDebuggerUrl"].as_str())
                    .map(String::from)
            });
            url.is_some()
        });
        url.expect("a page target")
    }
}

/// GET from DevTools' HTTP endpoint, read to its `Content-Length` (it keeps the
/// connection open whatever the request says).
fn devtools_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        // DevTools builds its websocket URLs from `Host`: it must carry the port.
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes())
        .ok()?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })?;
            if body.len() >= length {
                return Some(body[..length].to_owned());
            }
        }
    }
}

/// A DevTools connection to one page.
pub struct Page {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
    shots: PathBuf,
    /// How long a page may take to come (a booted box under emulation is slow).
    patience: Duration,
}

impl Page {
    /// Connect to `browser`'s page; screenshots go to `shots`; a page may take
    /// `patience` to come.
    pub async fn connect(browser: &Chromium, shots: PathBuf, patience: Duration) -> Page {
        let (socket, _) = tokio_tungstenite::connect_async(browser.page_socket())
            .await
            .expect("DevTools websocket");
        let mut page = Page {
            socket,
            next_id: 0,
            shots,
            patience,
        };
        page.call("Page.enable", json!({})).await;
        page
    }

    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let value = self.call_raw(method, params).await;
        assert!(value.get("error").is_none(), "{method}: {value}");
        value["result"].clone()
    }

    /// The whole answer to a call, an error included.
    pub async fn call_raw(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"id": id, "method": method, "params": params}).to_string();
        self.socket
            .send(Message::text(message))
            .await
            .expect("send to chromium");
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method} within 30 s"))
                .expect("chromium closed the socket")
                .expect("read from chromium");
            let Message::Text(text) = frame else { continue };
            let value: Value = serde_json::from_str(&text).expect("json");
            if value["id"] == id {
                return value;
            }
        }
    }

    pub async fn eval(&mut self, script: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": script, "returnByValue": true}),
            )
            .await;
        result["result"]["value"].clone()
    }

    /// Wait until the page at `path` has loaded and its text contains `marker`.
    pub async fn wait_for(&mut self, path: &str, marker: &str) -> String {
        let deadline = Instant::now() + self.patience;
        loop {
            // Asked while a form's navigation is under way, Chromium may answer that the
            // page went away ("Inspected target navigated or closed"): not there yet.
            let answer = self
                .call_raw(
                    "Runtime.evaluate",
                    json!({
                        "expression": "JSON.stringify([document.readyState, location.pathname, document.body ? document.body.innerText : ''])",
                        "returnByValue": true
                    }),
                )
                .await;
            let state = answer["result"]["result"]["value"].clone();
            let state: Value =
                serde_json::from_str(state.as_str().unwrap_or("[]")).unwrap_or(Value::Null);
            let text = state[2].as_str().unwrap_or_default().to_owned();
            if state[0] == "complete" && state[1] == path && text.contains(marker) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "the page at {path} with {marker:?} did not come: {state}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A page of `browser` signed in to the console at `base` (plain HTTP on the
    /// loopback, as the regtest stack serves it) with `cookie` (`name=value`, as
    /// `harness::console_session` makes it); screenshots go to the shots directory
    /// `shots` (`shots_dir`).
    pub async fn signed_in(browser: &Chromium, base: &str, cookie: &str, shots: &str) -> Page {
        let (name, value) = cookie.split_once('=').expect("a cookie");
        let mut page = Page::connect(browser, shots_dir(shots), Duration::from_secs(120)).await;
        // Secure: its name's prefix asks for it; Chromium trusts the loopback as secure.
        page.call(
            "Network.setCookie",
            json!({ "name": name, "value": value, "url": base, "path": "/", "secure": true, "httpOnly": true }),
        )
        .await;
        page
    }

    /// Emulate the reader's colour scheme (`prefers-color-scheme`): dark or light.
    pub async fn set_dark(&mut self, dark: bool) {
        let value = if dark { "dark" } else { "light" };
        self.call(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": value}]}),
        )
        .await;
    }

    /// Walk the page with the Tab key, as a keyboard user does: what could be focused
    /// (a visible link, button or field) that Tab never reached, and what was reached
    /// without a visible focus mark (no outline). The first stop is also returned (the
    /// skip link, on the console's pages). A group of radio buttons is one stop (the
    /// arrow keys move within it), as browsers make it.
    pub async fn keyboard_walk(&mut self) -> KeyboardWalk {
        const FOCUSABLE: &str = "a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), \
            select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex='-1'])";
        let count = self
            .eval(&format!(
                "[...document.querySelectorAll(\"{FOCUSABLE}\")].filter(e => e.getClientRects().length > 0).length"
            ))
            .await
            .as_u64()
            .unwrap_or(0);
        let mut first = None;
        let mut unmarked = Vec::new();
        // Until Tab comes back to the first stop (a date field has a stop per part, so
        // an element may be met more than once), within a bound.
        for _ in 0..(count * 4 + 8) {
            for kind in ["keyDown", "keyUp"] {
                self.call(
                    "Input.dispatchKeyEvent",
                    json!({"type": kind, "key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9}),
                )
                .await;
            }
            let stop = self
                .eval(
                    "(() => { const e = document.activeElement; if (!e || e === document.body) return null; \
                     const first = e.dataset.walked === 'first'; const seen = !!e.dataset.walked; \
                     if (!seen) e.dataset.walked = document.querySelector('[data-walked]') ? 'yes' : 'first'; \
                     const s = getComputedStyle(e); \
                     return JSON.stringify({first, seen, marked: s.outlineStyle !== 'none' && s.outlineWidth !== '0px', \
                       what: e.outerHTML.slice(0, 100)}) })()",
                )
                .await;
            let Some(stop) = stop.as_str() else { continue };
            let stop: Value = serde_json::from_str(stop).expect("json");
            if stop["first"] == true {
                break;
            }
            if stop["seen"] == true {
                continue;
            }
            let what = stop["what"].as_str().unwrap_or_default().to_owned();
            first.get_or_insert_with(|| what.clone());
            if stop["marked"] != true {
                unmarked.push(what);
            }
        }
        let unreached = self
            .eval(&format!(
                "JSON.stringify([...document.querySelectorAll(\"{FOCUSABLE}\")]\
                 .filter(e => e.getClientRects().length > 0 && !e.dataset.walked)\
                 .filter(e => !(e.type === 'radio' && document.querySelector(`input[type=radio][name='${{e.name}}'][data-walked]`)))\
                 .map(e => e.outerHTML.slice(0, 100)))"
            ))
            .await;
        let unreached = serde_json::from_str(unreached.as_str().unwrap_or("[]")).expect("json");
        KeyboardWalk {
            first: first.unwrap_or_default(),
            unreached,
            unmarked,
        }
    }

    /// What axe-core (its script: `axe`) finds wrong on the page as it is now, of
    /// impact `serious` or `critical`: one line per rule, with the elements it names.
    pub async fn accessibility_faults(&mut self, axe: &str) -> Vec<String> {
        self.call(
            "Runtime.evaluate",
            json!({"expression": axe, "returnByValue": true}),
        )
        .await;
        let found = self
            .call(
                "Runtime.evaluate",
                json!({
                    "expression": "axe.run(document, {resultTypes: ['violations']}).then(r => \
                        JSON.stringify(r.violations \
                          .filter(v => v.impact === 'serious' || v.impact === 'critical') \
                          .map(v => `${v.id} (${v.impact}): ${v.help}: ` + \
                            v.nodes.slice(0, 5).map(n => n.target.join(' ')).join(', '))))",
                    "returnByValue": true,
                    "awaitPromise": true,
                }),
            )
            .await;
        let text = found["result"]["value"].as_str().unwrap_or("null");
        serde_json::from_str(text).unwrap_or_else(|e| panic!("axe-core's answer ({e}): {found}"))
    }

    pub async fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
    }

    /// Save a screenshot as `name`.png; its PNG bytes.
    pub async fn screenshot(&mut self, name: &str) -> Vec<u8> {
        use base64::Engine as _;
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("data"))
            .expect("base64");
        std::fs::write(self.shots.join(format!("{name}.png")), &png).expect("save screenshot");
        png
    }
}

/// axe-core's script (`tests/console`, installed by `scripts/ensure-deps`), or `None`.
pub fn axe_source() -> Option<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/console/node_modules/axe-core/axe.min.js");
    std::fs::read_to_string(path).ok()
}

/// Debian's Chromium, or `None` (the test `test` reported skipped).
pub fn chromium_binary(test: &str) -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
    });
    if found.is_none() {
        harness::skip(
            test,
            "chromium is not installed (scripts/ensure-deps installs it)",
        );
    }
    found
}

/// A directory for screenshots, under cargo's temporary directory.
pub fn shots_dir(name: &str) -> PathBuf {
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&shots).expect("screenshots dir");
    shots
}
