//! Wallet lifecycle through the real `berthd`: create (with `force`, no Ark server or
//! chain source reachable), import, restart, mnemonic exposure, refusals.

use crate::common::vtxos;
use crate::harness;

use std::time::Duration;

use harness::*;

/// A loopback URL where nothing listens.
fn dead_url() -> String {
    format!("http://127.0.0.1:{}", free_port())
}

fn create_body(mnemonic: Option<&str>, force: bool) -> String {
    serde_json::json!({
        "network": "regtest",
        "mnemonic": mnemonic,
        "ark_server": dead_url(),
        "chain_source": { "esplora": { "url": dead_url() } },
        "force": force,
    })
    .to_string()
}

const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";

fn expected_fingerprint() -> String {
    let mnemonic = bark::bip39::Mnemonic::parse(MNEMONIC).expect("valid");
    bark::WalletSeed::new_from_mnemonic(bitcoin::Network::Regtest, &mnemonic)
        .fingerprint()
        .to_string()
}

#[test]
fn create_with_force_survives_restart_and_imports_the_right_seed() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &["--expose-mnemonic"]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];

    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &auth,
        &create_body(Some(MNEMONIC), true),
    );
    assert_eq!(status, 200, "{raw}");
    let fingerprint = json_of(&raw)["fingerprint"]
        .as_str()
        .expect("fingerprint")
        .to_string();
    assert_eq!(
        fingerprint,
        expected_fingerprint(),
        "the fingerprint bark derives from the mnemonic"
    );

    let (status, raw) = daemon.get("/api/v1/wallet", &auth);
    assert_eq!(
        (status, json_of(&raw)["fingerprint"].as_str()),
        (200, Some(fingerprint.as_str()))
    );
    let (status, raw) = daemon.get("/api/v1/wallet/mnemonic", &auth);
    assert_eq!(
        (status, json_of(&raw)["mnemonic"].as_str()),
        (200, Some(MNEMONIC)),
        "{raw}"
    );
    let (status, raw) = daemon.get("/api/v1/wallet/connected", &auth);
    assert_eq!(
        (status, json_of(&raw)["connected"].as_bool()),
        (200, Some(false)),
        "{raw}"
    );

    let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &create_body(None, true));
    assert_eq!(status, 422, "a second wallet is refused: {raw}");
    assert_eq!(daemon.terminate().0.code(), Some(0));

    let config = std::fs::read_to_string(datadir.join("config.toml")).expect("config.toml written");
    assert!(
        config.contains("server_address") && config.contains("esplora_address"),
        "{config}"
    );

    let daemon = Daemon::start(&datadir, &[]);
    let (status, raw) = daemon.get("/api/v1/wallet", &auth);
    assert_eq!(
        (status, json_of(&raw)["fingerprint"].as_str()),
        (200, Some(fingerprint.as_str())),
        "{raw}"
    );
    assert_eq!(
        daemon.get("/api/v1/wallet/mnemonic", &auth).0,
        404,
        "not exposed without the flag"
    );
    assert_eq!(
        daemon.terminate().0.code(),
        Some(0),
        "shutdown with a wallet still loading"
    );
}

#[test]
fn create_without_force_needs_the_server_and_leaves_nothing_behind() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &create_body(None, false));
    assert_eq!(status, 503, "{raw}");
    assert!(
        json_of(&raw)["message"]
            .as_str()
            .is_some_and(|m| m.contains("unreachable") && m.contains("force")),
        "{raw}"
    );
    let (_, raw) = daemon.get("/api/v1/wallet", &auth);
    assert_eq!(json_of(&raw)["fingerprint"], serde_json::Value::Null);
    assert!(
        !datadir.join("config.toml").exists(),
        "a failed create removes the config it wrote"
    );
    assert!(!datadir.join("mnemonic").exists());
}

