//! Shutdown signals: SIGTERM (systemd, `kill`) and SIGINT (Ctrl-C).

/// Resolves when the process is asked to stop.
pub async fn signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = term => tracing::info!("SIGTERM received, shutting down"),
        r = tokio::signal::ctrl_c() => match r {
            Ok(()) => tracing::info!("SIGINT received, shutting down"),
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGINT");
                std::future::pending::<()>().await;
            }
        },
    }
}
