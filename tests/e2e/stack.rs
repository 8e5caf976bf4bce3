//! The regtest stack: bitcoind, PostgreSQL and captaind (the Ark server) on loopback,
//! in one temporary directory, and berthd processes pointed at them.
//!
//! Binaries come from `BITCOIND_EXEC`, `CAPTAIND_EXEC` and `POSTGRES_BINS`
//! (`docs/testing.md`). The tests are `#[ignore]`d, so `scripts/test` reports them as skipped;
//! run without the variables (`--include-ignored`), they fail; with them, any failure
//! to start is a loud test failure. Every process is stopped by pid when the
//! stack is dropped, also when the test panics; a failed test keeps the directory, with
//! every log in it, and prints where it is.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::harness::{self, Daemon, free_port, json_of};

/// The three external binaries, from the environment.
pub struct Binaries {
    pub bitcoind: PathBuf,
    pub captaind: PathBuf,
    pub postgres_bins: PathBuf,
}

impl Binaries {
    /// The binaries the variables name. The e2e tests are `#[ignore]`d (see
    /// `scripts/test`); run without the variables, they fail here.
    pub fn from_env(test: &str) -> Binaries {
        let get = |name: &str| std::env::var_os(name).map(PathBuf::from);
        match (
            get("BITCOIND_EXEC"),
            get("CAPTAIND_EXEC"),
            get("POSTGRES_BINS"),
        ) {
            (Some(bitcoind), Some(captaind), Some(postgres_bins)) => Binaries {
                bitcoind,
                captaind,
                postgres_bins,
            },
            _ => panic!(
                "e2e test {test} needs BITCOIND_EXEC, CAPTAIND_EXEC and POSTGRES_BINS: run it \
                 with scripts/e2e (docs/testing.md)"
            ),
        }
    }
}

/// A child process stopped by pid on drop: SIGTERM, then SIGKILL after 10 s.
pub struct Process {
    pub name: String,
    child: Child,
}

impl Process {
    pub fn spawn(name: &str, command: &mut Command, log: &Path) -> Process {
        let out = std::fs::File::create(log).expect("create log file");
        let err = out.try_clone().expect("log file handle");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        Process {
            name: name.to_string(),
            child,
        }
    }

    /// Panics (with the log's tail) if the process has exited.
    pub fn assert_running(&mut self, log: &Path) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            panic!(
                "{} exited with {status}; its log ({}) ends:\n{}",
                self.name,
                log.display(),
                tail(log, 40)
            );
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Process {
    /// SIGTERM, then SIGKILL after 10 s; returns once it has exited.
    fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of a file, for failure messages.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Poll `check` until it returns `Some`, for at most `secs`; on timeout, panic with
/// `what` and the last value `describe` gave.
pub fn wait_for<T>(what: &str, secs: u64, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A regtest bitcoind with a funded "miner" wallet.
pub struct Bitcoind {
    pub rpc_port: u16,
    pub datadir: PathBuf,
    process: Process,
}

impl Bitcoind {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.rpc_port)
    }

    pub fn cookie(&self) -> PathBuf {
        self.datadir.join("regtest").join(".cookie")
    }

    fn log(&self) -> PathBuf {
        self.datadir.join("regtest").join("debug.log")
    }

    /// A JSON-RPC call; `Err` carries bitcoind's error or the transport's.
    pub fn try_rpc(&self, path: &str, method: &str, params: Value) -> Result<Value, String> {
        let cookie = std::fs::read_to_string(self.cookie()).map_err(|e| e.to_string())?;
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(cookie.trim())
        );
        let body = json!({"jsonrpc": "1.0", "id": "e2e", "method": method, "params": params});
        let (_, raw) = harness::try_request(
            self.rpc_port,
            "POST",
            path,
            &[("Authorization", &auth)],
            Some(&body.to_string()),
        )
        .map_err(|e| e.to_string())?;
        let reply: Value = serde_json::from_str(harness::body_of(&raw))
            .map_err(|e| format!("{method}: not JSON ({e}): {raw}"))?;
        match &reply["error"] {
            Value::Null => Ok(reply["result"].clone()),
            error => Err(format!("{method}: {error}")),
        }
    }

