//! Behaviour of the redb store through the `BarkPersister` trait: each case states one
//! contract of the trait (or a stricter one of ours, see docs/storage.md) and checks
//! it on a real database file.

use crate::common;

use ark::VtxoId;
use ark::test_util::VTXO_VECTORS;
use bark::exit::{
    ExitProcessingState, ExitStartState, ExitState, ExitStateKind, ExitTx, ExitTxOrigin,
    ExitTxStatus,
};
use bark::movement::update::MovementUpdate;
use bark::movement::{Movement, MovementDestination, MovementId, MovementStatus, PaymentMethod};
use bark::persist::BarkPersister;
use bark::persist::models::StoredExit;
use bark::vtxo::{VtxoLockHolder, VtxoState, VtxoStateKind};
use berth::store::schema::SCHEMA_VERSION;
use berth::store::{InitialScan, Recovery, RecoveryCounts, Store, StoreConfig, StoreError};
use bitcoin::hashes::Hash;
use bitcoin::{Amount, BlockHash, ScriptBuf, SignedAmount, Transaction, Txid};
use bitcoin_ext::{BlockHeight, BlockRef};
use common::*;

fn unknown_id() -> VtxoId {
    VtxoId::from_slice(&[0u8; 36]).expect("36 bytes")
}

fn holder(n: u32) -> Option<VtxoLockHolder> {
    Some(MovementId::new(n).into())
}

async fn state_of(db: &Store, id: VtxoId) -> VtxoState {
    db.get_wallet_vtxo(id)
        .await
        .expect("read")
        .expect("present")
        .state
}

// --- properties and on-chain state ---------------------------------------------------

#[tokio::test]
async fn properties_init_once_then_update_keys() {
    let (_dir, db) = fresh_store();
    assert_eq!(db.read_properties().await.expect("read"), None);
    assert!(
        db.set_server_pubkey(pubkey(1)).await.is_err(),
        "no wallet yet"
    );

    db.init_wallet(&properties()).await.expect("init");
    assert_eq!(
        db.read_properties().await.expect("read"),
        Some(properties())
    );
    assert!(db.is_initialized().await.expect("is_initialized"));
    assert!(
        db.init_wallet(&properties()).await.is_err(),
        "a second init must be refused"
    );

    db.set_server_pubkey(pubkey(1))
        .await
        .expect("server pubkey");
    db.set_server_mailbox_pubkey(pubkey(2))
        .await
        .expect("mailbox pubkey");
    let read = db.read_properties().await.expect("read").expect("present");
    assert_eq!(read.server_pubkey, Some(pubkey(1)));
    assert_eq!(read.server_mailbox_pubkey, Some(pubkey(2)));
    assert_eq!(read.network, properties().network);
}

#[tokio::test]
async fn bdk_changesets_merge() {
    let (_dir, db) = fresh_store();
    assert_eq!(
        db.initialize_bdk_wallet().await.expect("empty"),
        Default::default()
    );
    let first = bdk_wallet::ChangeSet {
        network: Some(bitcoin::Network::Regtest),
        ..Default::default()
    };
    db.store_bdk_wallet_changeset(&first).await.expect("store");
    // An empty changeset merged in keeps what was there.
    db.store_bdk_wallet_changeset(&Default::default())
        .await
        .expect("store empty");
    assert_eq!(db.initialize_bdk_wallet().await.expect("read"), first);
}

// --- the wallet's setup record (Berth's) ---------------------------------------------

fn recovered(n: u32) -> Recovery {
    Recovery::Finished {
        at_us: 7,
        counts: RecoveryCounts {
            recovered: n,
            recovered_sat: 1000 * u64::from(n),
            unavailable: 1,
            ..RecoveryCounts::default()
        },
    }
}

/// A creation is recorded before bark knows the wallet, finished once, and refused over
/// an existing wallet; the record says what recovery found.
#[tokio::test]
async fn a_wallet_creation_begins_and_finishes_once() {
    let (_dir, db) = fresh_store();
    assert_eq!(db.wallet_record().await.expect("read"), None);
    let fingerprint = properties().fingerprint;
    assert!(
        db.finish_wallet_creation(recovered(1)).await.is_err(),
        "nothing to finish"
    );
    db.begin_wallet_creation(
        bitcoin::Network::Regtest,
        fingerprint,
        true,
        InitialScan::FromHeight(101),
    )
    .await
    .expect("begin");
    let record = db.wallet_record().await.expect("read").expect("a wallet");
    assert_eq!(
        (
            record.network,
            record.fingerprint,
            record.imported,
            record.created
        ),
        (bitcoin::Network::Regtest, fingerprint, true, false)
    );
    assert_eq!(record.recovery, None);
    assert_eq!(
        db.initial_scan().await.expect("scan"),
        Some(InitialScan::FromHeight(101))
    );
    assert!(
        db.begin_wallet_creation(
            bitcoin::Network::Regtest,
            fingerprint,
            false,
            InitialScan::FromTip
        )
        .await
        .is_err(),
        "a second creation is refused"
    );

    db.init_wallet(&properties())
        .await
        .expect("bark creates it");
    db.finish_wallet_creation(recovered(2))
        .await
        .expect("finish");
    let record = db.wallet_record().await.expect("read").expect("a wallet");
    assert!(record.created);
    assert_eq!(record.recovery, Some(recovered(2)));
    assert!(
        db.finish_wallet_creation(recovered(3)).await.is_err(),
        "finished already"
    );
    assert!(
        db.restart_wallet_creation().await.is_err(),
        "a finished creation is not restarted"
    );

    db.wipe_wallet().await.expect("delete");
    assert_eq!(db.wallet_record().await.expect("read"), None);
    assert_eq!(db.initial_scan().await.expect("scan"), None);
    db.verify_invariants().await.expect("invariants");
}

