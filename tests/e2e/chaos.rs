//! The chaos loop (`scripts/chaos`, issue 26): two berthds on the regtest stack make
//! real payments (arkoor payments to each other, boards, refreshes in rounds, sends
//! on-chain out of Ark, and with Core Lightning on the machine Lightning payments to a
//! node outside, through the Ark server's) while one of them is SIGKILLed at a random
//! moment of each cycle, mid-request or just after. After every kill:
//!
//! - `berthd store check` on the killed one's datadir (its invariants: no VTXO both
//!   spendable and spent, no orphaned lock, counters ahead of ids);
//! - the client retries a request that was cut off with its `Idempotency-Key`, as a
//!   phone app would: it must either run now for the first time or be refused (409)
//!   because it may have run; never run twice;
//! - both wallets are driven to rest (rounds triggered, blocks mined, syncs) and must
//!   get there within 120 s: pending rounds and boards resume, no movement stays
//!   pending;
//! - every acknowledged operation (a 200, or a 202 for a send on-chain bark paused
//!   before its broadcast or an Ark payment not yet delivered) is in its wallet's
//!   history exactly once, an operation cut off at most once, and a refused one not
//!   at all but for a failed movement (bark records an attempt the server refused);
//! - each wallet's Ark balance equals the sum of its successful movements; arkoor
//!   payments sent equal those received across the two wallets; every send on-chain
//!   in the history paid its address exactly its amount on chain, and no address of an
//!   operation that left no movement received anything; every Lightning invoice the
//!   outside node says was paid has a successful payment in a history, and no other.
//!
//! It prints a table of operations and outcomes and the discrepancies found (the test
//! fails on any). `CHAOS_CYCLES` (default 100) and `CHAOS_SEED` (default: the clock;
//! printed, so a run can be repeated).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness;
use crate::stack::{Berthd, Stack};

/// A small deterministic generator (xorshift64*): a seed repeats a run's choices.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Arkoor,
    Board,
    Refresh,
    SendOnchain,
    Lightning,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Arkoor => "arkoor payment",
            Kind::Board => "board",
            Kind::Refresh => "refresh (round)",
            Kind::SendOnchain => "send on-chain",
            Kind::Lightning => "Lightning payment",
        }
    }
}

/// How an operation ended, as the client and then the wallet's history saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// Answered 200 before the kill: in the history once.
    Acknowledged,
    /// Answered 202 before the kill (a send on-chain bark paused before its broadcast,
    /// or an Ark payment not yet delivered, completed by a later sync): in the history
    /// once.
    Accepted,
    /// Refused before the kill (e.g. not enough funds): nothing happened.
    Refused,
    /// Cut off, and the retry with its key ran it (it had not started): once.
    RetriedRan,
    /// Cut off, the retry was refused as possibly run (409), and it had run: once.
    CutApplied,
    /// Cut off, refused on retry, and it had not run: nothing happened.
    CutNotApplied,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Acknowledged => "acknowledged",
            Outcome::Accepted => "accepted, pending",
            Outcome::Refused => "refused",
            Outcome::RetriedRan => "cut, retry ran it",
            Outcome::CutApplied => "cut, had run",
            Outcome::CutNotApplied => "cut, had not run",
        }
    }
}

/// An operation asked of one wallet.
struct Op {
    kind: Kind,
    path: &'static str,
    body: Value,
    /// For arkoor payments, sends on-chain and Lightning payments: the destination
    /// (address, invoice), new for each operation, by which a movement is matched to it.
    destination: Option<String>,
    amount: u64,
    /// For a Lightning payment: the invoice's label on the outside node.
    invoice_label: Option<String>,
}

fn history(wallet: &Berthd) -> Vec<Value> {
    wallet
        .get_ok("/api/v1/history")
        .as_array()
        .expect("history")
        .clone()
}

fn subsystem(m: &Value) -> (&str, &str) {
    (
        m["subsystem"]["name"].as_str().unwrap_or_default(),
        m["subsystem"]["kind"].as_str().unwrap_or_default(),
    )
}

