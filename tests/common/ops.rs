//! Random wallet-state operations and a full read-back of a persister, shared by the
//! differential test (our store against bark's in-memory persister) and the crash test
//! (our store against a model that never crashed).
//!
//! Operations name VTXOs by their index in a fixed pool and movements/round states by
//! their position among the existing ones, so the same operation means the same thing
//! to every persister that holds the same state. Where our store is deliberately stricter
//! than bark's generic adaptor (docs/storage.md, "Semantics"), [`apply`] only issues the
//! calls bark itself makes: new VTXOs only, a mailbox checkpoint that does not go back,
//! updates of existing movements that add destinations, updates of live round states.

use std::sync::LazyLock;

use ark::vtxo::Full;
use ark::{ProtocolEncoding, Vtxo, VtxoId};
use bark::actions::WalletActionCheckpoint;
use bark::exit::{ExitStartState, ExitState, ExitStateKind, ExitTxOrigin};
use bark::movement::update::MovementUpdate;
use bark::movement::{Movement, MovementDestination, MovementId, MovementStatus, PaymentMethod};
use bark::persist::BarkPersister;
use bark::persist::models::{StoredExit, StoredRoundState};
use bark::vtxo::{VtxoLockHolder, VtxoState, VtxoStateKind};
use bitcoin::hashes::Hash;
use bitcoin::{Amount, BlockHash, SignedAmount, Transaction, Txid};
use bitcoin_ext::{BlockHeight, BlockRef};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::*;