/// An interrupted creation is started over: bark's Ark state goes (so bark creates the
/// wallet again, and recovers), the on-chain wallet, its pending scan and the record
/// stay.
#[tokio::test]
async fn an_interrupted_creation_restarts_from_bark_s_empty_state() {
    let (_dir, db) = fresh_store();
    let v = &VTXO_VECTORS;
    db.begin_wallet_creation(
        bitcoin::Network::Regtest,
        properties().fingerprint,
        true,
        InitialScan::FromHeight(5),
    )
    .await
    .expect("begin");
    db.init_wallet(&properties())
        .await
        .expect("bark creates it");
    db.store_vtxos(&[(&v.board_vtxo, &VtxoState::Spendable)])
        .await
        .expect("recovery stored a vtxo");
    db.store_vtxo_keys(&[(0, pubkey(1))]).await.expect("keys");
    db.store_mailbox_checkpoint(9).await.expect("mailbox");
    let onchain = bdk_wallet::ChangeSet {
        network: Some(bitcoin::Network::Regtest),
        ..Default::default()
    };
    db.store_bdk_wallet_changeset(&onchain)
        .await
        .expect("on-chain");

    db.restart_wallet_creation().await.expect("restart");
    assert_eq!(db.read_properties().await.expect("props"), None);
    assert_eq!(
        db.get_wallet_vtxo(v.board_vtxo.id()).await.expect("read"),
        None
    );
    assert_eq!(db.get_last_vtxo_key_index().await.expect("keys"), None);
    assert_eq!(db.get_mailbox_checkpoint().await.expect("mailbox"), 0);
    assert_eq!(db.initialize_bdk_wallet().await.expect("on-chain"), onchain);
    assert_eq!(
        db.initial_scan().await.expect("scan"),
        Some(InitialScan::FromHeight(5))
    );
    let record = db
        .wallet_record()
        .await
        .expect("read")
        .expect("still a wallet");
    assert!(!record.created && record.imported);
    db.verify_invariants().await.expect("invariants");
    // bark can create it again.
    db.init_wallet(&properties()).await.expect("created again");
}

/// A wallet made before the setup record existed is known by bark's properties alone:
/// created, with no recovery on record.
#[tokio::test]
async fn a_wallet_without_a_setup_record_is_known_by_its_properties() {
    let (_dir, db) = fresh_store();
    db.init_wallet(&properties()).await.expect("init");
    let record = db.wallet_record().await.expect("read").expect("a wallet");
    assert_eq!(
        (
            record.fingerprint,
            record.created,
            record.imported,
            record.recovery
        ),
        (properties().fingerprint, true, false, None)
    );
    assert!(
        db.begin_wallet_creation(
            bitcoin::Network::Regtest,
            properties().fingerprint,
            false,
            InitialScan::FromTip
        )
        .await
        .is_err(),
        "a wallet exists"
    );
}

// --- mailbox checkpoint and VTXO keys ------------------------------------------------

#[tokio::test]
async fn mailbox_checkpoint_only_moves_forward() {
    let (_dir, db) = fresh_store();
    assert_eq!(db.get_mailbox_checkpoint().await.expect("read"), 0);
    db.store_mailbox_checkpoint(42).await.expect("store");
    db.store_mailbox_checkpoint(42)
        .await
        .expect("same value again is a no-op");
    assert!(
        db.store_mailbox_checkpoint(41).await.is_err(),
        "going backwards is refused"
    );
    assert_eq!(db.get_mailbox_checkpoint().await.expect("read"), 42);
    db.store_mailbox_checkpoint(100).await.expect("advance");
    assert_eq!(db.get_mailbox_checkpoint().await.expect("read"), 100);
}

#[tokio::test]
async fn vtxo_keys_map_both_ways_and_track_the_last_index() {
    let (_dir, db) = fresh_store();
    assert_eq!(db.get_last_vtxo_key_index().await.expect("read"), None);
    assert_eq!(db.get_public_key_idx(&pubkey(1)).await.expect("read"), None);

    db.store_vtxo_key(0, pubkey(1)).await.expect("store");
    assert_eq!(db.get_last_vtxo_key_index().await.expect("read"), Some(0));
    assert_eq!(
        db.get_public_key_idx(&pubkey(1)).await.expect("read"),
        Some(0)
    );

    let batch: Vec<_> = (1u32..6).map(|i| (i, pubkey(10 + i as u8))).collect();
    db.store_vtxo_keys(&batch).await.expect("batch");
    db.store_vtxo_keys(&batch)
        .await
        .expect("the same batch again is a no-op");
    assert_eq!(db.get_last_vtxo_key_index().await.expect("read"), Some(5));
    for (i, pk) in &batch {
        assert_eq!(db.get_public_key_idx(pk).await.expect("read"), Some(*i));
    }

    // A key stored again under another index moves: the old index no longer counts.
    db.store_vtxo_key(9, pubkey(1)).await.expect("move up");
    assert_eq!(db.get_last_vtxo_key_index().await.expect("read"), Some(9));
    db.store_vtxo_key(0, pubkey(1)).await.expect("move back");
    assert_eq!(db.get_last_vtxo_key_index().await.expect("read"), Some(5));
    db.verify_invariants().await.expect("invariants");
}

// --- VTXOs ---------------------------------------------------------------------------