    pub fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc("/", method, params)
            .unwrap_or_else(|e| panic!("bitcoind RPC failed: {e}"))
    }

    fn wallet_rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc("/wallet/miner", method, params)
            .unwrap_or_else(|e| panic!("bitcoind wallet RPC failed: {e}"))
    }

    pub fn height(&self) -> u64 {
        self.rpc("getblockcount", json!([]))
            .as_u64()
            .expect("height")
    }

    /// A new address of the miner wallet (somewhere outside the wallets under test).
    pub fn new_address(&self) -> String {
        self.wallet_rpc("getnewaddress", json!([]))
            .as_str()
            .expect("address")
            .to_string()
    }

    /// Mine `blocks` blocks to the miner wallet; the new height.
    pub fn mine(&self, blocks: u64) -> u64 {
        let address = self.wallet_rpc("getnewaddress", json!([]));
        self.rpc("generatetoaddress", json!([blocks, address]));
        self.height()
    }

    /// Send `sats` from the miner wallet to `address`; the txid.
    pub fn send_to(&self, address: &str, sats: u64) -> String {
        let btc = format!("{}.{:08}", sats / 100_000_000, sats % 100_000_000);
        self.wallet_rpc(
            "sendtoaddress",
            json!([address, btc.parse::<f64>().expect("amount")]),
        )
        .as_str()
        .expect("txid")
        .to_string()
    }

    /// Wait until some transaction (a board's funding, say) reaches the mempool.
    pub fn wait_for_mempool(&self, what: &str) {
        wait_for(&format!("{what} in bitcoind's mempool"), 60, || {
            let mempool = self.rpc("getrawmempool", json!([]));
            (!mempool.as_array()?.is_empty()).then_some(())
        });
    }

    /// Whether `txid` is in a block.
    pub fn confirmations(&self, txid: &str) -> u64 {
        self.try_rpc("/", "getrawtransaction", json!([txid, true]))
            .ok()
            .and_then(|tx| tx["confirmations"].as_u64())
            .unwrap_or(0)
    }

    /// The amount (sats) `txid` pays to `address`.
    pub fn paid_to(&self, txid: &str, address: &str) -> u64 {
        let tx = self.rpc("getrawtransaction", json!([txid, true]));
        tx["vout"]
            .as_array()
            .expect("vout")
            .iter()
            .filter(|out| out["scriptPubKey"]["address"] == address)
            .map(|out| (out["value"].as_f64().expect("value") * 1e8).round() as u64)
            .sum()
    }
}

/// bitcoind, PostgreSQL and captaind, running. Drop stops them.
pub struct Stack {
    pub started_in: Duration,
    pub bitcoind: Bitcoind,
    pub ark_url: String,
    captaind: Process,
    captaind_log: PathBuf,
    captaind_admin: String,
    captaind_exec: PathBuf,
    /// The Lightning nodes (`Stack::start_with_lightning`), stopped after captaind.
    pub lightning: Option<crate::lightning::Lightning>,
    /// Held for its drop, which stops PostgreSQL.
    _postgres: Process,
    /// Declared last: dropped after every process has stopped.
    dir: Option<tempfile::TempDir>,
}

impl Stack {
    /// The whole stack, funded and ready.
    pub fn start(test: &str) -> Stack {
        Self::start_with_terms(test, DEFAULT_VTXO_LIFETIME, DEFAULT_VTXO_EXIT_DELTA)
    }

    /// [`Stack::start`] with an Ark server whose VTXOs live `vtxo_lifetime`
    /// blocks (its rounds' and its VTXO pool's) and whose exits wait `vtxo_exit_delta`
    /// blocks before they are claimable.
    pub fn start_with_terms(test: &str, vtxo_lifetime: u16, vtxo_exit_delta: u16) -> Stack {
        Self::start_full(test, [vtxo_lifetime, vtxo_exit_delta], None)
    }

