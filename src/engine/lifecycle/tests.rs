//! The lifecycle's transitions, including those a crash or a concurrent request
//! makes (`engine::session` has the states).

use super::*;
use crate::store::{EventRetention, Store, StoreConfig};

/// An engine over a real store holding a wallet whose creation has begun (so it
/// exists) but that nothing is opening.
async fn engine_with_an_unloaded_wallet(dir: &std::path::Path) -> Arc<Engine> {
    let (store, _) = Store::open_async(&dir.join("berth.redb"), &StoreConfig::default())
        .await
        .expect("store");
    store
        .begin_wallet_creation(
            Network::Regtest,
            bitcoin::bip32::Fingerprint::default(),
            false,
            InitialScan::FromTip,
        )
        .await
        .expect("a wallet");
    let events = crate::events::EventHub::open(store.clone(), EventRetention::default())
        .await
        .expect("events");
    let layout = crate::datadir::Layout::new(dir.to_path_buf());
    Engine::new(
        store,
        layout.clone(),
        crate::keys::Seeds::new(layout.seed_files(), Default::default()),
        events,
        super::super::autopilot::Policy::default(),
        crate::engine::spending::Policy::default(),
    )
}

/// "Not loaded yet" comes at once while nothing is opening the wallet (its chain
/// source is down between attempts); while an open is under way, a request waits
/// for it to end, and at most `LOAD_WAIT`.
#[tokio::test(start_paused = true)]
async fn a_request_waits_for_an_open_under_way_and_only_for_that() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = engine_with_an_unloaded_wallet(dir.path()).await;
    let started = tokio::time::Instant::now();
    assert!(matches!(engine.loaded().await, Err(EngineError::NotLoaded)));
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "no open under way: no wait"
    );

    // An open that ends (here: fails) after 3 s.
    let fingerprint = Fingerprint::default();
    engine.state.send_replace(WalletState::Opening(fingerprint));
    let ender = Arc::clone(&engine);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        ender.state.send_replace(WalletState::Waiting(fingerprint));
    });
    let started = tokio::time::Instant::now();
    assert!(matches!(engine.loaded().await, Err(EngineError::NotLoaded)));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "waited for the open"
    );

    // An open that does not end: bounded.
    engine.state.send_replace(WalletState::Opening(fingerprint));
    let started = tokio::time::Instant::now();
    assert!(matches!(engine.loaded().await, Err(EngineError::NotLoaded)));
    assert_eq!(started.elapsed(), LOAD_WAIT);

    // A locked wallet is refused at once, never waited for.
    engine.state.send_replace(WalletState::Locked);
    let started = tokio::time::Instant::now();
    assert!(matches!(engine.loaded().await, Err(EngineError::Locked)));
    assert_eq!(started.elapsed(), Duration::ZERO);
}

/// A bark config whose chain source refuses every connection.
fn config_without_a_chain_source() -> bark::Config {
    bark::Config {
        esplora_address: Some("http://127.0.0.1:1".into()),
        ..bark::Config::network_default(Network::Regtest)
    }
}

fn a_mnemonic() -> bark::bip39::Mnemonic {
    bark::bip39::Mnemonic::from_entropy(&[7u8; 16]).expect("entropy")
}

/// The loader's states: `Opening` while it tries, `Waiting` between attempts (the
/// chain source refuses), and the backup key held throughout. A delete while it
/// waits ends it: the wallet is `Closed`, its key dropped, and no later attempt
/// brings it back, not even when the same seed is created again.
#[tokio::test]
async fn a_delete_stops_the_loader_and_nothing_brings_the_wallet_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = engine_with_an_unloaded_wallet(dir.path()).await;
    let fingerprint = Fingerprint::default();
    let mut states = engine.wallet_state();
    engine.hold_backup_key(fingerprint, &a_mnemonic());
    engine
        .spawn_loader(
            Network::Regtest,
            fingerprint,
            config_without_a_chain_source(),
            a_mnemonic(),
            OpenMode::Existing,
        )
        .await;
    assert_eq!(states.borrow_and_update().name(), "opening", "at once");
    tokio::time::timeout(
        Duration::from_secs(30),
        states.wait_for(|s| matches!(s, WalletState::Waiting(f) if *f == fingerprint)),
    )
    .await
    .expect("the failed open leaves the wallet waiting")
    .expect("state");
    assert!(!matches!(
        *engine.backup_key().borrow(),
        crate::engine::backup::HeldKey::None
    ));

    assert!(
        engine
            .delete(&fingerprint.to_string())
            .await
            .expect("delete")
    );
    assert_eq!(engine.wallet_state().borrow().name(), "closed");
    assert!(matches!(
        *engine.backup_key().borrow(),
        crate::engine::backup::HeldKey::None
    ));
    assert!(matches!(engine.loaded().await, Err(EngineError::NoWallet)));

    // At once, the same seed created again (with `force`, its first open failed):
    // the old loader, which tries again within a second, must not take it for its
    // own (same fingerprint) and open or install it.
    engine.state.send_replace(WalletState::Waiting(fingerprint));
    states.borrow_and_update();
    let changed = tokio::time::timeout(Duration::from_secs(5), states.changed()).await;
    assert!(changed.is_err(), "the deleted wallet's loader came back");
}

/// Transitions that lost a race change nothing: an install of a wallet that is no
/// longer being opened (deleted or closed meanwhile) is refused, a loader step for
/// another wallet is refused, and closing from any state ends `Closed`.
#[tokio::test]
async fn transitions_that_lost_a_race_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = engine_with_an_unloaded_wallet(dir.path()).await;
    let ours = Fingerprint::default();
    let other = Fingerprint::from([1, 2, 3, 4]);
    let for_ours = |now: &WalletState| matches!(now, WalletState::Waiting(f) if *f == ours);

    assert!(!engine.advance(for_ours, WalletState::Opening(ours)).await);
    assert_eq!(engine.wallet_state().borrow().name(), "closed");

    engine.state.send_replace(WalletState::Waiting(other));
    assert!(!engine.advance(for_ours, WalletState::Opening(ours)).await);
    assert!(matches!(*engine.wallet_state().borrow(), WalletState::Waiting(f) if f == other));

    for from in [
        WalletState::Locked,
        WalletState::Opening(ours),
        WalletState::Waiting(ours),
    ] {
        engine.state.send_replace(from);
        engine.unload().await;
        assert_eq!(engine.wallet_state().borrow().name(), "closed");
        assert!(!engine.is_locked());
    }
}

/// bark tells the Ark server it is berthd (`<name>/<version>`, the form the server
/// accepts), unless `config.toml` names a client of its own.
#[test]
fn the_ark_server_is_told_the_client_is_berthd() {
    let config = with_user_agent(bark::Config::network_default(Network::Regtest));
    assert_eq!(
        config.user_agent.as_deref(),
        Some(concat!("berthd/", env!("CARGO_PKG_VERSION")))
    );
    let pinned = bark::Config {
        user_agent: Some("kiosk/2".into()),
        ..bark::Config::network_default(Network::Regtest)
    };
    assert_eq!(
        with_user_agent(pinned).user_agent.as_deref(),
        Some("kiosk/2")
    );
}
