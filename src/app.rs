//! Composition root: the command line in, a running daemon (or a subcommand's output,
//! `commands`) out. The only place that names concrete types and wires them together.
//!
//! [`Daemon::start`] starts the daemon's parts in order: the instance lock, logging, the
//! wallet database, the event log, the engine and its autopilot, the backup schedule,
//! the TLS identity, the API, the listening socket, the DNS-SD announcement, the
//! control socket, and the watches on a storage failure and for systemd's watchdog. [`Daemon::run`] tells
//! systemd it is ready, serves until a signal or a storage failure, and then
//! [`Parts::stop`] stops the parts in the reverse order, from one place.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tokio::task::JoinHandle;

use crate::access::backoff::AuthFailures;
use crate::access::devices::Devices;
use crate::access::pairing::{PairingCodes, PairingTarget};
use crate::access::tickets::TicketBook;
use crate::api::auth::AuthPolicy;
use crate::api::control::ControlState;
use crate::api::v1::notifications::SocketCount;
use crate::api::{ApiOptions, AppState};
use crate::cli::Cli;
use crate::config::settings::{Auth, Settings};
use crate::datadir::Layout;
use crate::engine::Engine;
use crate::events::EventHub;
use crate::fsutil::InstanceLock;
use crate::net::listener::{TlsConfigSource, Transport};
use crate::store::Store;
use crate::tls::ServerIdentity;

