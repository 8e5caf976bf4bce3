//! Movements (the wallet's history): ids from `META`, the payment-method index kept in
//! line with each movement's destinations, the action index, and the history pages the
//! API reads.

use std::collections::{BTreeSet, HashSet};

use ark::VtxoId;

use bark::movement::update::MovementUpdate;
use bark::movement::{Movement, MovementId, MovementStatus, MovementSubsystem, PaymentMethod};
use bitcoin::hashes::{Hash, sha256};
use chrono::{DateTime, Local};
use redb::{ReadableTable, WriteTransaction};

use super::tables::{all_decoded, next_u32_id};
use crate::store::Store;
use crate::store::codec::{Envelope, Stored};
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::schema::*;

/// SHA-256 of a payment method's canonical bytes: type, a 0xfe separator (not valid
/// UTF-8, so no type/value pair can collide), value.
fn payment_method_hash(pm: &PaymentMethod) -> [u8; 32] {
    let mut engine = sha256::Hash::engine();
    bitcoin::hashes::HashEngine::input(&mut engine, pm.type_str().as_bytes());
    bitcoin::hashes::HashEngine::input(&mut engine, &[0xfe]);
    bitcoin::hashes::HashEngine::input(&mut engine, pm.value_string().as_bytes());
    sha256::Hash::from_engine(engine).to_byte_array()
}

fn payment_method_index_key(hash: &[u8; 32], id: u32) -> PaymentMethodIndexKey {
    let mut key = [0u8; 36];
    key[..32].copy_from_slice(hash);
    key[32..].copy_from_slice(&id.to_be_bytes());
    key
}

/// The payment-method index entries a movement should have: one per distinct payment
/// method it sent to or received on.
pub(crate) fn payment_method_index_keys(m: &Movement) -> BTreeSet<PaymentMethodIndexKey> {
    m.sent_to
        .iter()
        .chain(m.received_on.iter())
        .map(|d| payment_method_index_key(&payment_method_hash(&d.destination), m.id.0))
        .collect()
}

/// Write a movement and bring its payment-method index in line with its destinations.
fn put_movement(
    tx: &WriteTransaction,
    movement: &Movement,
    ctx: &'static str,
) -> Result<(), StoreError> {
    let mut movements = tx.open_table(MOVEMENTS).ctx(ctx)?;
    let mut index = tx.open_table(MOVEMENTS_BY_PAYMENT_METHOD).ctx(ctx)?;
    let old = match movements.get(movement.id.0).ctx(ctx)? {
        Some(v) => payment_method_index_keys(&v.value().decode()?),
        None => BTreeSet::new(),
    };
    let new = payment_method_index_keys(movement);
    for stale in old.difference(&new) {
        index.remove(stale).ctx(ctx)?;
    }
    for added in new.difference(&old) {
        index.insert(added, ()).ctx(ctx)?;
    }
    movements
        .insert(movement.id.0, Envelope::encode(movement)?)
        .ctx(ctx)?;
    Ok(())
}

fn read_movement(
    table: &impl ReadableTable<u32, Stored<crate::store::codec::MovementRecord>>,
    id: u32,
    ctx: &'static str,
) -> Result<Option<Movement>, StoreError> {
    table
        .get(id)
        .ctx(ctx)?
        .map(|v| v.value().decode())
        .transpose()
}

/// `BarkPersister::create_new_movement`.
pub(super) async fn create(
    store: &Store,
    status: MovementStatus,
    subsystem: &MovementSubsystem,
    time: DateTime<Local>,
    action_id: Option<&str>,
) -> anyhow::Result<MovementId> {
    const CTX: &str = "creating a movement";
    let subsystem = subsystem.clone();
    let action_id = action_id.map(str::to_owned);
    Ok(store
        .write(CTX, move |tx| {
            let id = MovementId(next_u32_id(tx, meta_keys::LAST_MOVEMENT_ID, CTX)?);
            put_movement(tx, &Movement::new(id, status, &subsystem, time), CTX)?;
            if let Some(action_id) = action_id {
                let mut by_action = tx.open_table(MOVEMENTS_BY_ACTION).ctx(CTX)?;
                by_action.insert(action_id.as_str(), id.0).ctx(CTX)?;
            }
            Ok(id)
        })
        .await?)
}

