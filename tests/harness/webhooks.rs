//! A webhook receiver on loopback for the tests (`tests/integration/webhooks.rs`, the
//! console's, the e2e Lightning scenario): it answers from a script of replies (then
//! 204) and keeps every request it took, with when it came.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::Value;

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    Status(u16),
    /// Hold the request this long, then answer 204.
    Hold(Duration),
}

/// One request the receiver took.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: String,
    /// When it came.
    pub at: SystemTime,
    /// The status it answered (0: it held the request and the sender went away).
    pub answered: u16,
}

impl Received {
    pub fn id(&self) -> &str {
        &self.headers["webhook-id"]
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

/// A loopback webhook receiver: answers from a script of replies (then 204), and keeps
/// everything it took.
pub struct Receiver {
    port: u16,
    script: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub fn start() -> Receiver {
        Self::on(TcpListener::bind("127.0.0.1:0").expect("bind"))
    }

    pub fn on(listener: TcpListener) -> Receiver {
        let port = listener.local_addr().expect("addr").port();
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (Arc::clone(&script), Arc::clone(&received));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (s, r) = (Arc::clone(&s), Arc::clone(&r));
                std::thread::spawn(move || serve(stream, &s, &r));
            }
        });
        Receiver {
            port,
            script,
            received,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    pub fn then(&self, replies: &[Reply]) {
        self.script.lock().expect("script").extend(replies);
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("received").clone()
    }

    /// The deliveries it answered 2xx, in the order they came.
    pub fn delivered(&self) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| (200..300).contains(&r.answered))
            .collect()
    }
}

fn serve(stream: TcpStream, script: &Mutex<VecDeque<Reply>>, received: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    // reqwest keeps connections alive: serve requests until the sender closes.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reply = script
            .lock()
            .expect("script")
            .pop_front()
            .unwrap_or(Reply::Status(204));
        let mut entry = Received {
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
            at: SystemTime::now(),
            answered: 0,
        };
        let status = match reply {
            Reply::Status(code) => code,
            Reply::Hold(how_long) => {
                received.lock().expect("received").push(entry.clone());
                std::thread::sleep(how_long);
                let mut stream = stream.try_clone().expect("clone");
                let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
                return;
            }
        };
        entry.answered = status;
        received.lock().expect("received").push(entry);
        let mut stream = stream.try_clone().expect("clone");
        if write!(stream, "HTTP/1.1 {status} X\r\nContent-Length: 2\r\n\r\nok").is_err() {
            return;
        }
    }
}