/// Run `berthd` as the command line says; the exit code to end the process with.
pub fn main(cli: Cli) -> ExitCode {
    // Before anything is created, and while this is the only thread.
    crate::fsutil::restrict_umask();
    let layout = Layout::new(cli.datadir.clone().unwrap_or_else(Layout::default_root));
    if let Err(e) = layout.check_owner() {
        eprintln!("berthd: {e}");
        return ExitCode::FAILURE;
    }
    let result = match &cli.command {
        Some(command) => crate::commands::run(command, &layout),
        None => Settings::resolve(&cli, layout).and_then(|settings| {
            crate::runtime::build()?.block_on(async { Daemon::start(settings).await?.run().await })
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("berthd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A started daemon, ready to serve.
pub struct Daemon {
    settings: Settings,
    /// Held until every part has stopped: one datadir, one daemon.
    _instance: InstanceLock,
    systemd: Arc<crate::systemd::Notifier>,
    parts: Parts,
    events: Arc<EventHub>,
    /// Open notification websockets, which say goodbye before the parts stop.
    sockets: Arc<SocketCount>,
    listener: tokio::net::TcpListener,
    transport: Transport,
    app: axum::Router,
    bound: SocketAddr,
    /// The reason, once the wallet database has failed.
    fatal: tokio::sync::watch::Receiver<Option<String>>,
}

/// The daemon's running parts, in the order they start. [`Parts::stop`] stops them in
/// the reverse order.
struct Parts {
    store: Store,
    pruner: JoinHandle<()>,
    /// Reads the free space every 30 s and raises `disk-full` (`api::disk`).
    disk_watch: JoinHandle<()>,
    /// Tells what became of a system update as an event (`system_update`), where the
    /// box takes updates.
    update_outcomes: Option<JoinHandle<()>>,
    engine: Arc<Engine>,
    autopilot: JoinHandle<()>,
    /// Ends reserved payments as their movements end (`engine::spending`).
    spending: JoinHandle<()>,
    /// Runs approved payments, expires the others (`api::approvals`).
    approvals: JoinHandle<()>,
    /// What runs them, holding the API's routes until the stop.
    approval_runner: Arc<crate::api::approvals::Runner>,
    /// Nostr Wallet Connect's relays and requests.
    nwc: Arc<crate::nwc::Nwc>,
    /// Webhook deliveries, one task per endpoint.
    webhooks: Arc<crate::webhooks::Webhooks>,
    backups: JoinHandle<()>,
    renewer: Option<JoinHandle<()>>,
    /// Removes console sessions past their time (`console::session`).
    session_sweeper: JoinHandle<()>,
    announcement: Option<crate::net::mdns::MdnsHandle>,
    control: Option<ControlSocket>,
    fatal_watch: JoinHandle<()>,
    watchdog: Option<JoinHandle<()>>,
}

/// The local control socket's server, and how to stop it.
struct ControlSocket {
    path: PathBuf,
    done: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Parts {
    /// Stop every part, the last started first.
    async fn stop(self) {
        if let Some(watchdog) = self.watchdog {
            watchdog.abort();
        }
        self.fatal_watch.abort();
        if let Some(control) = self.control {
            control.done.send_replace(true);
            let _ = control.task.await;
            let _ = std::fs::remove_file(&control.path);
        }
        if let Some(announcement) = self.announcement {
            announcement.stop();
        }
        if let Some(renewer) = self.renewer {
            renewer.abort();
        }
        self.session_sweeper.abort();
        // A payment under way is finished from its record at the next start.
        self.nwc.stop();
        // A delivery cut off is made again at the next start, under the same id.
        self.webhooks.stop();
        self.autopilot.abort();
        self.spending.abort();
        self.approvals.abort();
        // The routes hold the API's state, the store among it: let them go, so that the
        // wallet database is closed when the last of the parts is, not left for redb
        // to repair at the next start.
        self.approval_runner.release_routes();
        // A backup under way finishes on its own thread or is cut off with the process;
        // what it left is removed at the next start.
        self.backups.abort();
        // The engine stops the wallet's tasks, then its event recorder.
        self.engine.unload().await;
        self.pruner.abort();
        self.disk_watch.abort();
        if let Some(watch) = self.update_outcomes {
            watch.abort();
        }
        drop(self.store);
    }
}

impl Daemon {
    /// Start every part, in order. A failure stops the start with what failed.
    pub async fn start(settings: Settings) -> anyhow::Result<Daemon> {
        let layout = &settings.layout;
        layout.ensure()?;
        let instance = layout.lock()?;
        // Before anything is read or written: a datadir barkd or `mkdir` made is 0755,
        // its files 0644, and the database and the log would stay readable to everyone.
        let tightened = layout.make_private()?;
        let token = layout.load_or_create_token()?;
        crate::telemetry::init(crate::telemetry::LogOptions {
            verbose: settings.log.verbose,
            quiet: settings.log.quiet,
            file: settings.log.file.as_deref(),
        })?;
        for change in &tightened {
            tracing::warn!(
                path = %change.path.display(),
                was = %format!("{:04o}", change.was),
                now = %format!("{:04o}", change.now),
                "tightened the permissions of a datadir entry other local users could reach"
            );
        }
        let auth = match settings.auth {
            Auth::Required => AuthPolicy::Token(Arc::new(token)),
            Auth::Disabled => {
                tracing::warn!(
                    "authentication is disabled: anyone who reaches the port controls the wallet"
                );
                AuthPolicy::Disabled
            }
        };
        if crate::engine::spending::clock_offset() != 0 {
            tracing::warn!(
                offset_secs = crate::engine::spending::clock_offset(),
                "{} is set: spending rules read a clock that is not the box's (for tests)",
                crate::engine::spending::CLOCK_OFFSET_ENV
            );
        }
        let systemd = Arc::new(crate::systemd::Notifier::from_env());

        systemd.status("opening the wallet database");
        let (store, report) = Store::open_async(&layout.database(), &settings.store).await?;
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
        let events = EventHub::open(store.clone(), settings.file.event_retention()).await?;
        let pruner = events.spawn_pruner();
        let disk =
            crate::api::disk::DiskReserve::new(layout.root().to_path_buf(), Arc::clone(&events));
        let disk_watch = disk.spawn_watch();

        let engine = Engine::new(
            store.clone(),
            layout.clone(),
            crate::keys::Seeds::new(layout.seed_files(), settings.seed.clone()),
            Arc::clone(&events),
            autopilot_policy(&settings.file),
            settings
                .file
                .household
                .spending_policy()
                .map_err(anyhow::Error::msg)?,
        );
        systemd.status("unlocking the seed");
        engine.start().await?;
        let autopilot = engine.spawn_autopilot();
        let spending = engine.spawn_spending_follower();
        let backups = crate::engine::backup::service::Backups::new(
            settings.file.backup_settings(),
            store.clone(),
            layout.root().to_path_buf(),
            engine.backup_key(),
            Arc::clone(&events),
        );
        let backup_schedule = backups.spawn();

        let identity = match &settings.tls {
            Some(source) => {
                systemd.status("preparing the TLS certificate");
                let source = source.clone();
                Some(
                    tokio::task::spawn_blocking(move || ServerIdentity::open(source))
                        .await
                        .context("preparing the TLS certificate")??,
                )
            }
            None => None,
        };
        let renewer = identity.clone().map(spawn_tls_renewer);

        let devices =
            Arc::new(Devices::load(store.clone(), settings.file.console.session_policy()).await?);
        let claim = Arc::new(crate::access::claim::Claim::new(
            layout.claim(),
            settings.file.claim.reset_ttl(),
        ));
        if let Some(card) = &settings.file.claim.code_file {
            take_up_claim_code(&claim, card);
        }
        let pairing = Arc::new(PairingCodes::default());
        let sockets = Arc::new(SocketCount::default());
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .with_context(|| format!("cannot listen on {}", settings.listen))?;
        let bound = listener.local_addr().unwrap_or(settings.listen);
        let transport = match &identity {
            Some(identity) => Transport::Tls(Arc::clone(identity) as Arc<dyn TlsConfigSource>),
            None => Transport::Plain,
        };
        tracing::info!("Server starting on {}://{bound}", transport.scheme());
        if settings.auth == Auth::Required {
            tracing::info!(
                "the bearer token (admin) is in {}",
                layout.auth_token().display()
            );
        }
        let pin = identity.as_ref().map(|i| i.ca_pin());
        if let Some(pin) = &pin {
            tracing::info!(%pin, "clients pin the TLS CA by this key");
        }
        let hostname = crate::tls::hostname();
        let announcement =
            announce_if_enabled(&settings.file, &hostname, bound.port(), pin.as_deref());
        let pairing_target = Arc::new(PairingTarget {
            bind: bound,
            hostname,
            pin,
        });
        let egress = Arc::new(
            crate::net::egress::Egress::new(
                settings.egress.clone(),
                crate::net::egress::Limits::default(),
            )
            .map_err(anyhow::Error::msg)?,
        );
        // Nostr Wallet Connect: relays are connected to only while a connection names
        // them.
        let nwc = crate::nwc::Nwc::new(
            store.clone(),
            Arc::clone(&engine),
            Arc::clone(&events),
            Arc::clone(&egress),
            crate::nwc::Settings::from(&settings.file.nwc),
        )
        .map_err(anyhow::Error::msg)?;
        nwc.start().await?;
        let webhooks = crate::webhooks::Webhooks::new(
            store.clone(),
            Arc::clone(&events),
            settings.egress.clone(),
            crate::api::v1::notifications::webhook_data,
        )
        .map_err(anyhow::Error::msg)?;
        webhooks.start().await?;
        // Bound before the router is built: the pairing links the console shows name the
        // bound address. Connections queue until `serve` accepts them.
        let approvals = crate::api::approvals::Runner::new(
            Arc::clone(&engine),
            Arc::clone(&devices),
            engine.idempotency_keys(),
            Arc::clone(&nwc),
        );
        let system_update = Arc::new(crate::system_update::SystemUpdate::new(
            settings.file.update.settings(),
            settings.layout.system_update_dir(),
            // The wallet's reserve, and as much again for its growth meanwhile.
            2 * crate::api::disk::RESERVE,
        ));
        let update_outcomes = crate::system_update::spawn_outcome_watch(
            Arc::clone(&system_update),
            Arc::clone(&events),
        );
        let state = AppState {
            approvals: Arc::clone(&approvals),
            engine: Arc::clone(&engine),
            egress,
            nwc: Arc::clone(&nwc),
            webhooks: Arc::clone(&webhooks),
            events: Arc::clone(&events),
            tickets: Arc::new(TicketBook::default()),
            sockets: Arc::clone(&sockets),
            expose_mnemonic: settings.expose_mnemonic,
            devices,
            pairing: Arc::clone(&pairing),
            failures: Arc::new(AuthFailures::default()),
            requests: crate::api::metrics::RequestMetrics::new(),
            backups,
            disk,
            claim,
            pairing_target: Arc::clone(&pairing_target),
            new_wallets: Arc::new(std::sync::Mutex::new(
                crate::access::expiring::ExpiringMap::new(crate::console::wallet::NEW_WALLETS),
            )),
            history_pages: Arc::new(crate::api::v1::page_cache::PageCache::history()),
            vtxo_lists: Arc::new(crate::api::v1::page_cache::PageCache::vtxo_lists()),
            exit_lists: Arc::new(crate::api::v1::page_cache::PageCache::exit_lists()),
            system_update,
            settings_toml: toml::to_string_pretty(&settings.file)
                .unwrap_or_else(|e| format!("# cannot show the configuration: {e}"))
                .into(),
        };
        let session_sweeper = crate::console::session::spawn_sweeper(state.clone());
        let watched = state.clone();
        let app = crate::api::router(
            state.clone(),
            ApiOptions {
                auth,
                allowed_origins: settings.allowed_origins.clone(),
                allowed_hosts: crate::api::host::AllowedHosts::new(
                    &settings.file.server.allowed_hosts,
                ),
                limits: settings.file.request_limits(),
            },
            crate::console::routes(state),
        );

        let control = start_control_socket(
            layout,
            ControlState {
                pairing,
                target: pairing_target,
            },
        );

        let (fatal_tx, fatal) = tokio::sync::watch::channel(None::<String>);
        let failing = store.clone();
        let fatal_watch = tokio::spawn(async move {
            let reason = failing.fatal().await;
            let _ = fatal_tx.send(Some(reason));
        });
        let watchdog = crate::systemd::watchdog_interval()
            .map(|every| spawn_watchdog(Arc::clone(&systemd), watched, every));
        // After the router: approved requests run through its routes.
        let approval_runner = Arc::clone(&approvals);
        let approvals = approvals.spawn();

        Ok(Daemon {
            _instance: instance,
            systemd,
            parts: Parts {
                session_sweeper,
                store,
                pruner,
                disk_watch,
                update_outcomes,
                engine,
                autopilot,
                spending,
                approvals,
                approval_runner,
                nwc,
                webhooks,
                backups: backup_schedule,
                renewer,
                announcement,
                control,
                fatal_watch,
                watchdog,
            },
            events,
            sockets,
            listener,
            transport,
            app,
            bound,
            fatal,
            settings,
        })
    }

    /// Serve until SIGTERM/SIGINT or a storage failure, then stop every part.
    pub async fn run(self) -> anyhow::Result<()> {
        let Daemon {
            settings,
            _instance,
            systemd,
            parts,
            events,
            sockets,
            listener,
            transport,
            app,
            bound,
            fatal,
        } = self;
        // The store is open, the seed unlocked and the port bound: connections queue
        // from here on, and `serve` accepts them at once.
        // Before anything can answer: from here a SIGTERM is a clean stop.
        let signalled = crate::shutdown::listen();
        systemd.ready(&format!("serving on {}://{bound}", transport.scheme()));
        let mut stop = fatal.clone();
        let notifier = Arc::clone(&systemd);
        crate::net::listener::serve(
            listener,
            transport,
            app,
            settings.file.server_limits(),
            async move {
                tokio::select! {
                    _ = signalled => {}
                    _ = stop.wait_for(Option::is_some) => {}
                }
                notifier.stopping();
                // Long-polls answer now and websockets say goodbye, so the drain does
                // not wait out their windows.
                events.stop();
            },
        )
        .await;
        sockets.closed(std::time::Duration::from_secs(2)).await;
        parts.stop().await;
        if let Some(reason) = fatal.borrow().clone() {
            anyhow::bail!("stopped after a wallet database failure: {reason}");
        }
        tracing::info!("berthd stopped");
        Ok(())
    }
}

/// Serve `api::control` on the datadir's control socket. Without it berthd still
/// serves the API; only pairing waits.
fn start_control_socket(layout: &Layout, state: ControlState) -> Option<ControlSocket> {
    let path = layout.control_socket();
    let socket = match crate::net::control::bind(&path) {
        Ok(socket) => socket,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "no control socket: `berthd pair` cannot reach this daemon");
            return None;
        }
    };
    let (done, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(crate::net::control::serve(
        socket,
        crate::api::control::router(state),
        async move {
            let _ = stopped.wait_for(|done| *done).await;
        },
    ));
    Some(ControlSocket { path, done, task })
}

/// Take up a claim code written onto the card (`[claim] code_file`). A failure is
/// logged, not fatal: the box still serves, and `berthd claim reset` opens a claim.
fn take_up_claim_code(claim: &crate::access::claim::Claim, card: &std::path::Path) {
    match claim.take_up(card) {
        Ok(true) => tracing::info!(file = %card.display(),
            "took up the provisioned claim code (its hash is kept, the file removed)"),
        Ok(false) => {}
        Err(e) => tracing::error!(file = %card.display(), error = %e,
            "cannot take up the provisioned claim code; `berthd claim reset` opens a claim"),
    }
}

/// The autopilot's policy, from `berth.toml` `[watchdog]` and `[exits]`.
fn autopilot_policy(settings: &crate::config::BerthToml) -> crate::engine::autopilot::Policy {
    use bitcoin::{Amount, FeeRate};
    let rate = |sat_vb: u32| FeeRate::from_sat_per_vb_u32(sat_vb);
    let (watchdog, exits) = (&settings.watchdog, &settings.exits);
    crate::engine::autopilot::Policy {
        watchdog: watchdog.enabled,
        check_interval: std::time::Duration::from_secs(watchdog.check_interval_secs.get()),
        warn_blocks: watchdog.warn_blocks.map(|b| b.to_u32()),
        exit_margin_blocks: watchdog.exit_margin_blocks.map(|b| b.to_u32()),
        refresh_attempts: watchdog.refresh_attempts.to_u32(),
        auto_exit_fee_budget: watchdog.auto_exit_fee_budget_sat.map(Amount::from_sat),
        exit_progress_interval: std::time::Duration::from_secs(exits.progress_interval_secs.get()),
        exit_fee_rate: (exits.fee_rate_sat_vb.get() > 0)
            .then(|| rate(exits.fee_rate_sat_vb.to_u32())),
        max_exit_fee_rate: rate(exits.max_fee_rate_sat_vb.to_u32()),
    }
}

/// Ping systemd's watchdog every `every` (half of `WatchdogSec=`), but only while the
/// daemon's status snapshot (`api::status`, what `/health` renders) is taken within that
/// time and the wallet database has not stopped: a wedged daemon (its store or engine
/// not answering) stops pinging and systemd restarts it.
fn spawn_watchdog(
    systemd: Arc<crate::systemd::Notifier>,
    state: AppState,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let healthy = matches!(
                tokio::time::timeout(every, crate::api::status::snapshot(&state, crate::api::status::Reading::Facts)).await,
                Ok(now) if now.store_error.is_none() && now.wallet.unreadable.is_none()
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

/// Announce the TLS listener by DNS-SD when `[discovery] mdns` says so. A failure is
/// logged, not fatal: the appliance stays reachable by address.
fn announce_if_enabled(
    file: &crate::config::BerthToml,
    hostname: &str,
    port: u16,
    pin: Option<&str>,
) -> Option<crate::net::mdns::MdnsHandle> {
    if !file.discovery.mdns {
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