#[test]
fn create_never_overwrites_a_seed_and_needs_force_beside_foreign_files() {
    let (_tmp, datadir) = new_datadir();
    // A barkd datadir: its seed and its SQLite database, no Berth wallet.
    std::fs::create_dir_all(&datadir).expect("datadir");
    let other_seed = "legal winner thank year wave sausage worth useful legal winner thank yellow";
    std::fs::write(datadir.join("mnemonic"), format!("{other_seed}\n")).expect("seed file");
    std::fs::write(datadir.join("db.sqlite"), b"barkd's wallet").expect("foreign file");
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];

    for (what, body) in [
        ("a new seed", create_body(None, true)),
        ("another seed", create_body(Some(MNEMONIC), true)),
    ] {
        let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &body);
        assert_eq!(status, 422, "{what} over an existing seed file: {raw}");
        assert!(
            json_of(&raw)["message"]
                .as_str()
                .is_some_and(|m| m.contains("never overwrites a seed")),
            "{raw}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(datadir.join("mnemonic")).expect("seed file"),
        format!("{other_seed}\n"),
        "the seed file is untouched"
    );

    std::fs::remove_file(datadir.join("mnemonic")).expect("move the seed away");
    let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &create_body(None, false));
    assert_eq!(status, 422, "foreign files without force: {raw}");
    assert!(
        json_of(&raw)["message"]
            .as_str()
            .is_some_and(|m| m.contains("db.sqlite") && m.contains("force")),
        "the message names the file and the way out: {raw}"
    );
    assert!(
        !datadir.join("mnemonic").exists(),
        "a refused create writes no seed"
    );

    let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &create_body(None, true));
    assert_eq!(status, 200, "force creates beside them: {raw}");
    assert_eq!(
        std::fs::read(datadir.join("db.sqlite")).expect("foreign file kept"),
        b"barkd's wallet"
    );
    assert!(datadir.join("mnemonic").exists());
}

#[test]
fn create_imports_the_seed_already_in_the_datadir() {
    let (_tmp, datadir) = new_datadir();
    std::fs::create_dir_all(&datadir).expect("datadir");
    std::fs::write(datadir.join("mnemonic"), MNEMONIC).expect("seed file");
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &auth,
        &create_body(Some(MNEMONIC), true),
    );
    assert_eq!(status, 200, "{raw}");
    assert_eq!(
        json_of(&raw)["fingerprint"].as_str(),
        Some(expected_fingerprint().as_str())
    );
    assert_eq!(
        std::fs::read_to_string(datadir.join("mnemonic")).expect("seed file"),
        MNEMONIC
    );
}

#[test]
fn create_rejects_bad_input_with_400() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let url = dead_url();
    let cases = [
        ("not json", "{".to_string()),
        ("unknown network", serde_json::json!({"network": "testnet4"}).to_string()),
        ("missing network", serde_json::json!({}).to_string()),
        ("bad mnemonic", serde_json::json!({"network": "regtest", "mnemonic": "not a phrase", "force": true}).to_string()),
        ("server without chain", serde_json::json!({"network": "regtest", "ark_server": url}).to_string()),
        ("bad url", serde_json::json!({"network": "regtest", "ark_server": "ftp://x", "chain_source": {"esplora": {"url": url}}}).to_string()),
        ("no config anywhere", serde_json::json!({"network": "regtest"}).to_string()),
        (
            "birthday without a mnemonic",
            serde_json::json!({"network": "regtest", "birthday_height": 5, "ark_server": url, "chain_source": {"esplora": {"url": url}}, "force": true}).to_string(),
        ),
        (
            "bitcoind import without a birthday",
            serde_json::json!({"network": "regtest", "mnemonic": MNEMONIC, "ark_server": url, "force": true,
                "chain_source": {"bitcoind": {"bitcoind": url, "bitcoind_auth": {"cookie": {"cookie": "/nonexistent"}}}}}).to_string(),
        ),
    ];
    for (name, body) in cases {
        let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &body);
        assert_eq!(status, 400, "{name}: {raw}");
        assert!(json_of(&raw)["message"].is_string(), "{name}: {raw}");
    }
}

#[test]
fn concurrent_creates_exactly_one_wins() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let port = daemon.port;
    let bearer = format!("Bearer {}", token(&datadir));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let bearer = bearer.clone();
            std::thread::spawn(move || {
                request(
                    port,
                    "POST",
                    "/api/v1/wallet/create",
                    &[("Authorization", &bearer)],
                    Some(&create_body(None, true)),
                )
                .0
            })
        })
        .collect();
    let mut statuses: Vec<u16> = handles
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .collect();
    statuses.sort();
    assert_eq!(statuses, vec![200, 422, 422, 422]);
}

