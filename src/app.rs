//! Composition root: turns the command line into a running daemon. The only place
//! that names concrete types.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use crate::api::auth::AuthPolicy;
use crate::api::tickets::TicketBook;
use crate::api::v1::notifications::SocketCount;
use crate::api::{ApiOptions, AppState};
use crate::cli::{Cli, Command, SecretCommand, StoreCommand};
use crate::datadir;
use crate::engine::Engine;
use crate::events::EventHub;
use crate::store::{Store, StoreConfig};

/// Run `berthd` as the command line says; the exit code to end the process with.
pub fn main(cli: Cli) -> ExitCode {
    let datadir = cli.datadir.clone().unwrap_or_else(datadir::default_path);
    let result = match &cli.command {
        Some(Command::Secret { action }) => secret(&datadir, action),
        Some(Command::Store {
            command: StoreCommand::Check { path },
        }) => {
            let path = path
                .clone()
                .unwrap_or_else(|| datadir.join(datadir::DB_FILE));
            runtime().and_then(|rt| rt.block_on(check_store(&path)))
        }
        None => runtime().and_then(|rt| rt.block_on(daemon(cli, datadir))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("berthd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A bounded runtime: two workers (the boards have two to four cores) and a capped
/// blocking pool for redb.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(16)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn secret(datadir: &Path, action: &SecretCommand) -> anyhow::Result<()> {
    datadir::ensure(datadir)?;
    let token = match action {
        SecretCommand::Show => datadir::load_or_create_token(datadir)?,
        SecretCommand::Refresh { secret } => datadir::refresh_token(datadir, *secret)?,
    };
    println!("{}", token.expose());
    Ok(())
}

async fn check_store(path: &Path) -> anyhow::Result<()> {
    let (store, report) = Store::open_async(path, &StoreConfig::default()).await?;
    println!(
        "integrity: {}; schema: version {} (found {})",
        if report.integrity_ok {
            "ok"
        } else {
            "repaired"
        },
        report.schema_now,
        report.schema_found
    );
    let r = store.verify_invariants().await?;
    println!(
        "invariants: ok ({} vtxos, {} movements, {} round states, {} devices)",
        r.vtxos, r.movements, r.round_states, r.devices
    );
    Ok(())
}

/// Refuse to serve an unauthenticated API where other machines can reach it, unless
/// the operator said something else protects the port.
fn check_no_auth(cli: &Cli) -> anyhow::Result<()> {
    if cli.no_auth && !cli.dangerously_allow_remote_no_auth && !cli.host.is_loopback() {
        anyhow::bail!(
            "refusing to start: --no-auth on {} would give every client that reaches the \
             port full wallet access; bind a loopback address, or use \
             --dangerously-allow-remote-no-auth if something in front of berthd restricts access",
            cli.host
        );
    }
    Ok(())
}

fn auth_policy(cli: &Cli, token: datadir::AuthToken) -> AuthPolicy {
    if cli.no_auth || cli.dangerously_allow_remote_no_auth {
        AuthPolicy::Disabled
    } else {
        AuthPolicy::Token(Arc::new(token))
    }
}

fn parse_origins(origins: &[String]) -> anyhow::Result<Vec<axum::http::HeaderValue>> {
    origins
        .iter()
        .map(|o| {
            let well_formed = (o.starts_with("http://") || o.starts_with("https://"))
                && !o.ends_with('/')
                && o.matches("://").count() == 1;
            anyhow::ensure!(
                well_formed,
                "invalid CORS origin {o:?} (expected http[s]://host[:port])"
            );
            o.parse()
                .with_context(|| format!("invalid CORS origin {o:?}"))
        })
        .collect()
}

async fn daemon(cli: Cli, datadir: PathBuf) -> anyhow::Result<()> {
    // Refusals first, before touching anything.
    check_no_auth(&cli)?;
    let origins = parse_origins(&cli.allowed_origins)?;
    datadir::ensure(&datadir)?;
    let _instance = datadir::lock(&datadir)?;
    let settings = crate::config::BerthToml::load(&datadir)?;
    let auth = auth_policy(&cli, datadir::load_or_create_token(&datadir)?);

    let logfile = match (&cli.logfile, cli.no_logfile) {
        (_, true) => None,
        (Some(path), false) => Some(path.clone()),
        (None, false) => Some(datadir.join(datadir::LOG_FILE)),
    };
    crate::telemetry::init(crate::telemetry::LogOptions {
        verbose: cli.verbose,
        quiet: cli.quiet,
        file: logfile.as_deref(),
    })?;
    if matches!(auth, AuthPolicy::Disabled) {
        tracing::warn!(
            "authentication is disabled: anyone who reaches the port controls the wallet"
        );
    }

    let (store, report) =
        Store::open_async(&datadir.join(datadir::DB_FILE), &settings.store_config()).await?;
    if !report.integrity_ok {
        tracing::warn!("the wallet database was repaired after an unclean shutdown");
    }
    let interrupted = store.interrupt_idempotency_keys().await?;
    if interrupted > 0 {
        tracing::warn!(
            interrupted,
            "fund-moving requests were running when berthd last stopped; their outcome is unknown"
        );
    }
    let events = EventHub::open(store.clone(), settings.event_retention()).await?;
    let pruner = events.spawn_pruner();
    let engine = Engine::new(store.clone(), datadir.clone(), Arc::clone(&events));
    engine.start().await?;
    let sockets = Arc::new(SocketCount::default());
    let state = AppState {
        engine: Arc::clone(&engine),
        events: Arc::clone(&events),
        tickets: Arc::new(TicketBook::default()),
        sockets: Arc::clone(&sockets),
        expose_mnemonic: cli.expose_mnemonic,
    };
    let app = crate::api::router(
        state,
        ApiOptions {
            auth,
            allowed_origins: origins,
        },
    );

    let addr = SocketAddr::new(cli.host, cli.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    tracing::info!(
        "Server starting on http://{}",
        listener.local_addr().unwrap_or(addr)
    );

    let fatal = store.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(None::<String>);
    let stop_on_fatal = tokio::spawn(async move {
        let reason = fatal.fatal().await;
        let _ = stop_tx.send(Some(reason));
    });
    let mut stop = stop_rx.clone();
    let stopping = Arc::clone(&events);
    crate::net::listener::serve(
        listener,
        app,
        crate::net::listener::ServerLimits::default(),
        async move {
            tokio::select! {
                _ = crate::shutdown::signal() => {}
                _ = stop.wait_for(Option::is_some) => {}
            }
            // Long-polls answer now and websockets say goodbye, so the drain does not
            // wait out their windows.
            stopping.stop();
        },
    )
    .await;
    sockets.closed(std::time::Duration::from_secs(2)).await;
    stop_on_fatal.abort();
    pruner.abort();
    engine.unload().await;
    if let Some(reason) = stop_rx.borrow().clone() {
        anyhow::bail!("stopped after a wallet database failure: {reason}");
    }
    drop(store);
    tracing::info!("berthd stopped");
    Ok(())
}
