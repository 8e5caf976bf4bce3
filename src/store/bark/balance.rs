//! The Ark balance from the store, at a cost that does not grow with the wallet.
//!
//! bark's `Wallet::balance` reads every unspent VTXO to sum them. Here the spendable
//! sum comes from [`VTXO_TOTALS`] (kept with every VTXO write), so only the VTXOs that
//! need a refresh because they expired (few: maintenance refreshes them) and the ones
//! an operation in progress holds (rounds, actions, exits: few) are read one by one.
//! Everything is read in one read transaction, so the fields are of one moment.
//!
//! The fields mean what bark's do, and are computed by the same rules: a spendable
//! VTXO counts as `needs_refresh` once it has expired at `tip` or its exit depth has
//! reached the server's `max_exit_depth`; a locked VTXO counts for the round or action
//! that holds it, once; an exited VTXO counts as `pending_exit` while its exit has
//! committed on-chain and is live. `tests/integration/balance_differential.rs` checks it against
//! bark's own computation after every step of random operation sequences.

use std::collections::HashSet;

use ark::VtxoId;
use bark::Balance;
use bark::actions::{WalletAction, WalletActionCheckpoint};
use bark::exit::ExitStateKind;
use bark::vtxo::{VtxoState, VtxoStateKind};
use bitcoin::Amount;
use redb::{ReadableTable, ReadableTableMetadata};

use crate::store::Store;
use crate::store::codec::{Stored, VtxoRowRecord};
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::records::{ActionCheckpointRow, VtxoRow};
use crate::store::schema::*;

const CTX: &str = "computing the balance";

/// What the balance is judged against: the chain tip and the Ark server's exit depth
/// limit, as last seen. Kept in `META` so a wallet bark cannot open yet (its chain
/// source down) still shows the balance as it last stood.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainView {
    pub tip: Option<u32>,
    pub max_exit_depth: Option<u16>,
}

impl Store {
    /// The chain view last recorded with [`Store::record_chain_view`].
    pub async fn chain_view(&self) -> Result<ChainView, StoreError> {
        const CTX: &str = "reading the chain view";
        self.read(CTX, |tx| {
            let meta = tx.open_table(META).ctx(CTX)?;
            let get = |name| -> Result<Option<u64>, StoreError> {
                Ok(meta.get(name).ctx(CTX)?.map(|v| v.value()))
            };
            Ok(ChainView {
                tip: get(meta_keys::LAST_SEEN_TIP)?.and_then(|v| u32::try_from(v).ok()),
                max_exit_depth: get(meta_keys::MAX_VTXO_EXIT_DEPTH)?
                    .and_then(|v| u16::try_from(v).ok()),
            })
        })
        .await
    }

    /// Record the chain view (what is unknown in `view` keeps its recorded value).
    pub async fn record_chain_view(&self, view: ChainView) -> Result<(), StoreError> {
        const CTX: &str = "recording the chain view";
        self.write(CTX, move |tx| {
            let mut meta = tx.open_table(META).ctx(CTX)?;
            if let Some(tip) = view.tip {
                meta.insert(meta_keys::LAST_SEEN_TIP, u64::from(tip))
                    .ctx(CTX)?;
            }
            if let Some(depth) = view.max_exit_depth {
                meta.insert(meta_keys::MAX_VTXO_EXIT_DEPTH, u64::from(depth))
                    .ctx(CTX)?;
            }
            Ok(())
        })
        .await
    }

    /// The wallet's Ark balance as bark defines it, judged at block `tip` (`None`: no
    /// tip seen yet, so nothing has expired) against the server's `max_exit_depth`
    /// (`None`: unknown, so only expiry is judged).
    pub async fn ark_balance(
        &self,
        tip: Option<u32>,
        max_exit_depth: Option<u16>,
    ) -> Result<Balance, StoreError> {
        // The count first: what the read below sees is at least as new (`commit_count`).
        let at = (
            self.commit_count(),
            ChainView {
                tip,
                max_exit_depth,
            },
        );
        if let Some(kept) = self.inner.balance.get(at) {
            return Ok(kept);
        }
        let balance = self
            .read(CTX, move |tx| balance(tx, tip, max_exit_depth))
            .await?;
        self.inner.balance.put(at, balance.clone());
        Ok(balance)
    }
}