#[test]
fn delete_is_guarded_and_then_complete() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let delete = |body: serde_json::Value| {
        request(
            daemon.port,
            "DELETE",
            "/api/v1/wallet",
            &auth,
            Some(&body.to_string()),
        )
    };

    // No wallet: barkd's answer (200, deleted false), and the datadir untouched.
    std::fs::write(datadir.join("keep.me"), "not berthd's").expect("a foreign file");
    let (status, raw) = delete(serde_json::json!({"dangerous": true, "fingerprint": "00000000"}));
    assert_eq!(status, 200, "no wallet to delete: {raw}");
    assert_eq!(
        (
            json_of(&raw)["deleted"].clone(),
            json_of(&raw)["fingerprint"].clone()
        ),
        (serde_json::Value::Bool(false), serde_json::Value::Null),
        "{raw}"
    );
    assert!(datadir.join("keep.me").exists());
    std::fs::remove_file(datadir.join("keep.me")).expect("clean up");
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &auth,
        &create_body(Some(MNEMONIC), true),
    );
    assert_eq!(status, 200, "{raw}");
    let fingerprint = expected_fingerprint();

    let (status, raw) = delete(serde_json::json!({"dangerous": false, "fingerprint": fingerprint}));
    assert_eq!(status, 400, "dangerous must be true: {raw}");
    let (status, raw) = delete(serde_json::json!({"dangerous": true, "fingerprint": "deadbeef"}));
    assert_eq!(status, 400, "the fingerprint must match: {raw}");
    let (status, raw) = delete(serde_json::json!({"dangerous": true}));
    assert_eq!(status, 400, "the fingerprint is required: {raw}");
    assert!(
        datadir.join("mnemonic").exists(),
        "refused deletes change nothing"
    );

    let (status, raw) = delete(serde_json::json!({"dangerous": true, "fingerprint": fingerprint}));
    assert_eq!(status, 200, "{raw}");
    assert_eq!(json_of(&raw)["deleted"], serde_json::Value::Bool(true));
    let (_, raw) = daemon.get("/api/v1/wallet", &auth);
    assert_eq!(json_of(&raw)["fingerprint"], serde_json::Value::Null);
    assert!(!datadir.join("mnemonic").exists() && !datadir.join("config.toml").exists());

    // The datadir is ready for a new wallet, without a restart.
    let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &create_body(None, true));
    assert_eq!(status, 200, "{raw}");
    assert_ne!(
        json_of(&raw)["fingerprint"].as_str(),
        Some(fingerprint.as_str())
    );
}

#[test]
#[ignore = "needs BITCOIND_EXEC: run scripts/e2e"]
fn an_import_waits_for_its_ark_server_and_a_new_seed_loads_at_once() {
    let bitcoind = Bitcoind::start("an_import_waits_for_its_ark_server");
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let body = |mnemonic: Option<&str>, birthday: Option<u32>| {
        serde_json::json!({
            "network": "regtest",
            "mnemonic": mnemonic,
            "birthday_height": birthday,
            "ark_server": dead_url(),
            "chain_source": { "bitcoind": {
                "bitcoind": bitcoind.url(),
                "bitcoind_auth": { "cookie": { "cookie": bitcoind.cookie().display().to_string() } },
            } },
            "force": true,
        })
        .to_string()
    };
    // An import scans the chain from its birthday, but loads only once seed recovery
    // has run, which needs the Ark server: with `force` the answer comes at once.
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &auth,
        &body(Some(MNEMONIC), Some(0)),
    );
    assert_eq!(status, 200, "{raw}");
    let wallet = |d: &Daemon| json_of(&d.get("/api/v1/wallet", &auth).1);
    let now = wallet(&daemon);
    assert_eq!(now["loaded"], false, "{now}");
    assert_eq!(now["recovery"]["status"], "pending", "{now}");
    wait_until("the import's first on-chain scan", 60, || {
        std::fs::read_to_string(datadir.join("debug.log"))
            .is_ok_and(|log| log.contains("initial on-chain scan done"))
    });
    let (status, elapsed) = daemon.terminate();
    assert_eq!(status.code(), Some(0));
    assert!(
        elapsed < Duration::from_secs(10),
        "stopping took {elapsed:?}"
    );

    // After a restart it still waits for its server; a request that needs it waits for
    // the attempt under way, then says so.
    let daemon = Daemon::start(&datadir, &[]);
    let (status, raw) = daemon.get("/api/v1/onchain/balance", &auth);
    assert_eq!(status, 503, "{raw}");
    assert_eq!(wallet(&daemon)["recovery"]["status"], "pending");

    // A fresh seed needs no server: loaded when create returns, and again after a
    // restart, with no waiting by the client.
    let delete =
        serde_json::json!({"dangerous": true, "fingerprint": expected_fingerprint()}).to_string();
    let (status, raw) = request(
        daemon.port,
        "DELETE",
        "/api/v1/wallet",
        &auth,
        Some(&delete),
    );
    assert_eq!(status, 200, "{raw}");
    assert_eq!(wallet(&daemon)["fingerprint"], serde_json::Value::Null);
    let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &body(None, None));
    assert_eq!(status, 200, "{raw}");
    let now = wallet(&daemon);
    assert_eq!(now["loaded"], true, "{now}");
    assert_eq!(now["recovery"], serde_json::Value::Null, "{now}");
    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0));
    let daemon = Daemon::start(&datadir, &[]);
    let (status, raw) = daemon.get("/api/v1/onchain/balance", &auth);
    assert_eq!(status, 200, "the first request waits for the load: {raw}");
}