/// Sats sent and received by the successful arkoor movements of a history.
fn arkoor_totals(history: &[Value]) -> (i64, i64) {
    let (mut sent, mut received) = (0, 0);
    for m in history.iter().filter(|m| m["status"] == "successful") {
        let amount = m["effective_balance_sat"].as_i64().unwrap_or_default();
        match subsystem(m) {
            ("bark.arkoor", "send") => sent -= amount,
            ("bark.arkoor", "receive") => received += amount,
            _ => {}
        }
    }
    (sent, received)
}

/// The movements of `history` that carry out `op` (matched by its unique destination,
/// or for a board by its amount among the boards newer than `after`).
fn matching<'a>(history: &'a [Value], op: &Op, after: u64) -> Vec<&'a Value> {
    history
        .iter()
        .filter(|m| m["id"].as_u64().is_some_and(|id| id > after))
        .filter(|m| match (&op.destination, op.kind) {
            (Some(destination), _) => m["sent_to"]
                .as_array()
                .is_some_and(|to| to.iter().any(|d| d["destination"]["value"] == *destination)),
            (None, Kind::Board) => {
                subsystem(m).0.contains("board")
                    && m["effective_balance_sat"].as_i64() == Some(op.amount as i64)
            }
            (None, _) => false,
        })
        .collect()
}

fn new_ark_address(wallet: &Berthd) -> String {
    wallet.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string()
}

/// Choose the next operation (an arkoor payment goes to `payee`). With Lightning on
/// the stack, a fifth of the choices are Lightning payments, taken from the arkoor
/// payments' share (without it a seed chooses as before).
fn choose(rng: &mut Rng, stack: &Stack, payee: &Berthd, cycle: u64) -> Op {
    match rng.below(20) {
        0..=3 if stack.lightning.is_some() => {
            let amount = 1_000 + rng.below(20_000);
            let label = format!("loop-{cycle}");
            let (invoice, _) = stack.ln().external.invoice(Some(amount * 1_000), &label);
            // A node behind the chain's tip (blocks were mined to settle) will not route.
            stack.lightning_at_tip();
            Op {
                kind: Kind::Lightning,
                path: "/api/v1/lightning/pay",
                body: json!({"destination": invoice}),
                destination: Some(invoice),
                amount,
                invoice_label: Some(label),
            }
        }
        0..=9 => {
            let amount = 1_000 + rng.below(20_000);
            let destination = new_ark_address(payee);
            Op {
                kind: Kind::Arkoor,
                path: "/api/v1/wallet/send",
                body: json!({"destination": destination, "amount_sat": amount}),
                destination: Some(destination),
                amount,
                invoice_label: None,
            }
        }
        10..=12 => {
            let amount = 10_000 + rng.below(20_000);
            let destination = stack.bitcoind.new_address();
            Op {
                kind: Kind::SendOnchain,
                path: "/api/v1/wallet/send-onchain",
                body: json!({"destination": destination, "amount_sat": amount}),
                destination: Some(destination),
                amount,
                invoice_label: None,
            }
        }
        13..=15 => {
            // Unique amounts: a board is matched to its movement by its amount.
            let amount = 20_000 + cycle * 100 + rng.below(100);
            Op {
                kind: Kind::Board,
                path: "/api/v1/boards/board-amount",
                body: json!({"amount_sat": amount}),
                destination: None,
                amount,
                invoice_label: None,
            }
        }
        _ => Op {
            kind: Kind::Refresh,
            path: "/api/v1/wallet/refresh/all",
            body: json!({}),
            destination: None,
            amount: 0,
            invoice_label: None,
        },
    }
}

/// POST with an idempotency key; `None` when the connection failed or was cut.
fn post_keyed(port: u16, auth: &str, path: &str, body: &Value, key: &str) -> Option<(u16, Value)> {
    let body = body.to_string();
    let headers = [("Authorization", auth), ("Idempotency-Key", key)];
    let (status, raw) = harness::try_request(port, "POST", path, &headers, Some(&body)).ok()?;
    if status == 0 {
        return None;
    }
    let text = harness::body_of(&raw);
    Some((status, serde_json::from_str(text).unwrap_or(Value::Null)))
}