#[tokio::test]
async fn vtxo_round_trip_keeps_full_and_bare_forms() {
    let (_dir, db) = fresh_store();
    let v = &VTXO_VECTORS.round1_vtxo;
    db.store_vtxos(&[(v, &VtxoState::Spendable)])
        .await
        .expect("store");

    let stored = db
        .get_wallet_vtxo(v.id())
        .await
        .expect("read")
        .expect("present");
    assert_eq!(stored.vtxo.id(), v.id());
    assert_eq!(stored.state, VtxoState::Spendable);
    assert_eq!(stored.exit_depth, v.exit_depth());
    let weight: bitcoin::Weight = v.transactions().map(|t| t.tx.weight()).sum();
    assert_eq!(stored.exit_tx_weight, weight);
    assert!(!stored.registered);

    let full = db
        .get_full_vtxo(v.id())
        .await
        .expect("read")
        .expect("present");
    assert_eq!(
        ark::ProtocolEncoding::serialize(&full),
        ark::ProtocolEncoding::serialize(v)
    );
    assert_eq!(db.get_full_vtxo(unknown_id()).await.expect("read"), None);

    let twice = db
        .get_wallet_vtxos(&[v.id(), v.id()])
        .await
        .expect("batch read");
    assert_eq!(
        twice,
        vec![stored.clone(), stored.clone()],
        "one result per requested id"
    );
    assert!(db.get_wallet_vtxos(&[v.id(), unknown_id()]).await.is_err());
    assert!(db.get_full_vtxos(&[unknown_id()]).await.is_err());
    assert_eq!(
        db.get_full_vtxos(&[v.id()])
            .await
            .expect("full batch")
            .len(),
        1
    );
    assert_eq!(db.get_all_vtxos().await.expect("all"), vec![stored]);
}

#[tokio::test]
async fn store_vtxos_is_idempotent_and_keeps_the_current_state() {
    let (_dir, db) = fresh_store();
    let v = &VTXO_VECTORS.board_vtxo;
    db.store_vtxos(&[(v, &VtxoState::Spendable)])
        .await
        .expect("store");
    db.update_vtxo_state_checked(v.id(), VtxoState::Spent, VtxoStateKind::UNSPENT_STATES)
        .await
        .expect("spend");
    db.store_vtxos(&[(v, &VtxoState::Spendable)])
        .await
        .expect("store again");
    assert_eq!(
        state_of(&db, v.id()).await,
        VtxoState::Spent,
        "a retry must not resurrect"
    );
    assert_eq!(db.get_all_vtxos().await.expect("all").len(), 1);
}

/// The balance kept between commits (`Store::ark_balance`) is never an old one: a
/// commit, another tip or another exit depth limit each give the balance of now.
#[tokio::test]
async fn the_kept_balance_follows_every_commit_and_the_chain_view() {
    let (_dir, db) = fresh_store();
    let pool = common::vtxos::vtxo_pool(2);
    let (a, b) = (&pool[0], &pool[1]);
    let spendable = |balance: bark::Balance| balance.spendable.to_sat();
    let before = db.ark_balance(Some(900), None).await.expect("balance");
    assert_eq!(spendable(before), 0);
    db.store_vtxos(&[(a, &VtxoState::Spendable)])
        .await
        .expect("store");
    let one = db.ark_balance(Some(900), None).await.expect("balance");
    assert_eq!(
        spendable(one.clone()),
        a.amount().to_sat(),
        "after a commit"
    );
    let again = db.ark_balance(Some(900), None).await.expect("balance");
    assert_eq!(
        (again.spendable, again.needs_refresh),
        (one.spendable, one.needs_refresh)
    );
    // Another tip: `a` (expiry 1,000) has expired and needs a refresh.
    let later = db.ark_balance(Some(1_000), None).await.expect("balance");
    assert_eq!(later.needs_refresh, a.amount(), "at tip 1,000: {later:?}");
    // Another exit depth limit: a board is at depth 0, at the limit 0.
    let deep = db.ark_balance(Some(900), Some(0)).await.expect("balance");
    assert_eq!(deep.needs_refresh, a.amount(), "at depth limit 0: {deep:?}");
    db.store_vtxos(&[(b, &VtxoState::Spendable)])
        .await
        .expect("store");
    db.update_vtxo_state_checked(a.id(), VtxoState::Spent, VtxoStateKind::UNSPENT_STATES)
        .await
        .expect("spend");
    let now = db.ark_balance(Some(900), None).await.expect("balance");
    assert_eq!(
        spendable(now),
        b.amount().to_sat(),
        "after two more commits"
    );
}

#[tokio::test]
async fn vtxos_by_state_are_ordered_across_states() {
    let (_dir, db) = fresh_store();
    let pool = common::vtxos::vtxo_pool(12);
    let states = [
        VtxoState::Spendable,
        VtxoState::Locked { holder: None },
        VtxoState::Spent,
    ];
    let pairs: Vec<_> = pool
        .iter()
        .enumerate()
        .map(|(i, v)| (v, &states[i % 3]))
        .collect();
    db.store_vtxos(&pairs).await.expect("store");

    let both = db
        .get_vtxos_by_state(&[VtxoStateKind::Spent, VtxoStateKind::Spendable])
        .await
        .expect("query");
    assert_eq!(both.len(), 8);
    assert!(
        both.iter()
            .all(|v| v.state != VtxoState::Locked { holder: None })
    );
    let key = |v: &bark::WalletVtxo| (v.vtxo.expiry_height(), std::cmp::Reverse(v.vtxo.amount()));
    assert!(
        both.is_sorted_by_key(key),
        "expiry ascending, then amount descending"
    );

    let all = db.get_all_vtxos().await.expect("all");
    assert_eq!(all.len(), 12);
    let spendable_first: Vec<_> = all.iter().map(|v| v.state.kind().as_byte()).collect();
    assert!(spendable_first.is_sorted(), "get_all_vtxos groups by state");
    assert!(db.get_vtxos_by_state(&[]).await.expect("empty").is_empty());
    assert!(
        db.get_vtxos_by_state(&[VtxoStateKind::Exited])
            .await
            .expect("none")
            .is_empty()
    );
}