#[test]
fn wallet_operations_say_not_loaded_while_the_chain_source_is_down() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &create_body(None, true));
    assert_eq!(status, 200, "{raw}");

    // Operations that need the chain source or the open wallet say so.
    for path in [
        "/api/v1/onchain/balance",
        "/api/v1/boards/pending",
        "/api/v1/bitcoin/tip",
    ] {
        let (status, raw) = daemon.get(path, &auth);
        assert_eq!(status, 503, "{path}: {raw}");
        assert!(
            json_of(&raw)["message"]
                .as_str()
                .is_some_and(|m| m.contains("not loaded yet")),
            "{path}: {raw}"
        );
    }
    // Reads answer from the store (empty here: bark never opened this wallet), marked.
    for path in [
        "/api/v1/wallet/balance",
        "/api/v1/wallet/vtxos",
        "/api/v1/history",
    ] {
        let (status, raw) = daemon.get(path, &auth);
        assert_eq!(status, 200, "{path}: {raw}");
        assert!(
            raw.to_ascii_lowercase()
                .contains("\r\nberth-freshness: possibly-stale\r\n"),
            "{path}: {raw}"
        );
    }
    // Malformed input is 400 whatever the wallet's state.
    for (path, what) in [
        ("/api/v1/wallet/vtxos/not-an-id", "a bad VTXO id"),
        ("/api/v1/wallet/vtxos?all=maybe", "a bad boolean"),
    ] {
        let (status, raw) = daemon.get(path, &auth);
        assert_eq!(status, 400, "{what}: {raw}");
    }
    let (status, raw) = daemon.post(
        "/api/v1/boards/board-amount",
        &auth,
        r#"{"amount_sat": "lots"}"#,
    );
    assert_eq!(status, 400, "a bad amount: {raw}");
}

#[test]
#[ignore = "needs BITCOIND_EXEC: run scripts/e2e"]
fn receiving_without_the_ark_server_is_a_503_that_names_it() {
    let bitcoind = Bitcoind::start("receiving_without_the_ark_server");
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    // Loaded, with a chain source, and an Ark server that refuses connections: a new
    // seed has not yet stored the server's keys an Ark address is built from.
    create_wallet_without_server(&daemon, &datadir, &bitcoind);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let says_ark_server = |what: &str, (status, raw): (u16, String)| {
        assert_eq!(status, 503, "{what}: {raw}");
        let body = json_of(&raw);
        assert_eq!(body["code"], "unavailable", "{what}: {raw}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("Ark server")),
            "{what}: {raw}"
        );
    };
    says_ark_server(
        "a new Ark address",
        daemon.post("/api/v1/wallet/addresses/next", &auth, "{}"),
    );
    // The failed request above derived and stored key 0, so index 0 is a handed-out
    // address (not a 404) that still needs the server's keys.
    says_ark_server(
        "the address at index 0",
        daemon.get("/api/v1/wallet/addresses/index/0", &auth),
    );
    says_ark_server(
        "a BIP-321 URI",
        daemon.post("/api/v1/wallet/bip321", &auth, "{}"),
    );
    // Still loaded: the server's absence is not the wallet's failure.
    let (_, raw) = daemon.get("/api/v1/wallet", &auth);
    assert_eq!(json_of(&raw)["loaded"], true, "{raw}");
}