/// Number of movements every sequence starts with, so locks can name a live owner.
pub const OWNER_MOVEMENTS: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Holder {
    /// One of the first [`OWNER_MOVEMENTS`] movements (1-based id = n % 3 + 1).
    Movement(u8),
    Action(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    Spendable,
    Locked(Option<Holder>),
    Spent,
    Exited,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    SetServerPubkey(u8),
    SetMailboxPubkey(u8),
    StoreBdkNetwork,
    StoreVtxos(Vec<(usize, State)>),
    UpdateState {
        vtxo: usize,
        to: State,
        allowed: Vec<u8>,
    },
    UpdateStates {
        vtxos: Vec<usize>,
        to: State,
        allowed: Vec<u8>,
    },
    ReleaseLock {
        vtxo: usize,
        holder: Option<Holder>,
    },
    StealLock {
        vtxos: Vec<usize>,
        holder: Option<Holder>,
    },
    StealLockToSpent(Vec<usize>),
    RemoveVtxo(usize),
    MarkRegistered(Vec<usize>),
    StoreVtxoKeys(Vec<(u32, u8)>),
    AdvanceMailbox(u64),
    CreateMovement {
        status: u8,
        secs: i64,
        action: Option<u8>,
    },
    MovementForAction {
        action: u8,
        secs: i64,
        balance: i64,
    },
    UpdateMovement {
        nth: usize,
        status: u8,
        add_received: Option<u8>,
    },
    StoreRoundState(bool),
    UpdateRoundState {
        nth: usize,
        done: bool,
    },
    RemoveRoundState {
        nth: usize,
    },
    UpsertCheckpoint {
        id: u8,
        note: Option<u8>,
    },
    RemoveCheckpoint(u8),
    RecordPaidInvoice(u8, u8),
    RecordSettledReceive(u8, u64),
    StoreExit {
        id: u8,
        canceled: bool,
    },
    RemoveExit(u8),
    StoreExitChild {
        txid: u8,
        locktime: u32,
        confirmed: bool,
    },
    // What the balance tells apart (`balance_op_strategy`): rounds, boards and exits
    // that hold VTXOs of the pool.
    /// A round whose inputs are these VTXOs, owned by one of the owner movements (its
    /// locks name it) or by none.
    StoreRoundWithInputs {
        inputs: Vec<usize>,
        owner: Option<u8>,
        done: bool,
    },
    /// A board action waiting for confirmations on this VTXO.
    UpsertBoardOf {
        id: u8,
        vtxo: usize,
    },
    /// An exit of this VTXO, at stage `stage` (start, awaiting delta, claimable,
    /// claimed, canceled).
    StoreExitOf {
        vtxo: usize,
        stage: u8,
    },
}

/// The VTXOs operations refer to: bark's six signed test vectors plus boards of ours.
pub fn standard_pool() -> Vec<Vtxo<Full>> {
    let v = &*ark::test_util::VTXO_VECTORS;
    let mut pool = vec![
        v.board_vtxo.clone(),
        v.arkoor_htlc_out_vtxo.clone(),
        v.arkoor2_vtxo.clone(),
        v.round1_vtxo.clone(),
        v.round2_vtxo.clone(),
        v.arkoor3_vtxo.clone(),
    ];
    pool.extend(super::vtxos::vtxo_pool(10));
    pool
}

pub static POOL: LazyLock<Vec<Vtxo<Full>>> = LazyLock::new(standard_pool);

fn base_time() -> chrono::DateTime<chrono::Local> {
    chrono::DateTime::from_timestamp(1_700_000_000, 0)
        .expect("valid time")
        .with_timezone(&chrono::Local)
}

fn holder(h: Holder) -> VtxoLockHolder {
    match h {
        Holder::Movement(n) => MovementId::new(u32::from(n) % OWNER_MOVEMENTS + 1).into(),
        Holder::Action(n) => VtxoLockHolder::Action {
            id: format!("action.{n}"),
        },
    }
}

fn state(s: State) -> VtxoState {
    match s {
        State::Spendable => VtxoState::Spendable,
        State::Locked(h) => VtxoState::Locked {
            holder: h.map(holder),
        },
        State::Spent => VtxoState::Spent,
        State::Exited => VtxoState::Exited,
    }
}

fn kinds(bytes: &[u8]) -> Vec<VtxoStateKind> {
    bytes
        .iter()
        .map(|b| VtxoStateKind::ALL[usize::from(*b) % 4])
        .collect()
}

fn status(n: u8) -> MovementStatus {
    [
        MovementStatus::Pending,
        MovementStatus::Successful,
        MovementStatus::Failed,
    ][usize::from(n) % 3]
}

fn txid(n: u8) -> Txid {
    Txid::from_slice(&[n; 32]).expect("32 bytes")
}

fn exit_id(n: u8) -> VtxoId {
    VtxoId::from_slice(&[n; 36]).expect("36 bytes")
}

fn checkpoint(id: u8, note: Option<u8>) -> WalletActionCheckpoint {
    let note = note.map(|n| format!("note {n}"));
    board_checkpoint(&format!("board.{id}"), POOL[0].id(), note.as_deref())
}

fn ids(pool: &[Vtxo<Full>], idx: &[usize]) -> Vec<VtxoId> {
    idx.iter().map(|i| pool[i % pool.len()].id()).collect()
}

/// The first steps of every sequence: a wallet and the movements locks may name.
pub async fn prologue(db: &impl BarkPersister) {
    db.init_wallet(&properties()).await.expect("init");
    for _ in 0..OWNER_MOVEMENTS {
        db.create_new_movement(MovementStatus::Pending, &subsystem(), base_time(), None)
            .await
            .expect("owner movement");
    }
}

async fn existing<'a>(
    db: &impl BarkPersister,
    pool: &'a [Vtxo<Full>],
    idx: &[usize],
) -> Vec<&'a Vtxo<Full>> {
    let mut out = Vec::new();
    for i in idx {
        let v = &pool[i % pool.len()];
        if db.get_wallet_vtxo(v.id()).await.ok().flatten().is_some() {
            out.push(v);
        }
    }
    out
}