    /// [`Stack::start`] with Core Lightning: the Ark server's node (which captaind
    /// pays and receives through) and a node outside with a channel to it
    /// (`crate::lightning`). `None`, reported as skipped, without Core Lightning.
    pub fn start_with_lightning(test: &str) -> Option<Stack> {
        let bins = match crate::lightning::LightningBinaries::from_env() {
            Ok(bins) => bins,
            Err(why) => {
                harness::skip(test, &why);
                return None;
            }
        };
        Some(Self::start_full(
            test,
            [DEFAULT_VTXO_LIFETIME, DEFAULT_VTXO_EXIT_DELTA],
            Some(bins),
        ))
    }

    fn start_full(
        test: &str,
        [vtxo_lifetime, vtxo_exit_delta]: [u16; 2],
        lightning_bins: Option<crate::lightning::LightningBinaries>,
    ) -> Stack {
        let bins = Binaries::from_env(test);
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix(&format!("berth-e2e-{test}-"))
            .tempdir()
            .expect("tempdir");
        // PostgreSQL runs as an unprivileged user when we are root, and must reach
        // its directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod stack dir");

        let bitcoind = start_bitcoind(&bins.bitcoind, &dir.path().join("bitcoind"));
        let (postgres, pg_port) = start_postgres(&bins.postgres_bins, &dir.path().join("postgres"));
        // The nodes and their channel first: captaind connects to its node at start.
        let lightning =
            lightning_bins.map(|ln| crate::lightning::Lightning::start(&ln, dir.path(), &bitcoind));
        let captaind_dir = dir.path().join("captaind");
        std::fs::create_dir_all(&captaind_dir).expect("captaind dir");
        let public_port = free_port();
        let admin_port = free_port();
        let mut config = captaind_config(
            &captaind_dir,
            &bitcoind,
            pg_port,
            [public_port, admin_port],
            [vtxo_lifetime, vtxo_exit_delta],
        );
        if let Some(lightning) = &lightning {
            // Lightning receives are paid from the server's VTXO pool: enough small
            // VTXOs for a run of receives (an empty pool refuses claims until it is
            // refilled), and larger ones too.
            config = config.replace(
                r#"vtxo_targets = ["10000sat:3"]"#,
                r#"vtxo_targets = ["10000sat:30", "1000000sat:3"]"#,
            );
            config.push_str(&lightning.captaind_config());
        }
        let config_path = captaind_dir.join("captaind.toml");
        std::fs::write(&config_path, config).expect("captaind.toml");
        let create = Command::new(&bins.captaind)
            .arg("create")
            .arg("--config")
            .arg(&config_path)
            .output()
            .expect("run captaind create");
        assert!(
            create.status.success(),
            "captaind create failed: {}{}",
            String::from_utf8_lossy(&create.stdout),
            String::from_utf8_lossy(&create.stderr)
        );
        let captaind_log = captaind_dir.join("captaind.log");
        let captaind = Process::spawn(
            "captaind",
            Command::new(&bins.captaind)
                .arg("start")
                .arg("--config")
                .arg(&config_path),
            &captaind_log,
        );
        let mut stack = Stack {
            started_in: Duration::ZERO,
            bitcoind,
            ark_url: format!("http://127.0.0.1:{public_port}"),
            captaind,
            captaind_log,
            captaind_admin: format!("127.0.0.1:{admin_port}"),
            captaind_exec: bins.captaind,
            lightning,
            _postgres: postgres,
            dir: Some(dir),
        };
        stack.fund_captaind();
        if stack.lightning.is_some() {
            stack.wait_for_captaind_log(
                "captaind to connect to its Lightning node",
                "Successfully connected to CLN node",
            );
        }
        stack.started_in = started.elapsed();
        stack
    }