/// `BarkPersister::get_or_create_movement_for_action`.
pub(super) async fn get_or_create_for_action(
    store: &Store,
    subsystem: &MovementSubsystem,
    time: DateTime<Local>,
    action_id: &str,
    update: MovementUpdate,
) -> anyhow::Result<(MovementId, bool)> {
    const CTX: &str = "creating the movement of a wallet action";
    let subsystem = subsystem.clone();
    let action_id = action_id.to_owned();
    Ok(store
        .write(CTX, move |tx| {
            let mut by_action = tx.open_table(MOVEMENTS_BY_ACTION).ctx(CTX)?;
            if let Some(existing) = by_action.get(action_id.as_str()).ctx(CTX)? {
                return Ok((MovementId(existing.value()), false));
            }
            let id = MovementId(next_u32_id(tx, meta_keys::LAST_MOVEMENT_ID, CTX)?);
            let mut movement = Movement::new(id, MovementStatus::Pending, &subsystem, time);
            update.apply_to(&mut movement, time);
            put_movement(tx, &movement, CTX)?;
            by_action.insert(action_id.as_str(), id.0).ctx(CTX)?;
            Ok((id, true))
        })
        .await?)
}

/// `BarkPersister::get_movement_id_by_action`.
pub(super) async fn id_by_action(
    store: &Store,
    action_id: &str,
) -> anyhow::Result<Option<MovementId>> {
    const CTX: &str = "looking up the movement of an action";
    let action_id = action_id.to_owned();
    Ok(store
        .read(CTX, move |tx| {
            let by_action = tx.open_table(MOVEMENTS_BY_ACTION).ctx(CTX)?;
            Ok(by_action
                .get(action_id.as_str())
                .ctx(CTX)?
                .map(|v| MovementId(v.value())))
        })
        .await?)
}