/// While bark cannot open the wallet (its chain source down at start), the balance, the
/// VTXOs, the history and the exits are what the wallet's database holds, answered at
/// once and marked possibly stale; they are never a 503 that leaves a phone blank.
#[test]
fn wallet_reads_come_from_the_store_while_the_chain_source_is_down() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let (status, raw) = daemon.post("/api/v1/wallet/create", &auth, &create_body(None, true));
    assert_eq!(status, 200, "{raw}");
    assert_eq!(daemon.terminate().0.code(), Some(0));

    // What the wallet held when it was last open: three VTXOs (one spent, one locked
    // by a movement) and that movement.
    let pool = vtxos::vtxo_pool(3);
    let amounts: Vec<u64> = pool.iter().map(|v| v.amount().to_sat()).collect();
    with_store(&datadir, async |store| {
        use bark::persist::BarkPersister as _;
        let id = store
            .create_new_movement(
                bark::movement::MovementStatus::Pending,
                &bark::movement::MovementSubsystem {
                    name: "bark.round".into(),
                    kind: "refresh".into(),
                },
                chrono::Local::now(),
                None,
            )
            .await
            .expect("movement");
        let locked = bark::vtxo::VtxoState::Locked {
            holder: Some(id.into()),
        };
        let spendable = bark::vtxo::VtxoState::Spendable;
        let spent = bark::vtxo::VtxoState::Spent;
        store
            .store_vtxos(&[
                (&pool[0], &spendable),
                (&pool[1], &locked),
                (&pool[2], &spent),
            ])
            .await
            .expect("vtxos");
    });

    let daemon = Daemon::start(&datadir, &["-q"]);
    let started = std::time::Instant::now();
    let (status, raw) = daemon.get("/api/v1/wallet/balance", &auth);
    let answered_in = started.elapsed();
    assert_eq!(status, 200, "{raw}");
    let balance = json_of(&raw);
    assert_eq!(balance["spendable_sat"], amounts[0], "{raw}");
    // Locked by a movement no operation claims: owned, held by nothing bark names.
    assert_eq!(balance["total_sat"], amounts[0], "{raw}");
    assert_eq!(balance["possibly_stale"], true, "{raw}");
    // Not the up to 20 s a request that needs the wallet waits for an open under way.
    assert!(
        answered_in < Duration::from_secs(5),
        "the balance took {answered_in:?}"
    );
    let stale = |raw: &str| {
        raw.to_ascii_lowercase()
            .contains("\r\nberth-freshness: possibly-stale\r\n")
    };
    assert!(stale(&raw), "{raw}");

    let (status, raw) = daemon.get("/api/v1/wallet/vtxos", &auth);
    assert_eq!(status, 200, "{raw}");
    assert!(stale(&raw), "{raw}");
    assert_eq!(
        json_of(&raw).as_array().map(Vec::len),
        Some(2),
        "unspent: {raw}"
    );
    let (_, raw) = daemon.get("/api/v1/wallet/vtxos?all=true", &auth);
    assert_eq!(json_of(&raw).as_array().map(Vec::len), Some(3), "{raw}");
    let (status, raw) = daemon.get(&format!("/api/v1/wallet/vtxos/{}", pool[2].id()), &auth);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(json_of(&raw)["state"]["type"], "spent", "{raw}");
    let (status, raw) = daemon.get("/api/v1/history?limit=10", &auth);
    assert_eq!(status, 200, "{raw}");
    assert!(stale(&raw), "{raw}");
    assert_eq!(json_of(&raw).as_array().map(Vec::len), Some(1), "{raw}");
    let (status, raw) = daemon.get("/api/v1/exits/status/all", &auth);
    assert_eq!(status, 200, "{raw}");
    assert!(stale(&raw), "{raw}");

    // The console's overview shows it too, said to be possibly stale.
    let cookie = console_session(daemon.port, &datadir, "read", "Phone");
    let (status, raw) = request(daemon.port, "GET", "/", &[("Cookie", &cookie)], None);
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains("as the wallet last stood"), "{raw}");
    assert!(
        raw.contains(&format!(
            r#"<span class="amount big">{} <span class="unit">sats</span></span> spendable"#,
            berth::engine::spending::sats(amounts[0])
        )),
        "{raw}"
    );

    // What needs the network still waits for the wallet, and says so.
    let (status, raw) = daemon.get("/api/v1/onchain/balance", &auth);
    assert_eq!(status, 503, "{raw}");
    let (status, raw) = daemon.get("/api/v1/wallet", &auth);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(json_of(&raw)["loaded"], false, "{raw}");
}