    /// Wait until captaind's log holds `line`.
    pub fn wait_for_captaind_log(&mut self, what: &str, line: &str) {
        let log = self.captaind_log.clone();
        wait_for(what, 120, || {
            self.captaind.assert_running(&log);
            std::fs::read_to_string(&log)
                .ok()
                .filter(|text| text.contains(line))
                .map(|_| ())
        });
    }

    /// The Lightning nodes (a stack from [`Stack::start_with_lightning`]).
    pub fn ln(&self) -> &crate::lightning::Lightning {
        self.lightning.as_ref().expect("a stack with Lightning")
    }

    /// Wait until both Lightning nodes have seen bitcoind's tip: after blocks were
    /// mined (a board), a node behind the tip will not pay or route.
    pub fn lightning_at_tip(&self) {
        let height = self.bitcoind.height();
        self.ln().internal.wait_for_block(height);
        self.ln().external.wait_for_block(height);
    }

    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("stack dir").path()
    }

    /// `captaind rpc wallet`: the server's on-chain wallet status.
    fn captaind_wallet(&mut self) -> Option<Value> {
        let log = self.captaind_log.clone();
        self.captaind.assert_running(&log);
        let out = Command::new(&self.captaind_exec)
            .args(["rpc", "--addr", &self.captaind_admin, "wallet"])
            .output()
            .expect("run captaind rpc");
        serde_json::from_slice(&out.stdout).ok()
    }

    /// The Ark server funds rounds and boards from its own wallet.
    fn fund_captaind(&mut self) {
        let status = wait_for("captaind's admin RPC", 60, || self.captaind_wallet());
        let address = status["rounds"]["address"]
            .as_str()
            .expect("rounds address")
            .to_string();
        self.bitcoind.send_to(&address, 10 * 100_000_000);
        self.bitcoind.mine(3);
        wait_for("captaind to see its funds", 60, || {
            let status = self.captaind_wallet()?;
            (status["rounds"]["trusted_balance"].as_u64()? > 0).then_some(())
        });
    }

    /// Ask the Ark server to run a round now (its own interval is an hour).
    pub fn trigger_round(&self) {
        let out = Command::new(&self.captaind_exec)
            .args(["rpc", "--addr", &self.captaind_admin, "trigger-round"])
            .output()
            .expect("run captaind rpc trigger-round");
        assert!(
            out.status.success(),
            "trigger-round: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Play the round `berthd` has joined to its end: trigger it, wait for its funding
    /// transaction in the wallet and in bitcoind's mempool, mine it, and sync until the
    /// wallet lists no pending round.
    pub fn finish_round(&self, berthd: &Berthd) {
        self.trigger_round();
        let funding_txid = wait_for("the round's funding transaction", 60, || {
            let rounds = berthd.get_ok("/api/v1/wallet/rounds");
            rounds[0]["funding_txid"].as_str().map(str::to_string)
        });
        wait_for("the round's funding tx in bitcoind's mempool", 30, || {
            let mempool = self.bitcoind.rpc("getrawmempool", json!([]));
            mempool
                .as_array()?
                .iter()
                .any(|t| t == funding_txid.as_str())
                .then_some(())
        });
        self.bitcoind.mine(1);
        wait_for("the round to complete", 60, || {
            berthd.post_ok("/api/v1/wallet/sync", json!({}));
            let rounds = berthd.get_ok("/api/v1/wallet/rounds");
            rounds.as_array()?.is_empty().then_some(())
        });
    }

    /// Stop the Ark server (SIGTERM, waiting for it to exit): the wallet's server
    /// is down from now on.
    pub fn stop_captaind(&mut self) {
        self.captaind.stop();
    }

    /// A berthd with a fresh regtest wallet whose `config.toml` points at this stack.
    pub fn berthd(&self, name: &str) -> Berthd {
        self.berthd_with(name, "")
    }

    /// [`Stack::berthd`] with this `berth.toml`. Created as a barkd client creates
    /// one: the wallet must be usable the moment create returns, with no waiting.
    pub fn berthd_with(&self, name: &str, berth_toml: &str) -> Berthd {
        let berthd = Berthd::start(name, &self.datadir_with_config(name, berth_toml));
        Self::create_wallet(berthd)
    }

    /// [`Stack::berthd`] on `datadir` (made with [`Stack::datadir_at`]), its stderr to
    /// `log`: where the datadir is on a filesystem of the test's own.
    pub fn berthd_in(&self, name: &str, datadir: &Path, log: &Path) -> Berthd {
        Self::create_wallet(Berthd::start_program(
            name,
            &harness::bin(),
            datadir,
            &["-v"],
            log,
        ))
    }

    fn create_wallet(berthd: Berthd) -> Berthd {
        let name = berthd.name.clone();
        let (status, body) = berthd.post("/api/v1/wallet/create", json!({"network": "regtest"}));
        assert_eq!(status, 200, "{name}: create: {body}");
        let wallet = berthd.get_ok("/api/v1/wallet");
        assert_eq!(
            wallet["loaded"], true,
            "{name}: the wallet is loaded when create returns: {wallet}"
        );
        berthd
    }

    /// A new berthd datadir (with this `berth.toml`) whose `config.toml` points at this
    /// stack; no wallet yet.
    pub fn datadir_with_config(&self, name: &str, berth_toml: &str) -> PathBuf {
        self.datadir_at(&self.dir().join(format!("berthd-{name}")), berth_toml)
    }

    /// [`Stack::datadir_with_config`] at `datadir`.
    pub fn datadir_at(&self, datadir: &Path, berth_toml: &str) -> PathBuf {
        let datadir = datadir.to_path_buf();
        std::fs::create_dir_all(&datadir).expect("berthd datadir");
        std::fs::set_permissions(&datadir, std::fs::Permissions::from_mode(0o700))
            .expect("chmod datadir");
        std::fs::write(datadir.join("berth.toml"), berth_toml).expect("berth.toml");
        std::fs::write(datadir.join("config.toml"), self.bark_config(&self.ark_url))
            .expect("config.toml");
        datadir
    }

    /// bark's `config.toml` for a wallet on this stack's bitcoind and `ark_url`.
    pub fn bark_config(&self, ark_url: &str) -> String {
        format!(
            "server_address = \"{}\"\nbitcoind_address = \"{}\"\nbitcoind_cookiefile = \"{}\"\n",
            ark_url,
            self.bitcoind.url(),
            self.bitcoind.cookie().display()
        )
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(dir) = self.dir.take()
        {
            let path = dir.keep();
            eprintln!(
                "e2e: the test failed; logs kept in {} (captaind.log, bitcoind/regtest/debug.log, \
                 postgres.log, berthd-*/debug.log)",
                path.display()
            );
            let log = std::fs::read_to_string(&self.captaind_log).unwrap_or_default();
            let problems: Vec<&str> = log
                .lines()
                .filter(|l| l.contains(r#""level":"WARN""#) || l.contains(r#""level":"ERROR""#))
                .collect();
            eprintln!(
                "captaind's last warnings and errors:\n{}",
                problems[problems.len().saturating_sub(10)..].join("\n")
            );
        }
    }
}

fn start_bitcoind(exec: &Path, datadir: &Path) -> Bitcoind {
    std::fs::create_dir_all(datadir).expect("bitcoind dir");
    let rpc_port = free_port();
    let process = Process::spawn(
        "bitcoind",
        Command::new(exec)
            .arg("-regtest")
            .arg(format!("-datadir={}", datadir.display()))
            .arg(format!("-rpcport={rpc_port}"))
            .args([
                "-server",
                "-listen=0",
                "-txindex",
                "-fallbackfee=0.0002",
                "-printtoconsole=0",
            ]),
        &datadir.join("stdout.log"),
    );
    let mut bitcoind = Bitcoind {
        rpc_port,
        datadir: datadir.to_path_buf(),
        process,
    };
    let log = bitcoind.log();
    wait_for("bitcoind's RPC", 60, || {
        bitcoind.process.assert_running(&log);
        bitcoind
            .try_rpc("/", "getblockchaininfo", json!([]))
            .ok()
            .map(|_| ())
    });
    bitcoind.rpc("createwallet", json!(["miner"]));
    // Coinbase outputs mature after 100 blocks.
    bitcoind.mine(110);
    bitcoind
}

/// The user PostgreSQL runs as: itself unless we are root, which it refuses.
fn postgres_user() -> Option<&'static str> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"));
    if !root {
        return None;
    }
    let has_postgres = Command::new("id")
        .arg("postgres")
        .output()
        .is_ok_and(|o| o.status.success());
    Some(if has_postgres { "postgres" } else { "nobody" })
}

fn as_postgres_user(bin: PathBuf) -> Command {
    match postgres_user() {
        Some(user) => {
            let mut cmd = Command::new("setpriv");
            cmd.args(["--reuid", user, "--regid", user, "--init-groups", "--"])
                .arg(bin);
            cmd
        }
        None => Command::new(bin),
    }
}

fn start_postgres(bins: &Path, dir: &Path) -> (Process, u16) {
    std::fs::create_dir_all(dir).expect("postgres dir");
    if let Some(user) = postgres_user() {
        let status = Command::new("chown")
            .arg(user)
            .arg(dir)
            .status()
            .expect("chown");
        assert!(status.success(), "chown {} to {user}", dir.display());
    }
    let data = dir.join("data");
    let init = as_postgres_user(bins.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "--no-sync"])
        .output()
        .expect("run initdb");
    assert!(
        init.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    let port = free_port();
    let process = Process::spawn(
        "postgres",
        as_postgres_user(bins.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]),
        &dir.join("postgres.log"),
    );
    wait_for("PostgreSQL to accept connections", 60, || {
        let out = Command::new(bins.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "postgres",
                "captaind",
            ])
            .output()
            .ok()?;
        out.status.success().then_some(())
    });
    (process, port)
}