/// `BarkPersister::update_movement`.
pub(super) async fn update(store: &Store, movement: &Movement) -> anyhow::Result<()> {
    const CTX: &str = "updating a movement";
    let movement = movement.clone();
    store
        .write(CTX, move |tx| {
            // Only movements handed out by create may be updated: an unknown id would
            // otherwise appear beyond the id counter.
            let exists = tx
                .open_table(MOVEMENTS)
                .ctx(CTX)?
                .get(movement.id.0)
                .ctx(CTX)?
                .is_some();
            if !exists {
                return Err(StoreError::NotFound(format!("movement {}", movement.id)));
            }
            put_movement(tx, &movement, CTX)
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_movement_by_id`.
pub(super) async fn by_id(store: &Store, movement_id: MovementId) -> anyhow::Result<Movement> {
    const CTX: &str = "reading a movement";
    Ok(store
        .read(CTX, move |tx| {
            let table = tx.open_table(MOVEMENTS).ctx(CTX)?;
            read_movement(&table, movement_id.0, CTX)?
                .ok_or_else(|| StoreError::NotFound(format!("movement {movement_id}")))
        })
        .await?)
}

/// `BarkPersister::get_all_movements`.
///
/// Newest first (created_at descending, then id descending).
pub(super) async fn all(store: &Store) -> anyhow::Result<Vec<Movement>> {
    const CTX: &str = "listing movements";
    let mut all = store
        .read(CTX, |tx| {
            all_decoded(&tx.open_table(MOVEMENTS).ctx(CTX)?, CTX)
        })
        .await?;
    all.sort_by(|a, b| {
        b.time
            .created_at
            .cmp(&a.time.created_at)
            .then(b.id.cmp(&a.id))
    });
    Ok(all)
}

/// `BarkPersister::get_movements_by_payment_method`.
///
/// Oldest movement id first.
pub(super) async fn by_payment_method(
    store: &Store,
    payment_method: &PaymentMethod,
) -> anyhow::Result<Vec<Movement>> {
    const CTX: &str = "listing movements by payment method";
    let hash = payment_method_hash(payment_method);
    Ok(store
        .read(CTX, move |tx| {
            let index = tx.open_table(MOVEMENTS_BY_PAYMENT_METHOD).ctx(CTX)?;
            let movements = tx.open_table(MOVEMENTS).ctx(CTX)?;
            let range =
                payment_method_index_key(&hash, 0)..=payment_method_index_key(&hash, u32::MAX);
            let mut out = Vec::new();
            for entry in index.range(range).ctx(CTX)? {
                let key = entry.ctx(CTX)?.0.value();
                let id = u32::from_be_bytes([key[32], key[33], key[34], key[35]]);
                let movement = read_movement(&movements, id, CTX)?.ok_or_else(|| {
                    StoreError::Invariant(format!(
                        "payment method index names missing movement {id}"
                    ))
                })?;
                out.push(movement);
            }
            Ok(out)
        })
        .await?)
}

impl Store {
    /// Up to `limit` movements with ids below `before` (all when `None`), newest id
    /// first: a page of the history that reads only what it returns.
    pub async fn movements_before(
        &self,
        before: Option<u32>,
        limit: usize,
    ) -> Result<Vec<Movement>, StoreError> {
        const CTX: &str = "listing a page of movements";
        self.read(CTX, move |tx| {
            let table = tx.open_table(MOVEMENTS).ctx(CTX)?;
            let range = match before {
                Some(before) => table.range(..before).ctx(CTX)?,
                None => table.range::<u32>(..).ctx(CTX)?,
            };
            let mut out = Vec::with_capacity(limit.min(1024));
            for entry in range.rev().take(limit) {
                out.push(entry.ctx(CTX)?.1.value().decode()?);
            }
            Ok(out)
        })
        .await
    }

    /// Every pending movement of these `subsystems` (their names, e.g. `bark.round`),
    /// oldest id first, read in one transaction. Only those are fully decoded: the rest
    /// of the history is scanned by status and subsystem alone ([`MovementHead`]), so
    /// the checks at wallet load stay cheap on a long history, and share one scan.
    ///
    /// [`MovementHead`]: crate::store::codec::MovementHead
    pub async fn pending_movements(
        &self,
        subsystems: &[&str],
    ) -> Result<Vec<Movement>, StoreError> {
        const CTX: &str = "listing pending movements";
        let subsystems: Vec<String> = subsystems.iter().map(|s| (*s).to_owned()).collect();
        self.read(CTX, move |tx| {
            let table = tx.open_table(MOVEMENTS).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in table.iter().ctx(CTX)? {
                let (_, value) = entry.ctx(CTX)?;
                let stored = value.value();
                let head = stored.decode_head()?;
                if head.status == MovementStatus::Pending
                    && subsystems.contains(&head.subsystem.name)
                {
                    out.push(stored.decode()?);
                }
            }
            Ok(out)
        })
        .await
    }

    /// The wallet's spendable VTXOs that no movement lists among those it produced,
    /// read in one transaction: the spendable ones from the state index, then the
    /// history newest first, each movement's produced VTXOs alone
    /// ([`MovementOutputs`]), until every one is accounted for. A spendable VTXO is
    /// young (VTXOs expire within weeks and are refreshed before), so its movement is
    /// near the top: the whole history is read only while one has no movement at all.
    ///
    /// bark stores the VTXOs of an incoming arkoor payment before it records the
    /// payment's movement, so a kill or a power cut in between leaves VTXOs like these;
    /// seed recovery restores VTXOs with no movement too. The engine looks for them at
    /// every wallet load (`engine::arkoor_receives`).
    ///
    /// [`MovementOutputs`]: crate::store::codec::MovementOutputs
    pub async fn spendable_vtxos_no_movement_produced(&self) -> Result<Vec<VtxoId>, StoreError> {
        const CTX: &str = "listing the spendable vtxos no movement produced";
        self.read(CTX, move |tx| {
            let index = tx.open_table(VTXOS_BY_STATE).ctx(CTX)?;
            let spendable = bark::vtxo::VtxoStateKind::Spendable.as_byte();
            let mut lo = [0u8; 49];
            lo[0] = spendable;
            let mut hi = [0xffu8; 49];
            hi[0] = spendable;
            let mut left = HashSet::new();
            for entry in index.range(lo..=hi).ctx(CTX)? {
                let key = entry.ctx(CTX)?.0.value();
                left.insert(VtxoId::from_slice(&key[13..]).map_err(|e| {
                    StoreError::Invariant(format!("the state index holds no vtxo id: {e}"))
                })?);
            }
            let movements = tx.open_table(MOVEMENTS).ctx(CTX)?;
            let mut newest_first = movements.iter().ctx(CTX)?.rev();
            while !left.is_empty() {
                let Some(entry) = newest_first.next() else {
                    break;
                };
                let (_, value) = entry.ctx(CTX)?;
                for produced in value.value().decode_outputs()?.output_vtxos {
                    left.remove(&produced);
                }
            }
            let mut out: Vec<VtxoId> = left.into_iter().collect();
            out.sort_unstable();
            Ok(out)
        })
        .await
    }

    /// The wallet actions whose movement is newer than `after`, with it (by movement
    /// id): what a call that started when `after` was the newest movement created. One
    /// read of the action index, which holds one entry per action that made a movement.
    pub async fn actions_with_movements_after(
        &self,
        after: u32,
    ) -> Result<Vec<(String, MovementId)>, StoreError> {
        const CTX: &str = "listing the newest actions' movements";
        self.read(CTX, move |tx| {
            let by_action = tx.open_table(MOVEMENTS_BY_ACTION).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in by_action.iter().ctx(CTX)? {
                let (action, movement) = entry.ctx(CTX)?;
                if movement.value() > after {
                    out.push((action.value().to_owned(), MovementId(movement.value())));
                }
            }
            out.sort_unstable_by_key(|(_, m)| m.0);
            Ok(out)
        })
        .await
    }

    /// The newest movement id handed out (0: none yet).
    pub async fn last_movement_id(&self) -> Result<u32, StoreError> {
        const CTX: &str = "reading the movement counter";
        self.read(CTX, |tx| {
            let meta = tx.open_table(META).ctx(CTX)?;
            let last = meta
                .get(meta_keys::LAST_MOVEMENT_ID)
                .ctx(CTX)?
                .map(|v| v.value())
                .unwrap_or(0);
            Ok(u32::try_from(last).unwrap_or(u32::MAX))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bark::movement::MovementDestination;
    use bitcoin::Amount;
    use bitcoin::secp256k1::{Secp256k1, SecretKey};
    use lightning_invoice::{Currency, InvoiceBuilder, PaymentSecret};

    use super::*;
    use crate::store::StoreConfig;

    fn subsystem(name: &str, kind: &str) -> MovementSubsystem {
        MovementSubsystem {
            name: name.into(),
            kind: kind.into(),
        }
    }

    /// What an offboard call that started when `after` was the newest movement made:
    /// the actions with a newer movement, and only those.
    #[tokio::test]
    async fn the_actions_whose_movements_came_after_a_point() {
        use bark::persist::BarkPersister as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) =
            Store::open(&dir.path().join("w.redb"), &StoreConfig::default()).expect("open");
        let offboard = subsystem("bark.offboard", "send_onchain");
        let now = Local::now();
        let early = store
            .create_new_movement(MovementStatus::Pending, &offboard, now, Some("early"))
            .await
            .expect("create");
        let after = store.last_movement_id().await.expect("counter");
        assert_eq!(after, early.0);
        store
            .create_new_movement(MovementStatus::Pending, &offboard, now, None)
            .await
            .expect("one with no action");
        let (late, created) = store
            .get_or_create_movement_for_action(&offboard, now, "late", MovementUpdate::new())
            .await
            .expect("create");
        assert!(created);
        assert_eq!(
            store
                .actions_with_movements_after(after)
                .await
                .expect("list"),
            vec![("late".to_owned(), late)]
        );
        assert!(
            store
                .actions_with_movements_after(late.0)
                .await
                .expect("list")
                .is_empty()
        );
    }

    /// A wallet with a long history, written in one transaction (one write per
    /// movement, as bark makes them, would cost 20,000 fsyncs): every fifth movement
    /// paid a BOLT11 invoice, the rest received on a custom method; three refreshes
    /// are still pending among them. Only those three come back, and the scan's time
    /// against a full decode of the history is printed (`--nocapture`), not asserted.
    #[tokio::test]
    async fn pending_movements_of_a_subsystem_in_a_long_history() {
        const MOVEMENTS: u32 = 10_000;
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) =
            Store::open(&dir.path().join("w.redb"), &StoreConfig::default()).expect("open");
        let secp = Secp256k1::new();
        let key = SecretKey::from_slice(&[0x42; 32]).expect("valid secret key");
        let invoice = InvoiceBuilder::new(Currency::Regtest)
            .description("berth test".into())
            .payment_hash(sha256::Hash::hash(&[7u8; 32]))
            .payment_secret(PaymentSecret([9u8; 32]))
            .duration_since_epoch(std::time::Duration::from_secs(1_700_000_000))
            .min_final_cltv_expiry_delta(144)
            .amount_milli_satoshis(21_000)
            .build_signed(|hash| secp.sign_ecdsa_recoverable(hash, &key))
            .expect("invoice builds");
        let pending_refreshes = [17u32, 5_000, 9_999];
        let now = chrono::Local::now();
        store
            .write("filling a long history", move |tx| {
                for _ in 0..MOVEMENTS {
                    let id = next_u32_id(tx, meta_keys::LAST_MOVEMENT_ID, "filling")?;
                    let m = if pending_refreshes.contains(&id) {
                        Movement::new(
                            MovementId(id),
                            MovementStatus::Pending,
                            &subsystem("bark.round", "refresh"),
                            now,
                        )
                    } else if id % 5 == 0 {
                        let mut m = Movement::new(
                            MovementId(id),
                            MovementStatus::Successful,
                            &subsystem("bark.lightning_send", "send"),
                            now,
                        );
                        m.sent_to.push(MovementDestination::new(
                            PaymentMethod::Invoice(ark::lightning::Invoice::Bolt11(
                                invoice.clone(),
                            )),
                            Amount::from_sat(21),
                        ));
                        m
                    } else {
                        let mut m = Movement::new(
                            MovementId(id),
                            MovementStatus::Successful,
                            &subsystem("bark.arkoor", "receive"),
                            now,
                        );
                        m.received_on.push(MovementDestination::new(
                            PaymentMethod::Custom(format!("payer-{id}")),
                            Amount::from_sat(21_000),
                        ));
                        m
                    };
                    put_movement(tx, &m, "filling a long history")?;
                }
                Ok(())
            })
            .await
            .expect("fill");
        // A pending movement of another subsystem, and a finished refresh, stay out.
        let other = create(
            &store,
            MovementStatus::Pending,
            &subsystem("bark.board", "board"),
            now,
            None,
        )
        .await
        .expect("board");
        let finished = create(
            &store,
            MovementStatus::Failed,
            &subsystem("bark.round", "refresh"),
            now,
            None,
        )
        .await
        .expect("refresh");
        assert!(other.0 > MOVEMENTS && finished.0 > other.0);

        let started = Instant::now();
        let pending = store
            .pending_movements(&["bark.round"])
            .await
            .expect("scan");
        let scan = started.elapsed();
        let ids: Vec<u32> = pending.iter().map(|m| m.id.0).collect();
        assert_eq!(ids, pending_refreshes, "oldest first, only these");
        assert!(pending.iter().all(|m| m.subsystem.kind == "refresh"));

        let started = Instant::now();
        let all = store
            .movements_before(None, usize::MAX)
            .await
            .expect("full decode");
        let full = started.elapsed();
        assert_eq!(all.len(), MOVEMENTS as usize + 2);
        println!(
            "pending bark.round movements among {}: {:.1} ms (a full decode of the history: \
             {:.1} ms)",
            all.len(),
            scan.as_secs_f64() * 1e3,
            full.as_secs_f64() * 1e3
        );
    }
}