/// Apply `op`; `Ok` or the error text. Only state-dependent choices read `db`.
pub async fn apply(db: &impl BarkPersister, op: &Op, pool: &[Vtxo<Full>]) -> Result<(), String> {
    let e = |e: anyhow::Error| format!("{e:#}");
    let t = |secs: i64| base_time() + chrono::Duration::seconds(secs);
    match op.clone() {
        Op::SetServerPubkey(n) => db.set_server_pubkey(pubkey(n % 50 + 1)).await.map_err(e),
        Op::SetMailboxPubkey(n) => db
            .set_server_mailbox_pubkey(pubkey(n % 50 + 1))
            .await
            .map_err(e),
        Op::StoreBdkNetwork => {
            let cs = bdk_wallet::ChangeSet {
                network: Some(bitcoin::Network::Regtest),
                ..Default::default()
            };
            db.store_bdk_wallet_changeset(&cs).await.map_err(e)
        }
        Op::StoreVtxos(items) => {
            // Only VTXOs not stored yet, each once: what bark does (see module docs).
            let mut batch: Vec<(&Vtxo<Full>, VtxoState)> = Vec::new();
            for (i, s) in items {
                let v = &pool[i % pool.len()];
                let stored = db.get_wallet_vtxo(v.id()).await.map_err(e)?.is_some();
                if !stored && !batch.iter().any(|(b, _)| b.id() == v.id()) {
                    batch.push((v, state(s)));
                }
            }
            let refs: Vec<_> = batch.iter().map(|(v, s)| (*v, s)).collect();
            db.store_vtxos(&refs).await.map_err(e)
        }
        Op::UpdateState { vtxo, to, allowed } => db
            .update_vtxo_state_checked(pool[vtxo % pool.len()].id(), state(to), &kinds(&allowed))
            .await
            .map(|_| ())
            .map_err(e),
        Op::UpdateStates { vtxos, to, allowed } => db
            .update_vtxo_states_checked(&ids(pool, &vtxos), state(to), &kinds(&allowed))
            .await
            .map_err(e),
        Op::ReleaseLock { vtxo, holder: h } => {
            let h = h.map(holder);
            db.release_vtxo_lock(pool[vtxo % pool.len()].id(), h.as_ref())
                .await
                .map_err(e)
        }
        Op::StealLock { vtxos, holder: h } => db
            .steal_lock(&ids(pool, &vtxos), h.map(holder))
            .await
            .map_err(e),
        Op::StealLockToSpent(vtxos) => db.steal_lock_to_spent(&ids(pool, &vtxos)).await.map_err(e),
        Op::RemoveVtxo(i) => db
            .remove_vtxo(pool[i % pool.len()].id())
            .await
            .map(|_| ())
            .map_err(e),
        Op::MarkRegistered(idx) => {
            // bark only marks VTXOs it holds (the adaptor is not atomic on unknown ids).
            let live: Vec<_> = existing(db, pool, &idx)
                .await
                .iter()
                .map(|v| v.id())
                .collect();
            db.mark_vtxos_registered(&live).await.map_err(e)
        }
        Op::StoreVtxoKeys(keys) => {
            let keys: Vec<_> = keys
                .into_iter()
                .map(|(i, n)| (i % 64, pubkey(n % 50 + 1)))
                .collect();
            db.store_vtxo_keys(&keys).await.map_err(e)
        }
        Op::AdvanceMailbox(delta) => {
            let now = db.get_mailbox_checkpoint().await.map_err(e)?;
            db.store_mailbox_checkpoint(now + delta).await.map_err(e)
        }
        Op::CreateMovement {
            status: s,
            secs,
            action,
        } => {
            let action = action.map(|a| format!("action.{a}"));
            db.create_new_movement(status(s), &subsystem(), t(secs), action.as_deref())
                .await
                .map(|_| ())
                .map_err(e)
        }
        Op::MovementForAction {
            action,
            secs,
            balance,
        } => {
            let update = MovementUpdate::new().intended_balance(SignedAmount::from_sat(balance));
            db.get_or_create_movement_for_action(
                &subsystem(),
                t(secs),
                &format!("action.{action}"),
                update,
            )
            .await
            .map(|_| ())
            .map_err(e)
        }
        Op::UpdateMovement {
            nth,
            status: s,
            add_received,
        } => {
            let mut all = db.get_all_movements().await.map_err(e)?;
            all.sort_by_key(|m| m.id);
            let Some(mut m) = all.get(nth % all.len().max(1)).cloned() else {
                return Ok(());
            };
            m.status = status(s);
            if let Some(pm) = add_received {
                let dest = PaymentMethod::Custom(format!("pm{}", pm % 4));
                m.received_on.push(MovementDestination::new(
                    dest,
                    Amount::from_sat(u64::from(pm) + 1),
                ));
            }
            db.update_movement(&m).await.map_err(e)
        }
        Op::StoreRoundState(done) => db
            .store_round_state(&round_state(done))
            .await
            .map(|_| ())
            .map_err(e),
        Op::UpdateRoundState { nth, done } => {
            let live = db.get_pending_round_state_ids().await.map_err(e)?;
            let Some(id) = live.get(nth % live.len().max(1)) else {
                return Ok(());
            };
            let mut locked =
                StoredRoundState::new(*id, round_state(!done)).lock(Box::new(TestGuard));
            *locked.state_mut() = round_state(done);
            db.update_round_state(&locked).await.map_err(e)
        }
        Op::RemoveRoundState { nth } => {
            let live = db.get_pending_round_state_ids().await.map_err(e)?;
            let Some(id) = live.get(nth % live.len().max(1)) else {
                return Ok(());
            };
            let locked = StoredRoundState::new(*id, round_state(false)).lock(Box::new(TestGuard));
            db.remove_round_state(&locked).await.map_err(e)
        }
        Op::UpsertCheckpoint { id, note } => {
            let cp = checkpoint(id % 6, note);
            db.upsert_wallet_action_checkpoint(&cp.id(), &cp)
                .await
                .map_err(e)
        }
        Op::RemoveCheckpoint(id) => db
            .remove_wallet_action_checkpoint(&checkpoint(id % 6, None).id())
            .await
            .map_err(e),
        Op::RecordPaidInvoice(h, p) => db
            .record_paid_invoice(payment_hash(h % 8), preimage(p))
            .await
            .map_err(e),
        Op::RecordSettledReceive(h, amount) => db
            .record_settled_lightning_receive(
                payment_hash(h % 8 + 100),
                preimage(h),
                &INVOICE,
                Amount::from_sat(amount),
            )
            .await
            .map_err(e),
        Op::StoreExit { id, canceled } => {
            let start = ExitState::Start(ExitStartState {
                tip_height: BlockHeight::new(100),
            });
            let exit = StoredExit {
                vtxo_id: exit_id(id % 6),
                state: if canceled {
                    ExitState::new_canceled(BlockHeight::new(150))
                } else {
                    start.clone()
                },
                history: vec![start],
                movement_id: Some(MovementId::new(1)),
            };
            db.store_exit_vtxo_entry(&exit).await.map_err(e)
        }
        Op::RemoveExit(id) => db.remove_exit_vtxo_entry(&exit_id(id % 6)).await.map_err(e),
        Op::StoreExitChild {
            txid: n,
            locktime,
            confirmed,
        } => {
            let tx = Transaction {
                version: bitcoin::transaction::Version::TWO,
                lock_time: bitcoin::absolute::LockTime::from_consensus(locktime),
                input: vec![],
                output: vec![],
            };
            let block = BlockRef {
                height: BlockHeight::new(7),
                hash: BlockHash::from_slice(&[n; 32]).expect("32"),
            };
            let origin = ExitTxOrigin::Wallet {
                confirmed_in: confirmed.then_some(block),
            };
            db.store_exit_child_tx(txid(n % 6), &tx, origin)
                .await
                .map_err(e)
        }
        Op::StoreRoundWithInputs {
            inputs,
            owner,
            done,
        } => {
            let inputs: Vec<String> = inputs
                .iter()
                .map(|i| pool[i % pool.len()].serialize_hex())
                .collect();
            let json = serde_json::json!({
                "done": done,
                "participation": { "inputs": inputs, "outputs": [] },
                "movement_id": owner.map(|n| u32::from(n) % OWNER_MOVEMENTS + 1),
                "flow": "InteractivePending",
                "new_vtxos": [],
                "sent_forfeit_sigs": false,
            });
            let round: bark::round::RoundState =
                serde_json::from_value::<bark::persist::models::SerdeRoundState>(json)
                    .expect("round state model parses")
                    .into();
            db.store_round_state(&round).await.map(|_| ()).map_err(e)
        }
        Op::UpsertBoardOf { id, vtxo } => {
            let cp = board_checkpoint(
                &format!("board.{}", id % 6),
                pool[vtxo % pool.len()].id(),
                None,
            );
            db.upsert_wallet_action_checkpoint(&cp.id(), &cp)
                .await
                .map_err(e)
        }
        Op::StoreExitOf { vtxo, stage } => {
            let block = |h: u32| BlockRef {
                height: BlockHeight::new(h),
                hash: BlockHash::from_slice(&[h as u8; 32]).expect("32"),
            };
            let start = ExitState::Start(ExitStartState {
                tip_height: BlockHeight::new(100),
            });
            let state = match stage % 5 {
                0 => start.clone(),
                1 => ExitState::AwaitingDelta(bark::exit::ExitAwaitingDeltaState {
                    tip_height: BlockHeight::new(110),
                    confirmed_block: block(105),
                    claimable_height: BlockHeight::new(250),
                }),
                2 => ExitState::Claimable(bark::exit::ExitClaimableState {
                    tip_height: BlockHeight::new(260),
                    claimable_since: block(250),
                    last_scanned_block: None,
                }),
                3 => ExitState::Claimed(bark::exit::ExitClaimedState {
                    tip_height: BlockHeight::new(270),
                    txid: txid(9),
                    block: block(265),
                }),
                _ => ExitState::new_canceled(BlockHeight::new(150)),
            };
            let exit = StoredExit {
                vtxo_id: pool[vtxo % pool.len()].id(),
                state,
                history: vec![start],
                movement_id: Some(MovementId::new(1)),
            };
            db.store_exit_vtxo_entry(&exit).await.map_err(e)
        }
    }
}