/// captaind's default VTXO lifetime (`captaind.default.toml`), in blocks.
pub const DEFAULT_VTXO_LIFETIME: u16 = 432;
/// The exit delta of these tests' Ark server, in blocks.
pub const DEFAULT_VTXO_EXIT_DELTA: u16 = 12;

fn captaind_config(
    dir: &Path,
    bitcoind: &Bitcoind,
    pg_port: u16,
    [public, admin]: [u16; 2],
    [vtxo_lifetime, vtxo_exit_delta]: [u16; 2],
) -> String {
    // Fast regtest timings, no fees, rounds only on request (trigger_round). The
    // keys are those of captaind.default.toml in the Ark server's sources.
    format!(
        r#"data_dir = "{data}"
network = "regtest"
vtxo_lifetime = {vtxo_lifetime}
min_board_amount = "20000 sat"
vtxo_exit_delta = {vtxo_exit_delta}
max_vtxo_exit_depth = 50
max_arkoor_fanout = 4
required_board_confirmations = 3
min_trusted_confs = 1
rpc_rich_errors = true
txindex_check_interval = "500ms"
sync_manager_block_poll_interval = "100ms"
watchman_min_balance = "1000000 sat"
transaction_rebroadcast_interval = "2s"
otel_deployment_name = "berth-e2e"
max_read_mailbox_items = 100
round_interval = "3600s"
round_submit_time = "5s"
round_sign_time = "5s"
nb_round_nonces = 8
round_forfeit_nonces_timeout = "30s"
offboard_session_timeout = "30s"
offboard_check_interval = "1s"
offboard_acceptable_fee_rate_duration = "10m"
cln_reconnect_interval = "10s"
invoice_check_interval = "3s"
cln_xpay_timeout = "5s"
invoice_check_base_delay = "2s"
max_invoice_check_delay = "10s"
invoice_poll_interval = "10s"
htlc_settlement_poll_interval = "5s"
track_all_base_delay = "1s"
max_track_all_delay = "60s"
htlc_expiry_delta = 6
htlc_send_expiry_delta = 258
max_user_invoice_cltv_delta = 58
invoice_expiry = "10m"
receive_htlc_forward_timeout = "30s"
ln_receive_anti_dos_required = false
ln_max_fee_ppm = 900000

[watchman]
enabled = true
reaction_interval = "1s"
sweep_interval = "1s"
progress_grace_period = 2
claim_chunksize = 15
incremental_relay_fee = "100 sat/kvb"
min_cpfp_amount = "10000 sat"

[fees.board]
min_fee_sat = 0
base_fee_sat = 0
ppm = 0

[fees.offboard]
base_fee_sat = 0
fixed_additional_vb = 100
ppm_expiry_table = []

[fees.refresh]
base_fee_sat = 0
ppm_expiry_table = []

[fees.lightning_receive]
base_fee_sat = 0
ppm = 0

[fees.lightning_send]
min_fee_sat = 0
base_fee_sat = 0
ppm_expiry_table = []

[vtxopool]
vtxo_targets = ["10000sat:3"]
vtxo_target_issue_threshold = 50
vtxo_lifetime = {vtxo_lifetime}
vtxo_pre_expiry = 12
max_vtxo_exit_depth = 3
issue_interval = "3s"

[fee_estimator]
update_interval = "1m"
history_duration = "30m"
fallback_fee_rate_fast = "25sat/vb"
fallback_fee_rate_regular = "7sat/vb"
fallback_fee_rate_slow = "5sat/vb"

[rpc]
public_address = "127.0.0.1:{public}"
admin_address = "127.0.0.1:{admin}"

[postgres]
host = "127.0.0.1"
user = "postgres"
port = {pg_port}
name = "captaind"
max_connections = 10

[bitcoind]
url = "{url}"
cookie = "{cookie}"
"#,
        data = dir.join("data").display(),
        url = bitcoind.url(),
        cookie = bitcoind.cookie().display(),
    )
}