#[tokio::test]
async fn checked_transitions_apply_repeat_and_refuse() {
    let (_dir, db) = fresh_store();
    let v = &VTXO_VECTORS.round2_vtxo;
    db.store_vtxos(&[(v, &VtxoState::Spendable)])
        .await
        .expect("store");

    let refused = db.update_vtxo_state_checked(v.id(), VtxoState::Spent, &[VtxoStateKind::Locked]);
    assert!(
        refused.await.is_err(),
        "spendable is not in the allowed states"
    );
    assert_eq!(
        state_of(&db, v.id()).await,
        VtxoState::Spendable,
        "refusal changes nothing"
    );

    let locked = VtxoState::Locked { holder: None };
    let out = db
        .update_vtxo_state_checked(v.id(), locked.clone(), &[VtxoStateKind::Spendable])
        .await
        .expect("lock");
    assert_eq!(out.state, locked);
    // Attaching a holder is a real change within the same kind.
    let owner = db
        .create_new_movement(MovementStatus::Pending, &subsystem(), now_ms(), None)
        .await
        .expect("owning movement");
    let held = VtxoState::Locked {
        holder: holder(owner.0),
    };
    db.update_vtxo_state_checked(v.id(), held.clone(), &[VtxoStateKind::Locked])
        .await
        .expect("holder upgrade");
    assert_eq!(state_of(&db, v.id()).await, held);
    // Repeating an applied transition is a no-op even when its kind is not allowed.
    db.update_vtxo_state_checked(v.id(), held.clone(), &[VtxoStateKind::Spendable])
        .await
        .expect("repeat is a no-op");
    assert!(
        db.update_vtxo_state_checked(unknown_id(), VtxoState::Spent, VtxoStateKind::ALL)
            .await
            .is_err()
    );
    db.verify_invariants().await.expect("invariants");
}

#[tokio::test]
async fn batch_transition_is_all_or_nothing() {
    let (_dir, db) = fresh_store();
    let (a, b) = (&VTXO_VECTORS.round1_vtxo, &VTXO_VECTORS.round2_vtxo);
    db.store_vtxos(&[(a, &VtxoState::Spendable), (b, &VtxoState::Spent)])
        .await
        .expect("store");
    let res = db
        .update_vtxo_states_checked(
            &[a.id(), b.id()],
            VtxoState::Locked { holder: None },
            &[VtxoStateKind::Spendable],
        )
        .await;
    assert!(res.is_err(), "b is spent, so the batch is refused");
    assert_eq!(
        state_of(&db, a.id()).await,
        VtxoState::Spendable,
        "a must be untouched"
    );

    db.update_vtxo_states_checked(&[a.id()], VtxoState::Spent, &[VtxoStateKind::Spendable])
        .await
        .expect("single");
    assert!(db.has_spent_vtxo(a.id()).await.expect("has_spent"));
    assert!(
        !db.has_spent_vtxo(unknown_id())
            .await
            .expect("unknown is not spent")
    );
}

#[tokio::test]
async fn steal_lock_forces_all_but_exited_atomically() {
    let (_dir, db) = fresh_store();
    let v = &*VTXO_VECTORS;
    db.store_vtxos(&[
        (&v.round1_vtxo, &VtxoState::Spendable),
        (&v.round2_vtxo, &VtxoState::Locked { holder: holder(1) }),
        (&v.arkoor_htlc_out_vtxo, &VtxoState::Spent),
        (&v.arkoor2_vtxo, &VtxoState::Exited),
    ])
    .await
    .expect("store");
    let ids = [
        v.round1_vtxo.id(),
        v.round2_vtxo.id(),
        v.arkoor_htlc_out_vtxo.id(),
        v.arkoor2_vtxo.id(),
    ];

    // An unknown id anywhere in the list fails the whole call.
    assert!(
        db.steal_lock(&[ids[0], unknown_id()], holder(9))
            .await
            .is_err()
    );
    assert_eq!(state_of(&db, ids[0]).await, VtxoState::Spendable);

    db.steal_lock(&ids, holder(42)).await.expect("steal");
    for id in &ids[..3] {
        assert_eq!(
            state_of(&db, *id).await,
            VtxoState::Locked { holder: holder(42) }
        );
    }
    assert_eq!(
        state_of(&db, ids[3]).await,
        VtxoState::Exited,
        "exited is left alone"
    );

    db.steal_lock_to_spent(&ids).await.expect("to spent");
    for id in &ids[..3] {
        assert_eq!(state_of(&db, *id).await, VtxoState::Spent);
    }
    assert_eq!(state_of(&db, ids[3]).await, VtxoState::Exited);
    assert!(db.steal_lock_to_spent(&[unknown_id()]).await.is_err());
}

#[tokio::test]
async fn release_lock_only_for_its_holder() {
    let (_dir, db) = fresh_store();
    let v = &VTXO_VECTORS.arkoor3_vtxo;
    db.store_vtxos(&[(v, &VtxoState::Locked { holder: holder(3) })])
        .await
        .expect("store");

    db.release_vtxo_lock(v.id(), holder(4).as_ref())
        .await
        .expect("other holder: no-op");
    db.release_vtxo_lock(v.id(), None)
        .await
        .expect("no holder: no-op");
    assert_eq!(
        state_of(&db, v.id()).await,
        VtxoState::Locked { holder: holder(3) }
    );
    db.release_vtxo_lock(v.id(), holder(3).as_ref())
        .await
        .expect("release");
    assert_eq!(state_of(&db, v.id()).await, VtxoState::Spendable);
    db.release_vtxo_lock(v.id(), holder(3).as_ref())
        .await
        .expect("again: no-op");
    db.release_vtxo_lock(unknown_id(), None)
        .await
        .expect("unknown: no-op");
    assert_eq!(state_of(&db, v.id()).await, VtxoState::Spendable);
}