/// The last balance computed and what it was judged at: the store's commit count read
/// before its read transaction, and the chain view. While neither moved, the balance is
/// the same, so a client polling it (a phone app does, every few seconds; a wallet
/// screen on several devices) costs no read transaction and no hand-off to the
/// blocking pool.
#[derive(Default)]
pub(crate) struct BalanceMemo(std::sync::Mutex<Option<((u64, ChainView), Balance)>>);

impl BalanceMemo {
    fn get(&self, at: (u64, ChainView)) -> Option<Balance> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.as_ref()
            .filter(|(kept_at, _)| *kept_at == at)
            .map(|(_, balance)| balance.clone())
    }

    fn put(&self, at: (u64, ChainView), balance: Balance) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((at, balance));
    }
}

fn balance(
    tx: &redb::ReadTransaction,
    tip: Option<u32>,
    max_exit_depth: Option<u16>,
) -> Result<Balance, StoreError> {
    let rows = tx.open_table(VTXOS).ctx(CTX)?;
    let too_deep = |depth: u16| max_exit_depth.is_some_and(|max| depth >= max);
    let mut b = Balance {
        spendable: Amount::ZERO,
        needs_refresh: Amount::ZERO,
        pending_lightning_send: Amount::ZERO,
        claimable_lightning_receive: Amount::ZERO,
        pending_in_round: Amount::ZERO,
        pending_exit: Amount::ZERO,
        pending_board: Amount::ZERO,
        pending_arkoor_send: Amount::ZERO,
        pending_offboard: Amount::ZERO,
    };

    // Spendable: the totals by exit depth, then the expired ones not already counted
    // as too deep, from the state index (ordered by expiry, so the range stops at the
    // tip).
    let spendable = VtxoStateKind::Spendable.as_byte();
    let totals = tx.open_table(VTXO_TOTALS).ctx(CTX)?;
    let mut all_spendable = 0u64;
    let mut needs_refresh = 0u64;
    for entry in totals
        .range((spendable, 0)..=(spendable, u16::MAX))
        .ctx(CTX)?
    {
        let (key, total) = entry.ctx(CTX)?;
        let ((_, depth), (_, sum)) = (key.value(), total.value());
        all_spendable += sum;
        if too_deep(depth) {
            needs_refresh += sum;
        }
    }
    let index = tx.open_table(VTXOS_BY_STATE).ctx(CTX)?;
    let mut from = [0u8; 49];
    from[0] = spendable;
    // A tip of zero (or none) expires only VTXOs whose expiry is zero.
    let tip = tip.unwrap_or(0);
    for entry in index.range(from..).ctx(CTX)? {
        let key = entry.ctx(CTX)?.0.value();
        let expiry = u32::from_be_bytes([key[1], key[2], key[3], key[4]]);
        if key[0] != spendable || expiry > tip {
            break;
        }
        let id = vtxo_id(&key[13..])?;
        let row = require_row(&rows, id)?;
        if !too_deep(row.exit_depth) {
            needs_refresh += row.bare.amount().to_sat();
        }
    }
    b.spendable = Amount::from_sat(all_spendable.saturating_sub(needs_refresh));
    b.needs_refresh = Amount::from_sat(needs_refresh);

    // Locked VTXOs count for the operation that holds them, each once: rounds first,
    // then actions in the order they were started.
    let mut counted = HashSet::new();
    let rounds = tx.open_table(ROUND_STATES).ctx(CTX)?;
    for entry in rounds.iter().ctx(CTX)? {
        let round: bark::round::RoundState = entry.ctx(CTX)?.1.value().decode()?;
        let holder = round.lock_holder();
        for input in round.locked_pending_inputs() {
            let Some(row) = unspent_row(&rows, input.id())? else {
                continue;
            };
            let held = matches!(&row.state, VtxoState::Locked { holder: h } if *h == holder);
            if held && counted.insert(input.id()) {
                b.pending_in_round += row.bare.amount();
            }
        }
    }

    let mut actions = Vec::with_capacity(
        usize::try_from(
            tx.open_table(WALLET_ACTION_CHECKPOINTS)
                .ctx(CTX)?
                .len()
                .ctx(CTX)?,
        )
        .unwrap_or(0),
    );
    for entry in tx
        .open_table(WALLET_ACTION_CHECKPOINTS)
        .ctx(CTX)?
        .iter()
        .ctx(CTX)?
    {
        let row: ActionCheckpointRow = entry.ctx(CTX)?.1.value().decode()?;
        actions.push(row);
    }
    actions.sort_by_key(|a| a.created_seq);
    for action in &actions {
        use WalletActionCheckpoint as A;
        let (field, held) = match &action.checkpoint {
            A::LightningSend(a) => (
                &mut b.pending_lightning_send,
                held_by(a, &rows, &mut counted)?,
            ),
            A::LightningReceive(a) => (
                &mut b.claimable_lightning_receive,
                held_by(a, &rows, &mut counted)?,
            ),
            A::ArkoorSend(a) => (&mut b.pending_arkoor_send, held_by(a, &rows, &mut counted)?),
            A::Board(a) => (&mut b.pending_board, held_by(a, &rows, &mut counted)?),
            A::Offboard(a) => (&mut b.pending_offboard, held_by(a, &rows, &mut counted)?),
        };
        *field += held;
    }

    // Exits that have committed on-chain and are not finished hold exited VTXOs.
    for entry in tx.open_table(EXITS).ctx(CTX)?.iter().ctx(CTX)? {
        let exit: bark::persist::models::StoredExit = entry.ctx(CTX)?.1.value().decode()?;
        if !ExitStateKind::LIVE_STATES.contains(&exit.state.kind())
            || !exit.state.warrants_exited_vtxo()
        {
            continue;
        }
        match unspent_row(&rows, exit.vtxo_id)? {
            Some(row) if row.state == VtxoState::Exited => b.pending_exit += row.bare.amount(),
            other => tracing::warn!(
                vtxo = %exit.vtxo_id,
                state = ?other.map(|r| r.state.kind()),
                "an exit has committed on-chain but its VTXO is not exited"
            ),
        }
    }
    Ok(b)
}