/// Everything a persister answers about its state, normalised where the trait leaves
/// the order (or a timestamp it sets itself) unspecified.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    properties: Option<bark::WalletProperties>,
    bdk: bdk_wallet::ChangeSet,
    all_vtxos: Vec<bark::WalletVtxo>,
    by_state: Vec<Vec<bark::WalletVtxo>>,
    per_vtxo: Vec<(Option<bark::WalletVtxo>, Option<Vec<u8>>, bool)>,
    unregistered: Vec<VtxoId>,
    last_key: Option<u32>,
    key_indexes: Vec<Option<u32>>,
    mailbox: u64,
    movements: Vec<Movement>,
    by_payment_method: Vec<Vec<MovementId>>,
    by_action: Vec<Option<MovementId>>,
    round_states: Vec<(u32, String)>,
    checkpoints: Vec<WalletActionCheckpoint>,
    paid: Vec<
        Option<(
            bark::ark::lightning::PaymentHash,
            bark::ark::lightning::Preimage,
        )>,
    >,
    settled: Vec<Option<(Amount, bark::ark::lightning::Preimage)>>,
    exits: Vec<StoredExit>,
    exits_canceled: Vec<VtxoId>,
    children: Vec<Option<(Transaction, ExitTxOrigin)>>,
}

pub async fn snapshot(db: &impl BarkPersister, pool: &[Vtxo<Full>]) -> Snapshot {
    let mut per_vtxo = Vec::new();
    for v in pool {
        per_vtxo.push((
            db.get_wallet_vtxo(v.id())
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "vtxo")),
            db.get_full_vtxo(v.id())
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "full"))
                .map(|f| f.serialize()),
            db.has_spent_vtxo(v.id())
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "spent")),
        ));
    }
    let state_sets: [&[VtxoStateKind]; 5] = [
        &[VtxoStateKind::Spendable],
        &[VtxoStateKind::Locked],
        &[VtxoStateKind::Spent, VtxoStateKind::Exited],
        &[VtxoStateKind::Locked, VtxoStateKind::Spendable],
        VtxoStateKind::ALL,
    ];
    let mut by_state = Vec::new();
    for set in state_sets {
        by_state.push(
            db.get_vtxos_by_state(set)
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "by state")),
        );
    }
    let mut unregistered = db
        .get_unregistered_vtxo_ids()
        .await
        .unwrap_or_else(|e| panic!("read {}: {e:#}", "unregistered"));
    unregistered.sort();
    let mut key_indexes = Vec::new();
    for n in 1..=50u8 {
        key_indexes.push(
            db.get_public_key_idx(&pubkey(n))
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "key")),
        );
    }
    let mut movements = db
        .get_all_movements()
        .await
        .unwrap_or_else(|e| panic!("read {}: {e:#}", "movements"));
    movements.sort_by_key(|m| m.id);
    for m in &movements {
        assert_eq!(
            &db.get_movement_by_id(m.id)
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "movement")),
            m
        );
    }
    let mut by_payment_method = Vec::new();
    for n in 0..4 {
        let pm = PaymentMethod::Custom(format!("pm{n}"));
        let found = db
            .get_movements_by_payment_method(&pm)
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "by pm"));
        by_payment_method.push(found.iter().map(|m| m.id).collect());
    }
    let mut by_action = Vec::new();
    for n in 0..8 {
        by_action.push(
            db.get_movement_id_by_action(&format!("action.{n}"))
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "action")),
        );
    }
    let mut round_states = Vec::new();
    for id in db
        .get_pending_round_state_ids()
        .await
        .unwrap_or_else(|e| panic!("read {}: {e:#}", "round ids"))
    {
        let s = db
            .get_round_state_by_id(id)
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "round"))
            .expect("listed state exists");
        round_states.push((id.0, round_json(s.state())));
    }
    let mut checkpoints = db
        .get_all_wallet_action_checkpoints()
        .await
        .unwrap_or_else(|e| panic!("read {}: {e:#}", "checkpoints"));
    checkpoints.sort_by_key(|c| c.id());
    let mut paid = Vec::new();
    let mut settled = Vec::new();
    for h in 0..8u8 {
        let p = db
            .get_paid_invoice(payment_hash(h))
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "paid"));
        paid.push(p.map(|p| (p.payment_hash, p.preimage)));
        let s = db
            .get_settled_lightning_receive(payment_hash(h + 100))
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "settled"));
        settled.push(s.map(|s| (s.amount, s.preimage)));
    }
    let mut children = Vec::new();
    for n in 0..6 {
        children.push(
            db.get_exit_child_tx(txid(n))
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "child")),
        );
    }
    let exits = db
        .get_exit_vtxo_entries()
        .await
        .unwrap_or_else(|e| panic!("read {}: {e:#}", "exits"));
    for e in &exits {
        assert_eq!(
            db.get_exit_vtxo_entry(&e.vtxo_id)
                .await
                .unwrap_or_else(|e| panic!("read {}: {e:#}", "exit"))
                .as_ref(),
            Some(e)
        );
    }
    let mut exits_canceled: Vec<_> = db
        .get_exit_vtxo_entries_with_states(&[ExitStateKind::Canceled])
        .await
        .unwrap_or_else(|e| panic!("read {}: {e:#}", "exits by state"))
        .into_iter()
        .map(|e| e.vtxo_id)
        .collect();
    exits_canceled.sort();
    Snapshot {
        properties: db
            .read_properties()
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "properties")),
        bdk: db
            .initialize_bdk_wallet()
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "bdk")),
        all_vtxos: db
            .get_all_vtxos()
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "all vtxos")),
        by_state,
        per_vtxo,
        unregistered,
        last_key: db
            .get_last_vtxo_key_index()
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "last key")),
        key_indexes,
        mailbox: db
            .get_mailbox_checkpoint()
            .await
            .unwrap_or_else(|e| panic!("read {}: {e:#}", "mailbox")),
        movements,
        by_payment_method,
        by_action,
        round_states,
        checkpoints,
        paid,
        settled,
        exits,
        exits_canceled,
        children,
    }
}