#[tokio::test]
async fn remove_vtxo_returns_it_and_leaves_nothing_behind() {
    let (_dir, db) = fresh_store();
    let v = &VTXO_VECTORS.arkoor3_vtxo;
    db.store_vtxos(&[(v, &VtxoState::Spendable)])
        .await
        .expect("store");
    db.update_vtxo_state_checked(v.id(), VtxoState::Spent, VtxoStateKind::ALL)
        .await
        .expect("spend");

    let removed = db
        .remove_vtxo(v.id())
        .await
        .expect("remove")
        .expect("was there");
    assert_eq!(removed.id(), v.id());
    assert_eq!(db.get_wallet_vtxo(v.id()).await.expect("read"), None);
    assert_eq!(db.get_full_vtxo(v.id()).await.expect("read"), None);
    assert!(
        db.get_vtxos_by_state(VtxoStateKind::ALL)
            .await
            .expect("query")
            .is_empty()
    );
    assert_eq!(db.remove_vtxo(v.id()).await.expect("remove again"), None);
    // Storing it again starts a fresh history.
    db.store_vtxos(&[(v, &VtxoState::Spendable)])
        .await
        .expect("store again");
    db.verify_invariants().await.expect("invariants");
}

#[tokio::test]
async fn registration_flags() {
    let (_dir, db) = fresh_store();
    let v = &*VTXO_VECTORS;
    db.store_vtxos(&[
        (&v.round1_vtxo, &VtxoState::Spendable),
        (&v.round2_vtxo, &VtxoState::Spent),
        (&v.arkoor2_vtxo, &VtxoState::Exited),
    ])
    .await
    .expect("store");
    let mut unregistered = db.get_unregistered_vtxo_ids().await.expect("list");
    unregistered.sort();
    let mut expected = vec![v.round1_vtxo.id(), v.arkoor2_vtxo.id()];
    expected.sort();
    assert_eq!(
        unregistered, expected,
        "spent ones carry nothing to recover"
    );

    db.mark_vtxos_registered(&[v.round1_vtxo.id()])
        .await
        .expect("mark");
    assert!(
        db.get_wallet_vtxo(v.round1_vtxo.id())
            .await
            .expect("r")
            .expect("p")
            .registered
    );
    assert_eq!(
        db.get_unregistered_vtxo_ids().await.expect("list"),
        vec![v.arkoor2_vtxo.id()]
    );
    assert!(db.mark_vtxos_registered(&[unknown_id()]).await.is_err());
}

// --- movements -----------------------------------------------------------------------

#[tokio::test]
async fn movements_create_update_list() {
    let (_dir, db) = fresh_store();
    let t0 = now_ms();
    let t1 = t0 + chrono::Duration::seconds(1);
    let a = db
        .create_new_movement(MovementStatus::Pending, &subsystem(), t0, None)
        .await
        .expect("a");
    let b = db
        .create_new_movement(MovementStatus::Failed, &subsystem(), t1, None)
        .await
        .expect("b");
    let c = db
        .create_new_movement(MovementStatus::Pending, &subsystem(), t1, None)
        .await
        .expect("c");
    assert!(a.0 < b.0 && b.0 < c.0, "ids strictly increase");
    assert_eq!(
        db.get_movement_by_id(a).await.expect("read"),
        Movement::new(a, MovementStatus::Pending, &subsystem(), t0)
    );
    let order: Vec<_> = db
        .get_all_movements()
        .await
        .expect("all")
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(order, vec![c, b, a], "newest first, ties by id descending");

    let mut m = db.get_movement_by_id(a).await.expect("read");
    m.status = MovementStatus::Successful;
    m.intended_balance = SignedAmount::from_sat(1_000);
    db.update_movement(&m).await.expect("update");
    assert_eq!(db.get_movement_by_id(a).await.expect("read"), m);

    let mut ghost = m.clone();
    ghost.id = MovementId::new(999);
    assert!(
        db.update_movement(&ghost).await.is_err(),
        "unknown movement"
    );
    assert!(db.get_movement_by_id(MovementId::new(999)).await.is_err());
}

#[tokio::test]
async fn pending_movements_are_listed_by_subsystem() {
    let (_dir, db) = fresh_store();
    let round = bark::movement::MovementSubsystem {
        name: "bark.round".into(),
        kind: "refresh".into(),
    };
    let test = subsystem();
    let created =
        |subsystem| db.create_new_movement(MovementStatus::Pending, subsystem, now_ms(), None);
    let a = created(&round).await.expect("a");
    let other = created(&test).await.expect("other");
    let finished = created(&round).await.expect("finished");
    let with_inputs = created(&round).await.expect("with inputs");

    let mut m = db.get_movement_by_id(finished).await.expect("read");
    m.status = MovementStatus::Failed;
    db.update_movement(&m).await.expect("fail it");
    // As bark's refresh writes it right after creating it: its inputs and amounts.
    let mut m = db.get_movement_by_id(with_inputs).await.expect("read");
    m.input_vtxos.push(unknown_id());
    m.effective_balance = SignedAmount::from_sat(-10);
    db.update_movement(&m).await.expect("update");

    let pending = db.pending_movements(&["bark.round"]).await.expect("list");
    assert_eq!(
        pending,
        vec![
            db.get_movement_by_id(a).await.expect("read"),
            db.get_movement_by_id(with_inputs).await.expect("read"),
        ],
        "pending ones of that subsystem, whole, oldest first"
    );
    let pending = db.pending_movements(&[&test.name]).await.expect("list");
    assert_eq!(
        pending.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![other]
    );
    assert!(
        db.pending_movements(&["bark.board"])
            .await
            .expect("list")
            .is_empty()
    );
    // Several subsystems in one scan: all of theirs, still oldest first.
    let pending = db
        .pending_movements(&["bark.round", &test.name, "bark.board"])
        .await
        .expect("list");
    assert_eq!(
        pending.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![a, other, with_inputs]
    );
}

