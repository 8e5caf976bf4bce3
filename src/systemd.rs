//! systemd's service notifications (`sd_notify`), written out: a datagram of
//! `KEY=value` lines to the Unix socket named by `$NOTIFY_SOCKET` (a path, or an
//! abstract name with a leading `@`). With `Type=notify` the unit is "started" only at
//! `READY=1`; `WATCHDOG=1` must arrive within `WatchdogSec=` or systemd restarts the
//! service; `STOPPING=1` tells it the shutdown is deliberate; `STATUS=` is what
//! `systemctl status` shows. Outside systemd every call does nothing.
//!
//! Why this is not the `sd-notify` crate (abstract sockets, no `unsafe` to test it, the
//! exact datagrams): `docs/adr/0003-sd-notify.md`.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

/// Where to send notifications, if anywhere.
#[derive(Debug)]
pub struct Notifier {
    target: Option<Target>,
}

#[derive(Debug)]
enum Target {
    Path(PathBuf),
    Abstract(Vec<u8>),
}

impl Notifier {
    /// From `$NOTIFY_SOCKET`; a no-op notifier when it is unset or empty.
    pub fn from_env() -> Notifier {
        let target = std::env::var_os("NOTIFY_SOCKET")
            .filter(|s| !s.is_empty())
            .map(|s| {
                let bytes = std::os::unix::ffi::OsStrExt::as_bytes(s.as_os_str()).to_vec();
                match bytes.strip_prefix(b"@") {
                    Some(name) => Target::Abstract(name.to_vec()),
                    None => Target::Path(PathBuf::from(s)),
                }
            });
        Notifier { target }
    }

    pub fn enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Send `state` (newline-separated `KEY=value` lines). A failure is logged, never
    /// fatal: a daemon must not stop because its supervisor's socket went away.
    pub fn notify(&self, state: &str) {
        let Some(target) = &self.target else { return };
        let sent = UnixDatagram::unbound().and_then(|socket| match target {
            Target::Path(path) => socket.send_to(state.as_bytes(), path),
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.send_to_addr(state.as_bytes(), &addr)
            }
        });
        if let Err(e) = sent {
            tracing::warn!(target: "berth::systemd", error = %e, "cannot notify systemd");
        }
    }

    /// Startup work in progress, for `systemctl status`.
    pub fn status(&self, what: &str) {
        self.notify(&format!("STATUS={what}"));
    }

    pub fn ready(&self, status: &str) {
        self.notify(&format!("READY=1\nSTATUS={status}"));
    }

    pub fn stopping(&self) {
        self.notify("STOPPING=1\nSTATUS=stopping");
    }

    pub fn watchdog(&self) {
        self.notify("WATCHDOG=1");
    }
}

/// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC`, when that is set for
/// this process (`$WATCHDOG_PID` unset or ours), as systemd's documentation advises.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_reach_a_path_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify");
        let receiver = UnixDatagram::bind(&path).expect("bind");
        let notifier = Notifier {
            target: Some(Target::Path(path)),
        };
        notifier.ready("serving");
        let mut buf = [0u8; 256];
        let n = receiver.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");
    }

    #[test]
    fn datagrams_reach_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("berth-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .expect("abstract name");
        let receiver = UnixDatagram::bind_addr(&addr).expect("bind");
        let notifier = Notifier {
            target: Some(Target::Abstract(name.into_bytes())),
        };
        notifier.watchdog();
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }

    #[test]
    fn without_a_socket_nothing_happens() {
        let notifier = Notifier { target: None };
        assert!(!notifier.enabled());
        notifier.ready("serving");
    }
}