fn holder_strategy() -> impl Strategy<Value = Option<Holder>> {
    prop_oneof![
        Just(None),
        any::<u8>().prop_map(|n| Some(Holder::Movement(n))),
        (0u8..8).prop_map(|n| Some(Holder::Action(n))),
    ]
}

fn state_strategy() -> impl Strategy<Value = State> {
    prop_oneof![
        Just(State::Spendable),
        holder_strategy().prop_map(State::Locked),
        Just(State::Spent),
        Just(State::Exited),
    ]
}

/// Indices into the pool (16 VTXOs).
fn vtxo_idx() -> impl Strategy<Value = usize> {
    0usize..16
}

/// [`op_strategy`] with operations that hold pool VTXOs in rounds, boards and exits,
/// so every field of the balance is exercised.
pub fn balance_op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => op_strategy(),
        2 => (prop::collection::vec(vtxo_idx(), 0..4), prop::option::of(any::<u8>()), any::<bool>())
            .prop_map(|(inputs, owner, done)| Op::StoreRoundWithInputs { inputs, owner, done }),
        1 => (any::<u8>(), vtxo_idx()).prop_map(|(id, vtxo)| Op::UpsertBoardOf { id, vtxo }),
        2 => (vtxo_idx(), any::<u8>()).prop_map(|(vtxo, stage)| Op::StoreExitOf { vtxo, stage }),
        // Exited VTXOs, for the exits above to hold.
        2 => (vtxo_idx(), prop::collection::vec(0u8..4, 0..4))
            .prop_map(|(vtxo, allowed)| Op::UpdateState { vtxo, to: State::Exited, allowed }),
    ]
}