#[tokio::test]
async fn spendable_vtxos_no_movement_produced_are_found_through_the_whole_history() {
    let (_dir, db) = fresh_store();
    let v = &*VTXO_VECTORS;
    db.store_vtxos(&[
        (&v.board_vtxo, &VtxoState::Spendable),
        (&v.round1_vtxo, &VtxoState::Spendable),
        (&v.arkoor2_vtxo, &VtxoState::Spent),
    ])
    .await
    .expect("store");
    let mut spendable = vec![v.board_vtxo.id(), v.round1_vtxo.id()];
    spendable.sort();
    let found = db
        .spendable_vtxos_no_movement_produced()
        .await
        .expect("list");
    assert_eq!(found, spendable, "no movement yet: every spendable one");

    // An old movement produced one (and consumed another: consuming is not producing),
    // and many newer ones produced neither: the read goes down to the old one.
    let produce = |output: Option<VtxoId>, input: Option<VtxoId>| {
        let db = &db;
        async move {
            let id = db
                .create_new_movement(MovementStatus::Pending, &subsystem(), now_ms(), None)
                .await
                .expect("create");
            let mut m = db.get_movement_by_id(id).await.expect("read");
            m.output_vtxos.extend(output);
            m.input_vtxos.extend(input);
            db.update_movement(&m).await.expect("update");
        }
    };
    produce(Some(v.board_vtxo.id()), Some(v.round1_vtxo.id())).await;
    for _ in 0..50 {
        produce(None, None).await;
    }
    let found = db
        .spendable_vtxos_no_movement_produced()
        .await
        .expect("list");
    assert_eq!(found, vec![v.round1_vtxo.id()]);
    // The newest movement produces the other: none left.
    produce(Some(v.round1_vtxo.id()), None).await;
    let found = db
        .spendable_vtxos_no_movement_produced()
        .await
        .expect("list");
    assert!(found.is_empty(), "{found:?}");
}

#[tokio::test]
async fn movements_by_payment_method_follow_destinations() {
    let (_dir, db) = fresh_store();
    let script = PaymentMethod::OutputScript(ScriptBuf::new_p2a());
    let custom = PaymentMethod::Custom("coffee".into());
    let a = db
        .create_new_movement(MovementStatus::Pending, &subsystem(), now_ms(), None)
        .await
        .expect("a");
    let b = db
        .create_new_movement(MovementStatus::Pending, &subsystem(), now_ms(), None)
        .await
        .expect("b");

    let mut ma = db.get_movement_by_id(a).await.expect("read");
    ma.received_on = vec![MovementDestination::new(script.clone(), Amount::ONE_BTC)];
    ma.sent_to = vec![MovementDestination::new(
        script.clone(),
        Amount::from_sat(5),
    )];
    db.update_movement(&ma).await.expect("update a");
    let mut mb = db.get_movement_by_id(b).await.expect("read");
    mb.sent_to = vec![MovementDestination::new(
        script.clone(),
        Amount::from_sat(1),
    )];
    mb.received_on = vec![MovementDestination::new(
        custom.clone(),
        Amount::from_sat(2),
    )];
    db.update_movement(&mb).await.expect("update b");

    let ids = |ms: Vec<Movement>| ms.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(
        ids(db
            .get_movements_by_payment_method(&script)
            .await
            .expect("q")),
        vec![a, b]
    );
    assert_eq!(
        ids(db
            .get_movements_by_payment_method(&custom)
            .await
            .expect("q")),
        vec![b]
    );

    // Replacing b's destinations drops it from the script's index.
    mb.sent_to = vec![];
    db.update_movement(&mb).await.expect("replace");
    assert_eq!(
        ids(db
            .get_movements_by_payment_method(&script)
            .await
            .expect("q")),
        vec![a]
    );
    let none = PaymentMethod::Custom("nothing".into());
    assert!(
        db.get_movements_by_payment_method(&none)
            .await
            .expect("q")
            .is_empty()
    );
    db.verify_invariants().await.expect("invariants");
}

#[tokio::test]
async fn movement_per_action_is_created_once() {
    let (_dir, db) = fresh_store();
    let balance = SignedAmount::from_sat(4_200);
    let (id, created) = db
        .get_or_create_movement_for_action(
            &subsystem(),
            now_ms(),
            "board.abc",
            MovementUpdate::new().intended_balance(balance),
        )
        .await
        .expect("create");
    assert!(created);
    assert_eq!(
        db.get_movement_by_id(id)
            .await
            .expect("read")
            .intended_balance,
        balance
    );

    let (again, created) = db
        .get_or_create_movement_for_action(
            &subsystem(),
            now_ms(),
            "board.abc",
            MovementUpdate::new().intended_balance(SignedAmount::from_sat(1)),
        )
        .await
        .expect("reuse");
    assert_eq!((again, created), (id, false));
    assert_eq!(
        db.get_movement_by_id(id)
            .await
            .expect("read")
            .intended_balance,
        balance
    );
    assert_eq!(
        db.get_movement_id_by_action("board.abc").await.expect("q"),
        Some(id)
    );
    assert_eq!(db.get_movement_id_by_action("nope").await.expect("q"), None);

    let other = db
        .create_new_movement(
            MovementStatus::Pending,
            &subsystem(),
            now_ms(),
            Some("send.x"),
        )
        .await
        .expect("with action");
    assert_eq!(
        db.get_movement_id_by_action("send.x").await.expect("q"),
        Some(other)
    );
}