/// Drive both wallets to rest: rounds run, boards confirm, arkoor payments arrive,
/// nothing waits in bitcoind's mempool. `Err`
/// says what never settled; movements found pending then are added to `stuck` (by
/// wallet and id), and a gap between arkoor payments sent and received is kept in
/// `stuck_gap`: neither is waited for again (a new gap is), so one stuck movement or
/// payment is reported once instead of costing every later cycle the whole wait.
fn settle(
    stack: &Stack,
    wallets: &[Berthd; 2],
    stuck: &mut std::collections::BTreeSet<(usize, u64)>,
    stuck_gap: &mut Option<i64>,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut busy = Vec::new();
        let mut pending_ids = Vec::new();
        let (mut sent, mut received) = (0, 0);
        for (index, wallet) in wallets.iter().enumerate() {
            let _ = wallet.post("/api/v1/wallet/sync", json!({}));
            let _ = wallet.post("/api/v1/onchain/sync", json!({}));
            let (status, rounds) = wallet.get("/api/v1/wallet/rounds");
            if status != 200 {
                busy.push(format!("{}: rounds answer {status}", wallet.name));
            } else if rounds.as_array().is_some_and(|r| !r.is_empty()) {
                busy.push(format!("{}: a round is pending", wallet.name));
            }
            let (status, movements) = wallet.get("/api/v1/history");
            if status == 200 {
                let (s, r) = arkoor_totals(movements.as_array().map_or(&[], Vec::as_slice));
                sent += s;
                received += r;
                let pending: Vec<u64> = movements
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|m| m["status"] == "pending")
                    .filter_map(|m| m["id"].as_u64())
                    .filter(|id| !stuck.contains(&(index, *id)))
                    .collect();
                if !pending.is_empty() {
                    busy.push(format!("{}: movements {pending:?} pending", wallet.name));
                }
                pending_ids.extend(pending.into_iter().map(|id| (index, id)));
            }
        }
        // A payment the payer has made may not have reached the payee yet (a payer
        // killed mid-payment delivers it when it is back).
        let gap = sent - received;
        if gap != 0 && *stuck_gap != Some(gap) {
            busy.push(format!(
                "arkoor payments in flight: {sent} sat sent, {received} sat received"
            ));
        }
        // A send on-chain is `successful` once broadcast: at rest its transaction is
        // mined too, or the chain cannot be checked against the histories. (One that
        // never reached the mempool is not waited for, and shows as a discrepancy.)
        let unconfirmed = stack
            .bitcoind
            .rpc("getrawmempool", json!([]))
            .as_array()
            .map_or(0, Vec::len);
        if unconfirmed > 0 {
            busy.push(format!("{unconfirmed} transactions in bitcoind's mempool"));
        }
        if busy.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            stuck.extend(pending_ids);
            if gap != 0 {
                *stuck_gap = Some(gap);
            }
            return Err(format!("did not settle in 120 s: {}", busy.join("; ")));
        }
        // A pending refresh may wait for a round that has not started yet.
        stack.trigger_round();
        std::thread::sleep(Duration::from_millis(500));
        stack.bitcoind.mine(1);
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub(crate) fn store_check(datadir: &std::path::Path) -> Result<(), String> {
    let out = harness::berthd(datadir, &["store", "check"]);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "store check: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn sats(btc: &Value) -> u64 {
    (btc.as_f64().expect("an amount in BTC") * 100_000_000.0).round() as u64
}