pub fn op_strategy() -> impl Strategy<Value = Op> {
    let allowed = || prop::collection::vec(0u8..4, 0..4);
    prop_oneof![
        1 => any::<u8>().prop_map(Op::SetServerPubkey),
        1 => any::<u8>().prop_map(Op::SetMailboxPubkey),
        1 => Just(Op::StoreBdkNetwork),
        6 => prop::collection::vec((vtxo_idx(), state_strategy()), 1..4).prop_map(Op::StoreVtxos),
        6 => (vtxo_idx(), state_strategy(), allowed())
            .prop_map(|(vtxo, to, allowed)| Op::UpdateState { vtxo, to, allowed }),
        3 => (prop::collection::vec(vtxo_idx(), 0..4), state_strategy(), allowed())
            .prop_map(|(vtxos, to, allowed)| Op::UpdateStates { vtxos, to, allowed }),
        3 => (vtxo_idx(), holder_strategy()).prop_map(|(vtxo, holder)| Op::ReleaseLock { vtxo, holder }),
        2 => (prop::collection::vec(vtxo_idx(), 0..3), holder_strategy())
            .prop_map(|(vtxos, holder)| Op::StealLock { vtxos, holder }),
        2 => prop::collection::vec(vtxo_idx(), 0..3).prop_map(Op::StealLockToSpent),
        2 => vtxo_idx().prop_map(Op::RemoveVtxo),
        2 => prop::collection::vec(vtxo_idx(), 0..3).prop_map(Op::MarkRegistered),
        2 => prop::collection::vec((any::<u32>(), any::<u8>()), 1..4).prop_map(Op::StoreVtxoKeys),
        2 => (0u64..3).prop_map(Op::AdvanceMailbox),
        4 => (any::<u8>(), -5i64..5, prop::option::of(0u8..8))
            .prop_map(|(status, secs, action)| Op::CreateMovement { status, secs, action }),
        2 => (0u8..8, -5i64..5, -1000i64..1000)
            .prop_map(|(action, secs, balance)| Op::MovementForAction { action, secs, balance }),
        4 => (any::<usize>(), any::<u8>(), prop::option::of(any::<u8>()))
            .prop_map(|(nth, status, add_received)| Op::UpdateMovement { nth, status, add_received }),
        2 => any::<bool>().prop_map(Op::StoreRoundState),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(nth, done)| Op::UpdateRoundState { nth, done }),
        1 => any::<usize>().prop_map(|nth| Op::RemoveRoundState { nth }),
        2 => (any::<u8>(), prop::option::of(any::<u8>())).prop_map(|(id, note)| Op::UpsertCheckpoint { id, note }),
        1 => any::<u8>().prop_map(Op::RemoveCheckpoint),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(h, p)| Op::RecordPaidInvoice(h, p)),
        1 => (any::<u8>(), 1u64..100_000).prop_map(|(h, a)| Op::RecordSettledReceive(h, a)),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(id, canceled)| Op::StoreExit { id, canceled }),
        1 => any::<u8>().prop_map(Op::RemoveExit),
        2 => (any::<u8>(), any::<u32>(), any::<bool>())
            .prop_map(|(txid, locktime, confirmed)| Op::StoreExitChild { txid, locktime, confirmed }),
    ]
}