/// A running berthd with its token, speaking JSON.
pub struct Berthd {
    pub name: String,
    pub datadir: PathBuf,
    /// Where its stderr goes, a restart's appended ([`Berthd::restart`]).
    log: PathBuf,
    token: String,
    daemon: Option<Daemon>,
}

impl Berthd {
    pub fn start(name: &str, datadir: &Path) -> Berthd {
        // Its stderr (a panic's message among it) beside the datadir.
        let log = datadir.with_extension("stderr");
        let daemon = Daemon::start_logged(datadir, &["-v"], &[], &log);
        Berthd {
            name: name.to_string(),
            datadir: datadir.to_path_buf(),
            log,
            token: harness::token(datadir),
            daemon: Some(daemon),
        }
    }

    /// `program` (berthd, or barkd 0.8.0 for a comparison: both serve barkd's API) on
    /// `datadir` with `args`, its stderr (its log) going to `log`.
    pub fn start_program(
        name: &str,
        program: &Path,
        datadir: &Path,
        args: &[&str],
        log: &Path,
    ) -> Berthd {
        let daemon = Daemon::start_program_logged(program, datadir, args, &[], log);
        Berthd {
            name: name.to_string(),
            datadir: datadir.to_path_buf(),
            log: log.to_path_buf(),
            token: harness::token(datadir),
            daemon: Some(daemon),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.daemon().child.id()
    }

    /// [`Berthd::start`] with these environment variables.
    pub fn start_with_env(name: &str, datadir: &Path, env: &[(&str, &str)]) -> Berthd {
        let daemon = Daemon::try_start_with_env(datadir, &["-v"], env)
            .unwrap_or_else(|log| panic!("{name}: berthd did not start: {log}"));
        Berthd {
            name: name.to_string(),
            datadir: datadir.to_path_buf(),
            // Its first run's stderr was read only at its start; a restart's is kept.
            log: datadir.with_extension("stderr"),
            token: harness::token(datadir),
            daemon: Some(daemon),
        }
    }

    /// Listen on the notifications websocket from now on, as a phone app does (a
    /// ticket, then the socket); the frames received so far, growing.
    pub fn websocket_frames(
        &self,
        rt: &tokio::runtime::Runtime,
    ) -> std::sync::Arc<std::sync::Mutex<Vec<Value>>> {
        use futures_util::StreamExt as _;
        use tokio_tungstenite::tungstenite::Message;
        let ticket = self.get_ok("/api/v1/notifications/ws/ticket");
        let url = format!(
            "ws://127.0.0.1:{}/api/v1/notifications/ws?ticket={}",
            self.port(),
            ticket.as_str().expect("ticket string")
        );
        let (mut ws, _) = rt
            .block_on(tokio_tungstenite::connect_async(url))
            .expect("websocket");
        let frames = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let collected = std::sync::Arc::clone(&frames);
        rt.spawn(async move {
            while let Some(Ok(msg)) = ws.next().await {
                if let Message::Text(text) = msg {
                    let value: Value = serde_json::from_str(&text).expect("a JSON frame");
                    collected.lock().expect("frames").push(value);
                }
            }
        });
        frames
    }

    fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("berthd is running")
    }