/// The invariants that hold at rest; each broken one, said. `lightning_ops`: the label
/// and invoice of each Lightning payment asked for.
fn check_at_rest(
    stack: &Stack,
    wallets: &[Berthd; 2],
    onchain_ops: &[String],
    lightning_ops: &[(String, String)],
) -> Vec<String> {
    let mut broken = Vec::new();
    let (mut sent_arkoor, mut received_arkoor) = (0, 0);
    let mut paid_onchain: BTreeMap<String, u64> = BTreeMap::new();
    let mut paid_invoices: BTreeMap<String, usize> = BTreeMap::new();
    for wallet in wallets {
        let balance = wallet.get_ok("/api/v1/wallet/balance");
        let movements = history(wallet);
        // The Ark server answers throughout and refreshes are free: nothing may have
        // been exited, by the watchdog or anyone (issue 46).
        let exits = movements
            .iter()
            .filter(|m| subsystem(m).0 == "bark.exit")
            .count();
        let listed = wallet.get_ok("/api/v1/exits/status/all");
        if exits > 0 || listed != json!([]) {
            broken.push(format!(
                "{}: exits started with the server up: {exits} exit movement(s), {listed}",
                wallet.name
            ));
        }
        let successful = movements.iter().filter(|m| m["status"] == "successful");
        let sum: i64 = successful
            .clone()
            .map(|m| m["effective_balance_sat"].as_i64().unwrap_or_default())
            .sum();
        let total = balance["total_sat"].as_i64().expect("total_sat");
        if sum != total {
            broken.push(format!(
                "{}: Ark balance {total} sat, but its successful movements add up to {sum}",
                wallet.name
            ));
        }
        let (sent, received) = arkoor_totals(&movements);
        sent_arkoor += sent;
        received_arkoor += received;
        for m in successful {
            for to in m["sent_to"].as_array().into_iter().flatten() {
                if let (Some(address), Some(amount)) = (
                    to["destination"]["value"].as_str(),
                    to["amount_sat"].as_u64(),
                ) && onchain_ops.iter().any(|a| a == address)
                {
                    *paid_onchain.entry(address.to_string()).or_default() += amount;
                }
                if let Some(invoice) = to["destination"]["value"].as_str()
                    && lightning_ops.iter().any(|(_, i)| i == invoice)
                {
                    *paid_invoices.entry(invoice.to_string()).or_default() += 1;
                }
            }
        }
    }
    // What the outside node was paid is what the histories say was paid: a payment
    // the wallet gave up on (its funds back) was not paid, one it counts was, once.
    if let Some(ln) = &stack.lightning {
        for (label, invoice) in lightning_ops {
            let status = ln.external.invoice_status(label);
            let in_histories = paid_invoices.get(invoice).copied().unwrap_or(0);
            if in_histories != usize::from(status == "paid") {
                broken.push(format!(
                    "invoice {label} is {status} on the node it pays; successful payments of it in the histories: {in_histories}"
                ));
            }
        }
    }
    if sent_arkoor != received_arkoor {
        broken.push(format!(
            "arkoor payments: {sent_arkoor} sat sent, {received_arkoor} sat received"
        ));
    }
    for address in onchain_ops {
        let received = sats(
            &stack
                .bitcoind
                .rpc("getreceivedbyaddress", json!([address, 1])),
        );
        let expected = paid_onchain.get(address).copied().unwrap_or(0);
        if received != expected {
            broken.push(format!(
                "{address} received {received} sat on chain; the histories say {expected}"
            ));
        }
    }
    broken
}

/// What a loop does to one wallet at each cycle's random moment.
pub(crate) trait Fault {
    /// What it is called in the loop's lines ("SIGKILL", "power cut").
    fn name(&self) -> &'static str;
    /// The wallet struck this cycle, given the one acting.
    fn victim(&mut self, rng: &mut Rng, actor: usize) -> usize;
    /// Strike `victim`, which is down afterwards; what was found wrong before it may
    /// start again, and a word on the strike for the cycle's line.
    fn strike(&mut self, victim: &mut Berthd, rng: &mut Rng) -> (Vec<String>, String);
}

/// SIGKILL at a random moment (`scripts/chaos`): most often the wallet doing the
/// operation, at times the other one.
struct Kill;

impl Fault for Kill {
    fn name(&self) -> &'static str {
        "SIGKILL"
    }

    fn victim(&mut self, rng: &mut Rng, actor: usize) -> usize {
        if rng.below(4) == 0 { 1 - actor } else { actor }
    }

    fn strike(&mut self, victim: &mut Berthd, _rng: &mut Rng) -> (Vec<String>, String) {
        victim.kill();
        (Vec::new(), String::new())
    }
}

