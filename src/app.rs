//! Composition root: turns the command line into a running daemon. The only place
//! that names concrete types.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use crate::access::backoff::AuthFailures;
use crate::access::devices::Devices;
use crate::access::pairing::{PairingCodes, PairingTarget};
use crate::access::tickets::TicketBook;
use crate::api::auth::AuthPolicy;
use crate::api::control::ControlState;
use crate::api::v1::notifications::SocketCount;
use crate::api::{ApiOptions, AppState};
use crate::cli::{Cli, Command, SecretCommand, StoreCommand, TlsCommand};
use crate::datadir::{self, Layout};
use crate::engine::Engine;
use crate::events::EventHub;
use crate::net::listener::{TlsConfigSource, Transport};
use crate::store::{Store, StoreConfig};
use crate::tls::{ServerIdentity, TlsSource};

/// Run `berthd` as the command line says; the exit code to end the process with.
pub fn main(cli: Cli) -> ExitCode {
    let layout = Layout::new(cli.datadir.clone().unwrap_or_else(Layout::default_root));
    if let Err(e) = layout.check_owner() {
        eprintln!("berthd: {e}");
        return ExitCode::FAILURE;
    }
    let result = match &cli.command {
        Some(Command::Secret { action }) => secret(&layout, action),
        Some(Command::Store {
            command: StoreCommand::Check { path },
        }) => {
            let path = path.clone().unwrap_or_else(|| layout.database());
            runtime().and_then(|rt| rt.block_on(check_store(&path)))
        }
        Some(Command::Tls {
            command: TlsCommand::Show,
        }) => tls_show(&layout),
        Some(Command::Seed { command }) => seed_command(&layout, command),
        Some(Command::Pair { scopes, name }) => {
            runtime().and_then(|rt| rt.block_on(pair(&layout, scopes, name.as_deref())))
        }
        None => runtime().and_then(|rt| rt.block_on(daemon(cli, layout))),
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

fn secret(layout: &Layout, action: &SecretCommand) -> anyhow::Result<()> {
    layout.ensure()?;
    let token = match action {
        SecretCommand::Show => layout.load_or_create_token()?,
        SecretCommand::Refresh { secret } => layout.refresh_token(*secret)?,
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

/// The autopilot's policy, from `berth.toml` `[watchdog]` and `[exits]`.
fn autopilot_policy(settings: &crate::config::BerthToml) -> crate::engine::autopilot::Policy {
    use bitcoin::{Amount, FeeRate};
    let rate =
        |sat_vb: u64| FeeRate::from_sat_per_vb_u32(u32::try_from(sat_vb).unwrap_or(u32::MAX));
    let (watchdog, exits) = (&settings.watchdog, &settings.exits);
    crate::engine::autopilot::Policy {
        watchdog: watchdog.enabled,
        check_interval: std::time::Duration::from_secs(watchdog.check_interval_secs),
        // Validated to at most 65,535 blocks (config).
        warn_blocks: watchdog.warn_blocks.map(|b| b as u32),
        exit_margin_blocks: watchdog.exit_margin_blocks.map(|b| b as u32),
        refresh_attempts: watchdog.refresh_attempts as u32,
        auto_exit_fee_budget: watchdog.auto_exit_fee_budget_sat.map(Amount::from_sat),
        exit_progress_interval: std::time::Duration::from_secs(exits.progress_interval_secs),
        exit_fee_rate: (exits.fee_rate_sat_vb > 0).then(|| rate(exits.fee_rate_sat_vb)),
        max_exit_fee_rate: rate(exits.max_fee_rate_sat_vb),
    }
}

/// Ping systemd's watchdog every `every` (half of `WatchdogSec=`), but only while the
/// wallet database and the engine answer within that time: a wedged daemon stops
/// pinging and systemd restarts it.
fn spawn_watchdog(
    systemd: Arc<crate::systemd::Notifier>,
    engine: Arc<Engine>,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let healthy = engine.store_failure().is_none()
                && matches!(
                    tokio::time::timeout(every, engine.wallet_fingerprint()).await,
                    Ok(Ok(_))
                );
            if healthy {
                systemd.watchdog();
            } else {
                tracing::warn!(target: "berth::systemd",
                    "the wallet database or the engine did not answer: no watchdog ping");
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// The datadir's seed, with the key sources of `berth.toml [seed]`, the passphrase of
/// `BERTH_SEED_PASSPHRASE` and systemd's `$CREDENTIALS_DIRECTORY`.
fn seeds(layout: &Layout, settings: &crate::config::BerthToml) -> crate::keys::Seeds {
    let passphrase = std::env::var(crate::keys::PASSPHRASE_ENV)
        .ok()
        .filter(|p| !p.is_empty())
        .map(zeroize::Zeroizing::new);
    let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
    crate::keys::Seeds::new(
        layout.seed_files(),
        settings.seed.settings(passphrase, credentials),
    )
}

/// Where the listener's certificate comes from: the user's files, or the datadir's
/// generated local CA.
fn tls_source(layout: &Layout, settings: &crate::config::BerthToml) -> TlsSource {
    match (&settings.tls.cert_file, &settings.tls.key_file) {
        (Some(cert_chain), Some(key)) => TlsSource::UserSupplied {
            cert_chain: cert_chain.clone(),
            key: key.clone(),
        },
        _ => TlsSource::Generated {
            dir: layout.tls_dir(),
            leaf_validity_days: settings.tls.leaf_validity_days as u32,
        },
    }
}

fn tls_show(layout: &Layout) -> anyhow::Result<()> {
    layout.ensure()?;
    let settings = crate::config::BerthToml::load(&layout.berth_toml())?;
    let source = tls_source(layout, &settings);
    let identity = ServerIdentity::open(source.clone())?;
    println!("pin: {}", identity.ca_pin());
    let summary = crate::tls::describe(&source)?;
    println!("CA valid until: {}", summary.ca_not_after.to_rfc3339());
    if let Some(leaf) = summary.leaf {
        println!(
            "leaf valid from {} until {}",
            leaf.not_before.to_rfc3339(),
            leaf.not_after.to_rfc3339()
        );
        println!("leaf names: {}", leaf.names.join(", "));
    }
    Ok(())
}

/// `berthd seed status` and `berthd seed seal`. They work beside a running daemon: the
/// daemon already holds the seed it unlocked, and reads the envelope at its next start.
fn seed_command(layout: &Layout, command: &crate::cli::SeedCommand) -> anyhow::Result<()> {
    use crate::keys::{Kdf, SeedStatus};
    let settings = crate::config::BerthToml::load(&layout.berth_toml())?;
    let seeds = seeds(layout, &settings);
    match command {
        crate::cli::SeedCommand::Status => match seeds.status()? {
            SeedStatus::None => println!(
                "seed: none (no wallet has been created in {})",
                layout.root().display()
            ),
            SeedStatus::Plaintext => println!(
                "seed: plaintext mnemonic file (barkd's format; `berthd seed seal` seals it)"
            ),
            SeedStatus::Sealed {
                version,
                sources,
                binding,
                kdf,
            } => {
                println!("seed: sealed (envelope version {version})");
                println!("key sources: {}", sources.join(" + "));
                if !binding.is_empty() {
                    println!("bound to secure element: {binding}");
                }
                if let Kdf::Argon2id(p) = kdf {
                    println!(
                        "passphrase KDF: Argon2id, {} KiB, {} iterations, {} lanes",
                        p.memory_kib, p.iterations, p.parallelism
                    );
                }
            }
        },
        crate::cli::SeedCommand::Seal => {
            let sources = seeds.seal_plaintext()?;
            println!(
                "seed sealed with {}; the plaintext mnemonic file is gone",
                sources.names().join(" + ")
            );
        }
    }
    Ok(())
}

/// Open a pairing window on the running daemon and show the QR code.
async fn pair(layout: &Layout, scopes: &[String], name: Option<&str>) -> anyhow::Result<()> {
    let request = crate::api::control::OpenWindowRequest {
        scopes: scopes.to_vec(),
        name: name.map(String::from),
    };
    let body = serde_json::to_vec(&request).context("encoding the request")?;
    let (status, answer) =
        crate::net::control::post(&layout.control_socket(), "/pairing", body).await?;
    if !status.is_success() {
        let message = serde_json::from_slice::<serde_json::Value>(&answer)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(String::from))
            .unwrap_or_else(|| String::from_utf8_lossy(&answer).into_owned());
        anyhow::bail!("berthd refused to open a pairing window ({status}): {message}");
    }
    let window: crate::api::control::OpenWindowResponse =
        serde_json::from_slice(&answer).context("reading berthd's answer")?;
    let qr = qrcode::QrCode::new(window.uri.as_bytes())
        .context("the pairing URI does not fit in a QR code")?
        .render::<qrcode::render::unicode::Dense1x2>()
        .quiet_zone(true)
        .build();
    println!("{qr}");
    println!(
        "Scan this with the phone, or enter the link by hand:\n{}",
        window.uri
    );
    println!(
        "Scopes: {}. The code works once, until {} (10 minutes).",
        window.scopes.join(", "),
        chrono::DateTime::from_timestamp(window.expires_at as i64, 0)
            .map(|t| t.to_rfc3339())
            .unwrap_or_else(|| window.expires_at.to_string())
    );
    Ok(())
}

/// Whether to serve TLS. It is on for every non-loopback address; plain HTTP there
/// needs a flag that says so, and barkd's `--dangerously-allow-remote-no-auth` keeps
/// its meaning (something in front of berthd protects the port, so it serves plain
/// HTTP as barkd does).
fn use_tls(cli: &Cli) -> anyhow::Result<bool> {
    if cli.dangerously_allow_remote_no_auth {
        return Ok(false);
    }
    if cli.no_tls {
        if !cli.host.is_loopback() && !cli.dangerously_allow_plaintext_lan {
            anyhow::bail!(
                "refusing to start: --no-tls on {} would send tokens and payments across the \
                 network unencrypted; bind a loopback address, or add \
                 --dangerously-allow-plaintext-lan",
                cli.host
            );
        }
        return Ok(false);
    }
    Ok(cli.tls || !cli.host.is_loopback())
}

/// Announce the TLS listener by DNS-SD when `[discovery] mdns` says so. A failure is
/// logged, not fatal: the appliance stays reachable by address.
fn announce_if_enabled(
    settings: &crate::config::BerthToml,
    hostname: &str,
    port: u16,
    pin: Option<&str>,
) -> Option<crate::net::mdns::MdnsHandle> {
    if !settings.discovery.mdns {
        return None;
    }
    let Some(pin) = pin else {
        tracing::warn!("DNS-SD announcement is on, but only a TLS listener is announced");
        return None;
    };
    if crate::net::mdns::multicast_interface().is_none() {
        tracing::warn!(
            "DNS-SD: no up, multicast-capable LAN interface yet; the announcement reaches \
             nobody until one appears"
        );
    }
    let announcement = crate::net::mdns::Announcement {
        hostname: hostname.to_string(),
        port,
        pin: pin.to_string(),
    };
    crate::net::mdns::announce(&announcement)
        .map_err(|e| tracing::warn!(error = %e, "cannot announce the API by DNS-SD"))
        .ok()
}

/// Keep the served certificate current: check every minute (a new LAN address, a leaf
/// near expiry) and on SIGHUP (which also re-reads user-supplied files).
fn spawn_tls_renewer(identity: Arc<ServerIdentity>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP");
                None
            }
        };
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                Some(()) = async { match hangup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => {
                    tracing::info!("SIGHUP received, checking the TLS certificate");
                }
            }
            let identity = Arc::clone(&identity);
            match tokio::task::spawn_blocking(move || identity.refresh()).await {
                Ok(Ok(Some(renewal))) => {
                    tracing::info!(reason = %renewal, "TLS certificate renewed")
                }
                Ok(Ok(None)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot renew the TLS certificate; serving the current one")
                }
                Err(e) => tracing::warn!(error = %e, "the TLS renewal task failed"),
            }
        }
    })
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

async fn daemon(cli: Cli, layout: Layout) -> anyhow::Result<()> {
    // Refusals first, before touching anything.
    check_no_auth(&cli)?;
    let tls = use_tls(&cli)?;
    let origins = parse_origins(&cli.allowed_origins)?;
    layout.ensure()?;
    let _instance = layout.lock()?;
    let settings = crate::config::BerthToml::load(&layout.berth_toml())?;
    let auth = auth_policy(&cli, layout.load_or_create_token()?);

    let logfile = match (&cli.logfile, cli.no_logfile) {
        (_, true) => None,
        (Some(path), false) => Some(path.clone()),
        (None, false) => Some(layout.log_file()),
    };
    crate::telemetry::init(crate::telemetry::LogOptions {
        verbose: cli.verbose,
        quiet: cli.quiet,
        file: logfile.as_deref(),
    })?;
    let token_required = !matches!(auth, AuthPolicy::Disabled);
    if !token_required {
        tracing::warn!(
            "authentication is disabled: anyone who reaches the port controls the wallet"
        );
    }
    let systemd = Arc::new(crate::systemd::Notifier::from_env());
    systemd.status("opening the wallet database");

    let (store, report) = Store::open_async(&layout.database(), &settings.store_config()).await?;
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
    let engine = Engine::new(
        store.clone(),
        layout.clone(),
        seeds(&layout, &settings),
        Arc::clone(&events),
        autopilot_policy(&settings),
    );
    systemd.status("unlocking the seed");
    engine.start().await?;
    let autopilot = engine.spawn_autopilot();
    let devices = Arc::new(Devices::load(store.clone()).await?);
    let pairing = Arc::new(PairingCodes::default());
    let identity = if tls {
        systemd.status("preparing the TLS certificate");
        let source = tls_source(&layout, &settings);
        Some(
            tokio::task::spawn_blocking(move || ServerIdentity::open(source))
                .await
                .context("preparing the TLS certificate")??,
        )
    } else {
        None
    };
    let sockets = Arc::new(SocketCount::default());
    let state = AppState {
        engine: Arc::clone(&engine),
        events: Arc::clone(&events),
        tickets: Arc::new(TicketBook::default()),
        sockets: Arc::clone(&sockets),
        expose_mnemonic: cli.expose_mnemonic,
        devices,
        pairing: Arc::clone(&pairing),
        failures: Arc::new(AuthFailures::default()),
        requests: crate::api::metrics::RequestMetrics::new(),
    };
    let app = crate::api::router(
        state,
        ApiOptions {
            auth,
            allowed_origins: origins,
            limits: settings.request_limits(),
        },
    );

    let addr = SocketAddr::new(cli.host, cli.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let transport = match &identity {
        Some(identity) => Transport::Tls(Arc::clone(identity) as Arc<dyn TlsConfigSource>),
        None => Transport::Plain,
    };
    tracing::info!("Server starting on {}://{bound}", transport.scheme());
    if token_required {
        tracing::info!(
            "the bearer token (admin) is in {}",
            layout.auth_token().display()
        );
    }
    let pin = identity.as_ref().map(|i| i.ca_pin());
    if let Some(pin) = &pin {
        tracing::info!(%pin, "clients pin the TLS CA by this key");
    }
    let renewer = identity.clone().map(spawn_tls_renewer);
    let hostname = crate::tls::hostname();
    let announcement = announce_if_enabled(&settings, &hostname, bound.port(), pin.as_deref());
    let (control_done, control_stop) = tokio::sync::watch::channel(false);
    // Without its control socket berthd still serves the API; only pairing waits.
    let control_task = match crate::net::control::bind(&layout.control_socket()) {
        Ok(control) => {
            let control_app = crate::api::control::router(ControlState {
                pairing,
                target: PairingTarget {
                    bind: bound,
                    hostname,
                    pin,
                },
            });
            Some(tokio::spawn(crate::net::listener::serve_unix(
                control,
                control_app,
                async move {
                    let mut stop = control_stop;
                    let _ = stop.wait_for(|done| *done).await;
                },
            )))
        }
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "no control socket: `berthd pair` cannot reach this daemon");
            None
        }
    };

    let fatal = store.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(None::<String>);
    let stop_on_fatal = tokio::spawn(async move {
        let reason = fatal.fatal().await;
        let _ = stop_tx.send(Some(reason));
    });
    let mut stop = stop_rx.clone();
    let stopping = Arc::clone(&events);
    let watchdog = crate::systemd::watchdog_interval()
        .map(|every| spawn_watchdog(Arc::clone(&systemd), Arc::clone(&engine), every));
    // The store is open, the seed unlocked and the port bound: connections queue from
    // here on, and `serve` accepts them at once.
    systemd.ready(&format!("serving on {}://{bound}", transport.scheme()));
    let notifier = Arc::clone(&systemd);
    crate::net::listener::serve(
        listener,
        transport,
        app,
        settings.server_limits(),
        async move {
            tokio::select! {
                _ = crate::shutdown::signal() => {}
                _ = stop.wait_for(Option::is_some) => {}
            }
            notifier.stopping();
            // Long-polls answer now and websockets say goodbye, so the drain does not
            // wait out their windows.
            stopping.stop();
        },
    )
    .await;
    sockets.closed(std::time::Duration::from_secs(2)).await;
    control_done.send_replace(true);
    if let Some(task) = control_task {
        let _ = task.await;
    }
    let _ = std::fs::remove_file(layout.control_socket());
    if let Some(announcement) = announcement {
        announcement.stop();
    }
    if let Some(renewer) = renewer {
        renewer.abort();
    }
    stop_on_fatal.abort();
    if let Some(watchdog) = watchdog {
        watchdog.abort();
    }
    pruner.abort();
    autopilot.abort();
    engine.unload().await;
    if let Some(reason) = stop_rx.borrow().clone() {
        anyhow::bail!("stopped after a wallet database failure: {reason}");
    }
    drop(store);
    tracing::info!("berthd stopped");
    Ok(())
}
