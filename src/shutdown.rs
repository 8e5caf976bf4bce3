//! Shutdown signals: SIGTERM (systemd, `kill`) and SIGINT (Ctrl-C).

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Listen for SIGTERM and SIGINT from now on; the future resolves when one comes. The
/// handlers are installed by this call, not when the future is first polled: a signal
/// that arrives between the two (a supervisor's stop right after start) is then still
/// a clean shutdown rather than the default action's kill.
pub fn listen() -> impl Future<Output = ()> {
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        async fn next(s: std::io::Result<Signal>, name: &str) {
            match s {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot listen for {name}");
                    std::future::pending::<()>().await;
                }
            }
        }
        tokio::select! {
            _ = next(term, "SIGTERM") => tracing::info!("SIGTERM received, shutting down"),
            _ = next(int, "SIGINT") => tracing::info!("SIGINT received, shutting down"),
        }
    }
}