/// A loop's stack: with Core Lightning when the machine has it (`LIGHTNINGD_EXEC`:
/// Lightning payments join the loop), else without, which the loop says.
pub(crate) fn loop_stack(label: &str, test: &str) -> Stack {
    match crate::lightning::LightningBinaries::from_env() {
        Ok(_) => Stack::start_with_lightning(test).expect("Core Lightning is there"),
        Err(why) => {
            println!("{label}: no Lightning payments in the loop ({why})");
            Stack::start(test)
        }
    }
}

/// The seed of a loop: `<PREFIX>_SEED`, else the clock (printed, so a run repeats).
pub(crate) fn seed(prefix: &str) -> u64 {
    std::env::var(format!("{prefix}_SEED"))
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos() as u64
                | 1
        })
}

#[test]
#[ignore = "tool: the chaos loop over real payments, run by scripts/chaos"]
fn tool_chaos_loop() {
    let cycles: u64 = std::env::var("CHAOS_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100);
    let seed = seed("CHAOS");
    println!("chaos: seed {seed}, {cycles} cycles (CHAOS_SEED={seed} repeats this run)");
    let stack = loop_stack("chaos", "tool_chaos_loop");
    let mut wallets = [stack.berthd("alice"), stack.berthd("bob")];
    run_loop("chaos", &stack, &mut wallets, cycles, seed, &mut Kill);
}

/// Fund both wallets, then `cycles` cycles of: an operation by one wallet, `fault` at a
/// random moment of it, the struck wallet checked and started again, the client's
/// retry, both driven to rest, and the invariants checked (the module's list). Prints
/// the table of operations and outcomes and every discrepancy, and fails on any.
pub(crate) fn run_loop(
    label: &str,
    stack: &Stack,
    wallets: &mut [Berthd; 2],
    cycles: u64,
    seed: u64,
    fault: &mut dyn Fault,
) {
    let mut rng = Rng(seed);
    let started = Instant::now();
    for wallet in wallets.iter() {
        crate::fund_onchain(stack, wallet, 5_000_000);
    }
    for wallet in wallets.iter() {
        crate::board_and_confirm(stack, wallet, 1_000_000);
    }

    let mut table: BTreeMap<(Kind, Outcome), u64> = BTreeMap::new();
    let mut discrepancies: Vec<String> = Vec::new();
    let mut onchain_ops: Vec<String> = Vec::new();
    let mut lightning_ops: Vec<(String, String)> = Vec::new();
    let mut strikes_mid_request = 0u64;
    let mut store_checks = 0u64;
    let mut stuck = std::collections::BTreeSet::new();
    let mut stuck_gap = None;
    for cycle in 0..cycles {
        let actor = rng.below(2) as usize;
        let other = 1 - actor;
        let victim = fault.victim(&mut rng, actor);
        let op = choose(&mut rng, stack, &wallets[other], cycle);
        let newest = |w: &Berthd| {
            history(w)
                .iter()
                .filter_map(|m| m["id"].as_u64())
                .max()
                .unwrap_or(0)
        };
        let before = newest(&wallets[actor]);
        let key = format!("{label}-{seed}-{cycle}");
        let (port, auth) = (wallets[actor].port(), wallets[actor].authorization());
        let (path, body, request_key) = (op.path, op.body.clone(), key.clone());
        let request =
            std::thread::spawn(move || post_keyed(port, &auth, path, &body, &request_key));
        std::thread::sleep(Duration::from_millis(rng.below(800)));
        let (found_wrong, said) = fault.strike(&mut wallets[victim], &mut rng);
        let answer = request.join().expect("request thread");
        let cut = answer.is_none();
        if cut {
            strikes_mid_request += 1;
        }
        for wrong in found_wrong {
            discrepancies.push(format!("cycle {cycle}: {}: {wrong}", wallets[victim].name));
        }
        if let Err(e) = store_check(&wallets[victim].datadir) {
            discrepancies.push(format!("cycle {cycle}: {}: {e}", wallets[victim].name));
        }
        store_checks += 1;
        wallets[victim].restart();

        let mut acknowledged_id = None;
        let outcome = match answer {
            Some((200, reply)) => {
                acknowledged_id = reply["movement_id"].as_u64();
                Outcome::Acknowledged
            }
            Some((202, reply)) => {
                acknowledged_id = reply["movement_id"].as_u64();
                Outcome::Accepted
            }
            Some((status, _)) if (400..500).contains(&status) || status == 503 => Outcome::Refused,
            Some((status, reply)) => {
                discrepancies.push(format!(
                    "cycle {cycle}: {} answered {status}: {reply}",
                    op.kind.name()
                ));
                Outcome::Refused
            }
            None => {
                // The phone retries with the same key once berthd is back.
                let (port, auth) = (wallets[actor].port(), wallets[actor].authorization());
                match post_keyed(port, &auth, op.path, &op.body, &key) {
                    Some((200 | 202, reply)) => {
                        acknowledged_id = reply["movement_id"].as_u64();
                        Outcome::RetriedRan
                    }
                    // 409: it may have run, so it is not run again; found out below.
                    _ => Outcome::CutNotApplied,
                }
            }
        };

        if let Err(e) = settle(stack, wallets, &mut stuck, &mut stuck_gap) {
            discrepancies.push(format!("cycle {cycle}: {e}"));
        }
        let after = history(&wallets[actor]);
        let found = matching(&after, &op, before);
        let outcome = match (outcome, op.kind) {
            (_, Kind::Refresh) => outcome,
            (Outcome::CutNotApplied, _) if found.len() == 1 => Outcome::CutApplied,
            _ => outcome,
        };
        if op.kind != Kind::Refresh {
            let expected = match outcome {
                Outcome::Acknowledged
                | Outcome::Accepted
                | Outcome::RetriedRan
                | Outcome::CutApplied => 1,
                Outcome::Refused | Outcome::CutNotApplied => 0,
            };
            // Something that did not happen may leave a failed movement (bark records
            // an attempt the server refused, with nothing spent), never another one.
            let counted = if expected == 0 {
                found.iter().filter(|m| m["status"] != "failed").count()
            } else {
                found.len()
            };
            if counted != expected {
                discrepancies.push(format!(
                    "cycle {cycle}: {} ({}) is in the history {counted} times, not {expected}",
                    op.kind.name(),
                    outcome.name(),
                ));
            }
            if let Some(id) = acknowledged_id
                && after
                    .iter()
                    .filter(|m| m["id"].as_u64() == Some(id))
                    .count()
                    != 1
            {
                discrepancies.push(format!(
                    "cycle {cycle}: acknowledged movement {id} is not in the history once"
                ));
            }
        }
        if op.kind == Kind::SendOnchain {
            onchain_ops.push(op.destination.clone().expect("address"));
        }
        if let (Some(label), Some(invoice)) = (&op.invoice_label, &op.destination) {
            lightning_ops.push((label.clone(), invoice.clone()));
        }
        for broken in check_at_rest(stack, wallets, &onchain_ops, &lightning_ops) {
            discrepancies.push(format!("cycle {cycle}: {broken}"));
        }
        *table.entry((op.kind, outcome)).or_default() += 1;
        println!(
            "{label}: cycle {cycle}: {} by {}, {} to {}{}{said}: {}",
            op.kind.name(),
            wallets[actor].name,
            fault.name(),
            wallets[victim].name,
            if cut { " mid-request" } else { "" },
            outcome.name()
        );
    }

    println!();
    println!("| operation | outcome | cycles |");
    println!("|---|---|---|");
    for ((kind, outcome), n) in &table {
        println!("| {} | {} | {n} |", kind.name(), outcome.name());
    }
    println!();
    println!(
        "{label}: {cycles} cycles, {cycles} {}s ({strikes_mid_request} mid-request), \
         {store_checks} store checks, {} discrepancies, {:.0} s (seed {seed})",
        fault.name(),
        discrepancies.len(),
        started.elapsed().as_secs_f64()
    );
    for d in &discrepancies {
        println!("{label}: discrepancy: {d}");
    }
    assert!(discrepancies.is_empty(), "{discrepancies:#?}");
}