    pub fn port(&self) -> u16 {
        self.daemon().port
    }

    /// The `Authorization` header value of its full token.
    pub fn authorization(&self) -> String {
        format!("Bearer {}", self.token)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (status, _, value) = self.call_with(method, path, body, &[]);
        (status, value)
    }

    /// A call with extra headers; the status, the raw response and the JSON body.
    pub fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        extra: &[(&str, &str)],
    ) -> (u16, String, Value) {
        let auth = format!("Bearer {}", self.token);
        let body = body.map(|b| b.to_string());
        let mut headers = vec![("Authorization", auth.as_str())];
        headers.extend_from_slice(extra);
        let (status, raw) =
            harness::request(self.daemon().port, method, path, &headers, body.as_deref());
        let value = if harness::body_of(&raw).is_empty() {
            Value::Null
        } else {
            json_of(&raw)
        };
        (status, raw, value)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None)
    }

    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(body))
    }

    pub fn call_delete(&self, path: &str) -> (u16, Value) {
        self.call("DELETE", path, None)
    }

    /// Movement `id` as the history shows it; panics when the history lacks it.
    pub fn movement(&self, id: u32) -> Value {
        let history = self.get_ok("/api/v1/history");
        history
            .as_array()
            .expect("history")
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{}: movement {id} in the history: {history}", self.name))
    }

    /// GET that must answer 200; the body.
    pub fn get_ok(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "{}: GET {path}: {body}", self.name);
        body
    }

    /// POST that must answer 200; the body.
    pub fn post_ok(&self, path: &str, body: Value) -> Value {
        let (status, reply) = self.post(path, body);
        assert_eq!(status, 200, "{}: POST {path}: {reply}", self.name);
        reply
    }

    /// SIGKILL: no shutdown, as in a power cut.
    pub fn kill(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            daemon.child.kill().expect("SIGKILL berthd");
            daemon.child.wait().expect("reap berthd");
        }
    }

    /// SIGTERM, and wait for a clean exit: its shutdown ran and its store is closed,
    /// so a test may open it.
    pub fn stop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            let (status, _) = daemon.terminate();
            assert!(
                status.success(),
                "{}: berthd exited with {status} on SIGTERM",
                self.name
            );
        }
    }

    /// Start again on the same datadir (after [`Berthd::kill`] or [`Berthd::stop`]).
    /// Returns once berthd answers `/ping`, as a client would see it come back: a
    /// request that needs the wallet then waits for the load under way (`LOAD_WAIT`),
    /// as barkd's would find its wallet open. Its stderr is appended to the first
    /// run's log (what a discrepancy after a restart is read from; never on the
    /// power-cut test's card, whose log is elsewhere).
    pub fn restart(&mut self) {
        assert!(
            self.daemon.is_none(),
            "restart a killed or stopped berthd only"
        );
        self.daemon = Some(Daemon::start_logged_appending(
            &self.datadir,
            &["-v"],
            &self.log,
        ));
    }
}