// --- round states --------------------------------------------------------------------

#[tokio::test]
async fn round_states_store_update_remove() {
    let (_dir, db) = fresh_store();
    let first = db
        .store_round_state(&round_state(false))
        .await
        .expect("store");
    let second = db
        .store_round_state(&round_state(false))
        .await
        .expect("store");
    assert!(first.0 < second.0);
    assert_eq!(
        db.get_pending_round_state_ids().await.expect("ids"),
        vec![first, second]
    );

    let stored = db
        .get_round_state_by_id(first)
        .await
        .expect("read")
        .expect("present");
    assert_eq!(round_json(stored.state()), round_json(&round_state(false)));

    let mut locked = stored.lock(Box::new(TestGuard));
    *locked.state_mut() = round_state(true);
    db.update_round_state(&locked).await.expect("update");
    let read = db
        .get_round_state_by_id(first)
        .await
        .expect("read")
        .expect("present");
    assert_eq!(round_json(read.state()), round_json(&round_state(true)));

    db.remove_round_state(&locked).await.expect("remove");
    assert!(
        db.get_round_state_by_id(first)
            .await
            .expect("read")
            .is_none()
    );
    assert_eq!(
        db.get_pending_round_state_ids().await.expect("ids"),
        vec![second]
    );
    assert!(
        db.update_round_state(&locked).await.is_err(),
        "a removed state is not recreated"
    );
    // Ids are not reused after a removal.
    let third = db
        .store_round_state(&round_state(false))
        .await
        .expect("store");
    assert!(third.0 > second.0);
}

// --- wallet actions and Lightning ----------------------------------------------------

#[tokio::test]
async fn action_checkpoints_upsert_list_remove() {
    let (_dir, db) = fresh_store();
    let vid = VTXO_VECTORS.board_vtxo.id();
    let (a, b) = (
        board_checkpoint("b.a", vid, None),
        board_checkpoint("b.b", vid, None),
    );
    // Store b first: listings are oldest first, not by id.
    db.upsert_wallet_action_checkpoint(&b.id(), &b)
        .await
        .expect("b");
    db.upsert_wallet_action_checkpoint(&a.id(), &a)
        .await
        .expect("a");
    let b2 = board_checkpoint("b.b", vid, Some("waiting"));
    db.upsert_wallet_action_checkpoint(&b2.id(), &b2)
        .await
        .expect("replace b");

    assert_eq!(
        db.get_wallet_action_checkpoint(&b.id()).await.expect("get"),
        Some(b2.clone())
    );
    assert_eq!(
        db.get_all_wallet_action_checkpoints().await.expect("all"),
        vec![b2, a.clone()]
    );
    assert_eq!(
        db.get_wallet_action_checkpoint(&"none".into())
            .await
            .expect("get"),
        None
    );

    db.remove_wallet_action_checkpoint(&b.id())
        .await
        .expect("remove");
    db.remove_wallet_action_checkpoint(&b.id())
        .await
        .expect("remove missing is a no-op");
    assert_eq!(
        db.get_all_wallet_action_checkpoints().await.expect("all"),
        vec![a]
    );
}

#[tokio::test]
async fn paid_invoices_and_settled_receives_are_write_once() {
    let (_dir, db) = fresh_store();
    db.record_paid_invoice(payment_hash(1), preimage(2))
        .await
        .expect("record");
    let first = db
        .get_paid_invoice(payment_hash(1))
        .await
        .expect("get")
        .expect("present");
    db.record_paid_invoice(payment_hash(1), preimage(3))
        .await
        .expect("again is a no-op");
    assert_eq!(
        db.get_paid_invoice(payment_hash(1)).await.expect("get"),
        Some(first.clone())
    );
    assert_eq!(first.preimage, preimage(2));
    assert_eq!(
        db.get_paid_invoice(payment_hash(9)).await.expect("get"),
        None
    );

    let invoice = &*INVOICE;
    db.record_settled_lightning_receive(
        payment_hash(4),
        preimage(5),
        invoice,
        Amount::from_sat(21),
    )
    .await
    .expect("record");
    db.record_settled_lightning_receive(payment_hash(4), preimage(5), invoice, Amount::from_sat(1))
        .await
        .expect("again is a no-op");
    let got = db
        .get_settled_lightning_receive(payment_hash(4))
        .await
        .expect("get")
        .expect("p");
    assert_eq!(
        (got.amount, &got.invoice, got.preimage),
        (Amount::from_sat(21), invoice, preimage(5))
    );
    assert_eq!(
        db.get_settled_lightning_receive(payment_hash(9))
            .await
            .expect("get"),
        None
    );
}

// --- exits ---------------------------------------------------------------------------

fn txid(n: u8) -> Txid {
    Txid::from_slice(&[n; 32]).expect("32 bytes")
}

fn exit(id: u8, state: ExitState) -> StoredExit {
    StoredExit {
        vtxo_id: VtxoId::from_slice(&[id; 36]).expect("36 bytes"),
        state,
        history: vec![ExitState::Start(ExitStartState {
            tip_height: BlockHeight::new(100),
        })],
        movement_id: Some(MovementId::new(3)),
    }
}