type Rows<'a> = redb::ReadOnlyTable<VtxoKey, Stored<VtxoRowRecord>>;

/// The sats `action` holds: the locked VTXOs among the ones it names, leaving out any
/// another operation was counted for already.
fn held_by<A: WalletAction>(
    action: &A,
    rows: &Rows<'_>,
    counted: &mut HashSet<VtxoId>,
) -> Result<Amount, StoreError> {
    let mut amount = Amount::ZERO;
    for id in action.pending_balance_vtxo_ids() {
        if !counted.insert(id) {
            tracing::warn!(vtxo = %id, action = %action.id(), "a VTXO is held by two operations");
            continue;
        }
        // Spendable (released, or not locked yet), exited (in `pending_exit`) or spent
        // (done with) VTXOs are not the action's.
        if let Some(row) = unspent_row(rows, id)?
            && matches!(row.state, VtxoState::Locked { .. })
        {
            amount += row.bare.amount();
        }
    }
    Ok(amount)
}

/// A VTXO's row unless it is spent or unknown (bark's balance only sees the others).
fn unspent_row(rows: &Rows<'_>, id: VtxoId) -> Result<Option<VtxoRow>, StoreError> {
    let Some(stored) = rows.get(id.to_bytes()).ctx(CTX)? else {
        return Ok(None);
    };
    let row: VtxoRow = stored.value().decode()?;
    Ok((row.state.kind() != VtxoStateKind::Spent).then_some(row))
}

fn require_row(rows: &Rows<'_>, id: VtxoId) -> Result<VtxoRow, StoreError> {
    match rows.get(id.to_bytes()).ctx(CTX)? {
        Some(stored) => stored.value().decode(),
        None => Err(StoreError::Invariant(format!(
            "vtxo {id} is in the state index but has no row"
        ))),
    }
}

fn vtxo_id(bytes: &[u8]) -> Result<VtxoId, StoreError> {
    VtxoId::from_slice(bytes)
        .map_err(|e| StoreError::Invariant(format!("a state index key holds no vtxo id: {e}")))
}