#[tokio::test]
async fn exit_entries_round_trip_every_status() {
    let (_dir, db) = fresh_store();
    let block = BlockRef {
        height: BlockHeight::new(120),
        hash: BlockHash::from_slice(&[3; 32]).expect("32"),
    };
    let processing = ExitState::Processing(ExitProcessingState {
        tip_height: BlockHeight::new(130),
        transactions: vec![
            ExitTx {
                txid: txid(1),
                status: ExitTxStatus::VerifyInputs,
            },
            ExitTx {
                txid: txid(2),
                status: ExitTxStatus::AwaitingInputConfirmation {
                    txids: [txid(3)].into_iter().collect(),
                },
            },
            ExitTx {
                txid: txid(4),
                status: ExitTxStatus::AwaitingCpfpBroadcast,
            },
            ExitTx {
                txid: txid(5),
                status: ExitTxStatus::AwaitingConfirmation {
                    child_txid: txid(6),
                    origin: ExitTxOrigin::Wallet { confirmed_in: None },
                },
            },
            ExitTx {
                txid: txid(7),
                status: ExitTxStatus::Confirmed {
                    child_txid: txid(8),
                    block,
                    origin: ExitTxOrigin::Block {
                        confirmed_in: block,
                    },
                },
            },
        ],
    });
    let a = exit(0xaa, processing);
    let b = exit(0xbb, ExitState::new_canceled(BlockHeight::new(150)));
    db.store_exit_vtxo_entry(&b).await.expect("b");
    db.store_exit_vtxo_entry(&a).await.expect("a");
    assert_eq!(
        db.get_exit_vtxo_entries().await.expect("all"),
        vec![exit(0xaa, a.state.clone()), exit(0xbb, b.state.clone())]
    );
    assert_eq!(
        db.get_exit_vtxo_entry(&a.vtxo_id).await.expect("one"),
        Some(exit(0xaa, a.state.clone()))
    );

    let only = |kinds: &'static [ExitStateKind]| {
        let db = db.clone();
        async move {
            db.get_exit_vtxo_entries_with_states(kinds)
                .await
                .expect("q")
                .into_iter()
                .map(|e| e.vtxo_id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(only(&[ExitStateKind::Canceled]).await, vec![b.vtxo_id]);
    assert_eq!(
        only(&[ExitStateKind::Processing, ExitStateKind::Canceled]).await,
        vec![a.vtxo_id, b.vtxo_id]
    );
    assert!(only(&[ExitStateKind::Claimed]).await.is_empty());
    assert!(only(&[]).await.is_empty());

    db.remove_exit_vtxo_entry(&a.vtxo_id).await.expect("remove");
    assert_eq!(db.get_exit_vtxo_entry(&a.vtxo_id).await.expect("one"), None);
    assert_eq!(db.get_exit_vtxo_entries().await.expect("all").len(), 1);
}

#[tokio::test]
async fn exit_child_txs_upsert() {
    let (_dir, db) = fresh_store();
    let tx = Transaction {
        version: bitcoin::transaction::Version::TWO,
        lock_time: bitcoin::absolute::LockTime::ZERO,
        input: vec![],
        output: vec![],
    };
    assert_eq!(db.get_exit_child_tx(txid(1)).await.expect("get"), None);
    db.store_exit_child_tx(txid(1), &tx, ExitTxOrigin::Mempool)
        .await
        .expect("store");
    assert_eq!(
        db.get_exit_child_tx(txid(1)).await.expect("get"),
        Some((tx.clone(), ExitTxOrigin::Mempool))
    );
    let replaced = Transaction {
        lock_time: bitcoin::absolute::LockTime::from_consensus(7),
        ..tx
    };
    let origin = ExitTxOrigin::Wallet { confirmed_in: None };
    db.store_exit_child_tx(txid(1), &replaced, origin)
        .await
        .expect("replace");
    assert_eq!(
        db.get_exit_child_tx(txid(1)).await.expect("get"),
        Some((replaced, origin))
    );
}

// --- the file ------------------------------------------------------------------------

#[tokio::test]
async fn state_survives_reopen_and_a_second_open_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("wallet.redb");
    let v = &VTXO_VECTORS.round1_vtxo;
    {
        let (db, report) = Store::open_async(&path, &StoreConfig::default())
            .await
            .expect("open");
        assert_eq!(
            (report.schema_found, report.schema_now, report.integrity_ok),
            (0, SCHEMA_VERSION, true)
        );
        match Store::open(&path, &StoreConfig::default()) {
            Err(StoreError::AlreadyOpen { .. }) => {}
            other => panic!(
                "second open must be refused, got {:?}",
                other.map(|(_, r)| r)
            ),
        }
        db.init_wallet(&properties()).await.expect("init");
        db.store_vtxos(&[(v, &VtxoState::Locked { holder: None })])
            .await
            .expect("store");
        db.create_new_movement(MovementStatus::Pending, &subsystem(), now_ms(), None)
            .await
            .expect("m");
    }
    let (db, report) = Store::open_async(&path, &StoreConfig::default())
        .await
        .expect("reopen");
    assert_eq!(
        (report.schema_found, report.schema_now),
        (SCHEMA_VERSION, SCHEMA_VERSION)
    );
    assert_eq!(
        db.read_properties().await.expect("read"),
        Some(properties())
    );
    assert_eq!(
        state_of(&db, v.id()).await,
        VtxoState::Locked { holder: None }
    );
    let next = db
        .create_new_movement(MovementStatus::Pending, &subsystem(), now_ms(), None)
        .await
        .expect("m");
    assert_eq!(
        next,
        MovementId::new(2),
        "the id counter survives a restart"
    );
    let report = db.verify_invariants().await.expect("invariants");
    assert_eq!((report.vtxos, report.movements), (1, 2));
}

/// Not a check: `scripts/measure-store-fsyncs` runs this under strace with different
/// `BERTH_MEASURE_WRITES` to count the fsyncs one durable write costs.
#[tokio::test]
#[ignore = "tool: scripts/measure-store-fsyncs runs it"]
async fn tool_measure_write_loop() {
    let writes: u64 = std::env::var("BERTH_MEASURE_WRITES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let (_dir, db) = fresh_store();
    for n in 0..writes {
        db.store_mailbox_checkpoint(n + 1).await.expect("write");
    }
}
