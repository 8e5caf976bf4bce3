//! Nostr Wallet Connect's connections and payment requests (`nwc`).
//!
//! - [`NWC_CONNECTIONS`]: connection id → [`NwcConnectionRecord`]: the app's public
//!   key, the service key, what it may do, and its budget as spent so far.
//! - [`NWC_REQUESTS`] (+ [`NWC_REQUESTS_BY_TIME`]): request event id →
//!   [`NwcRequestRecord`], for every payment requested.
//!
//! A payment's request row is written in the same transaction that checks the
//! connection (revoked? over its limits?) and takes the amount from its budget
//! ([`Store::nwc_begin_payment`]), so two payments cannot together pass a budget and a
//! revocation that committed first stops every payment not yet begun. The row is
//! answered when the payment ends ([`Store::nwc_finish_payment`]), giving the budget
//! back if it failed. A request seen again finds its row: answered, its answer is sent
//! again; unanswered after a restart, the payment's own state decides (`nwc`).
//!
//! Like devices, connections are access to the wallet, not wallet state: deleting the
//! wallet leaves them.

use redb::{ReadableTable, ReadableTableMetadata};

use crate::store::Store;
use crate::store::codec::{Envelope, NwcConnectionRecordKind, NwcRequestRecordKind, Stored};
use crate::store::error::{RedbResultExt, StoreError};
pub use crate::store::records::{NwcConnectionRecord, NwcRequestRecord};
use crate::store::schema::{NWC_CONNECTIONS, NWC_REQUESTS, NWC_REQUESTS_BY_TIME};
use crate::store::spending::connection_rules_key;

/// What [`Store::nwc_begin_payment`] found.
#[derive(Debug)]
pub enum Begun<R> {
    /// The request is new and recorded; the connection as it now stands (budget
    /// taken).
    New(NwcConnectionRecord),
    /// The request was seen before: its row, answered or not.
    Seen(NwcRequestRecord),
    /// The check refused it; nothing was written.
    Refused(R),
    /// No connection has this id.
    NoConnection,
}

impl Store {
    /// Add a connection, refused when `max` connections (revoked ones included, until
    /// they are purged) are stored already or the id is taken.
    pub async fn nwc_add_connection(
        &self,
        record: NwcConnectionRecord,
        max: usize,
    ) -> Result<(), StoreError> {
        const CTX: &str = "adding a wallet connection";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(NWC_CONNECTIONS).ctx(CTX)?;
            if table.len().ctx(CTX)? >= u64::try_from(max).unwrap_or(u64::MAX) {
                return Err(StoreError::Rejected(format!(
                    "{max} wallet connections exist; revoke one first"
                )));
            }
            let encoded = Envelope::encode(&record)?;
            if table
                .insert(record.id.as_str(), encoded)
                .ctx(CTX)?
                .is_some()
            {
                return Err(StoreError::Rejected(format!(
                    "a connection {} exists",
                    record.id
                )));
            }
            Ok(())
        })
        .await
    }

    /// Every stored connection, revoked ones included, oldest first.
    pub async fn nwc_connections(&self) -> Result<Vec<NwcConnectionRecord>, StoreError> {
        const CTX: &str = "listing wallet connections";
        self.read(CTX, |tx| {
            let table = tx.open_table(NWC_CONNECTIONS).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in table.iter().ctx(CTX)? {
                out.push(entry.ctx(CTX)?.1.value().decode()?);
            }
            out.sort_by(|a: &NwcConnectionRecord, b| {
                (a.created_at_us, &a.id).cmp(&(b.created_at_us, &b.id))
            });
            Ok(out)
        })
        .await
    }

    /// Revoke connection `id` at `now_us`: the record stays (its requests are answered
    /// `UNAUTHORIZED`) until [`Store::nwc_purge`]. `None` for an unknown id or one
    /// revoked already.
    pub async fn nwc_revoke_connection(
        &self,
        id: &str,
        now_us: u64,
    ) -> Result<Option<NwcConnectionRecord>, StoreError> {
        const CTX: &str = "revoking a wallet connection";
        let id = id.to_owned();
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(NWC_CONNECTIONS).ctx(CTX)?;
            let Some(mut record) = table
                .get(id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            else {
                return Ok(None);
            };
            if record.revoked_at_us.is_some() {
                return Ok(None);
            }
            record.revoked_at_us = Some(now_us);
            table
                .insert(id.as_str(), Envelope::encode(&record)?)
                .ctx(CTX)?;
            crate::store::spending::forget_device(tx, &connection_rules_key(&id), CTX)?;
            Ok(Some(record))
        })
        .await
    }

    /// Begin a payment requested by event `event_id` through connection
    /// `connection_id`: if the event has a row, return it; otherwise run `check` on
    /// the connection (which may change it: renew its budget period, take the amount)
    /// and, when it passes, write the changed connection and the request's row, in one
    /// transaction.
    pub async fn nwc_begin_payment<R, F>(
        &self,
        event_id: [u8; 32],
        connection_id: &str,
        check: F,
    ) -> Result<Begun<R>, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut NwcConnectionRecord) -> Result<NwcRequestRecord, R> + Send + 'static,
    {
        const CTX: &str = "recording a wallet connection's payment";
        let connection_id = connection_id.to_owned();
        self.write(CTX, move |tx| {
            let mut requests = tx.open_table(NWC_REQUESTS).ctx(CTX)?;
            if let Some(seen) = requests.get(event_id).ctx(CTX)? {
                return Ok(Begun::Seen(seen.value().decode()?));
            }
            let mut connections = tx.open_table(NWC_CONNECTIONS).ctx(CTX)?;
            let Some(mut connection) = connections
                .get(connection_id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            else {
                return Ok(Begun::NoConnection);
            };
            let request = match check(&mut connection) {
                Ok(request) => request,
                Err(refusal) => return Ok(Begun::Refused(refusal)),
            };
            connections
                .insert(connection_id.as_str(), Envelope::encode(&connection)?)
                .ctx(CTX)?;
            requests
                .insert(event_id, Envelope::encode(&request)?)
                .ctx(CTX)?;
            tx.open_table(NWC_REQUESTS_BY_TIME)
                .ctx(CTX)?
                .insert((request.received_at_us, event_id), ())
                .ctx(CTX)?;
            Ok(Begun::New(connection))
        })
        .await
    }

    /// Answer the payment of event `event_id` with `answer`. `paid`: the amount stays
    /// spent; otherwise what it reserved goes back to its connection's budget, if that
    /// is still in the same period. Returns false (nothing written) if the row is gone
    /// or answered already.
    pub async fn nwc_finish_payment(
        &self,
        event_id: [u8; 32],
        answer: String,
        paid: bool,
    ) -> Result<bool, StoreError> {
        const CTX: &str = "answering a wallet connection's payment";
        self.write(CTX, move |tx| {
            let mut requests = tx.open_table(NWC_REQUESTS).ctx(CTX)?;
            let Some(mut request) = unanswered(&requests, event_id, CTX)? else {
                return Ok(false);
            };
            let mut connections = tx.open_table(NWC_CONNECTIONS).ctx(CTX)?;
            let connection = connections
                .get(request.connection_id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?;
            if let Some(mut connection) = connection {
                if paid {
                    connection.spent_total_msat = connection
                        .spent_total_msat
                        .saturating_add(request.reserved_msat);
                } else if connection.budget_period_start_us == request.budget_period_start_us {
                    connection.budget_used_msat = connection
                        .budget_used_msat
                        .saturating_sub(request.reserved_msat);
                }
                connections
                    .insert(
                        request.connection_id.as_str(),
                        Envelope::encode(&connection)?,
                    )
                    .ctx(CTX)?;
            }
            request.answer = Some(answer);
            requests
                .insert(event_id, Envelope::encode(&request)?)
                .ctx(CTX)?;
            Ok(true)
        })
        .await
    }

    /// Mark the unanswered payment of event `event_id` as waiting for approval
    /// `approval`. False (nothing written) if the row is gone or answered already.
    pub async fn nwc_await_approval(
        &self,
        event_id: [u8; 32],
        approval: [u8; 16],
    ) -> Result<bool, StoreError> {
        const CTX: &str = "holding a wallet connection's payment for approval";
        self.write(CTX, move |tx| {
            let mut requests = tx.open_table(NWC_REQUESTS).ctx(CTX)?;
            let Some(mut request) = unanswered(&requests, event_id, CTX)? else {
                return Ok(false);
            };
            request.approval = Some(approval);
            requests
                .insert(event_id, Envelope::encode(&request)?)
                .ctx(CTX)?;
            Ok(true)
        })
        .await
    }

    /// The payment requested by event `event_id`, if one was.
    pub async fn nwc_request(
        &self,
        event_id: [u8; 32],
    ) -> Result<Option<NwcRequestRecord>, StoreError> {
        const CTX: &str = "reading a wallet connection's payment";
        self.read(CTX, move |tx| {
            tx.open_table(NWC_REQUESTS)
                .ctx(CTX)?
                .get(event_id)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()
        })
        .await
    }

    /// Payments begun and not answered (berthd stopped while they were under way),
    /// with their event ids.
    pub async fn nwc_unanswered(&self) -> Result<Vec<([u8; 32], NwcRequestRecord)>, StoreError> {
        const CTX: &str = "listing unanswered wallet connection payments";
        self.read(CTX, |tx| {
            let requests = tx.open_table(NWC_REQUESTS).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in requests.iter().ctx(CTX)? {
                let (id, value) = entry.ctx(CTX)?;
                let record: NwcRequestRecord = value.value().decode()?;
                if record.answer.is_none() {
                    out.push((id.value(), record));
                }
            }
            Ok(out)
        })
        .await
    }

    /// Forget answered requests received before `before_us` (at most `max` of them in
    /// one transaction) and connections revoked before `revoked_before_us`. Returns
    /// how many requests and how many connections were forgotten. Looks first, in a
    /// read: it runs at every start and hourly, and a write with nothing to forget
    /// would still cost the card a durable commit.
    pub async fn nwc_purge(
        &self,
        before_us: u64,
        revoked_before_us: u64,
        max: usize,
    ) -> Result<(usize, usize), StoreError> {
        const CTX: &str = "forgetting old wallet connection requests";
        let found = self
            .read(CTX, move |tx| {
                purgeable(
                    &tx.open_table(NWC_REQUESTS_BY_TIME).ctx(CTX)?,
                    &tx.open_table(NWC_REQUESTS).ctx(CTX)?,
                    &tx.open_table(NWC_CONNECTIONS).ctx(CTX)?,
                    (before_us, revoked_before_us, max),
                    CTX,
                )
            })
            .await?;
        if found.requests.is_empty() && found.connections.is_empty() {
            return Ok((0, 0));
        }
        self.write(CTX, move |tx| {
            let mut by_time = tx.open_table(NWC_REQUESTS_BY_TIME).ctx(CTX)?;
            let mut requests = tx.open_table(NWC_REQUESTS).ctx(CTX)?;
            let mut connections = tx.open_table(NWC_CONNECTIONS).ctx(CTX)?;
            // Found again inside the write: a request may have been answered, or a
            // connection revoked, since the look.
            let due = purgeable(
                &by_time,
                &requests,
                &connections,
                (before_us, revoked_before_us, max),
                CTX,
            )?;
            for (at, id) in &due.requests {
                requests.remove(id).ctx(CTX)?;
                by_time.remove((*at, *id)).ctx(CTX)?;
            }
            for id in &due.connections {
                connections.remove(id.as_str()).ctx(CTX)?;
            }
            Ok((due.requests.len(), due.connections.len()))
        })
        .await
    }
}

/// What [`Store::nwc_purge`] forgets.
struct Purgeable {
    /// Answered requests, as their (time, id) rows.
    requests: Vec<(u64, [u8; 32])>,
    /// Ids of long-revoked connections.
    connections: Vec<String>,
}

/// What [`Store::nwc_purge`] forgets: among the first `max` requests received before
/// `before_us`, the answered ones (an unanswered payment stays until its state is
/// known), as (time, id) rows; and the ids of connections revoked before
/// `revoked_before_us`.
fn purgeable(
    by_time: &impl ReadableTable<(u64, [u8; 32]), ()>,
    requests: &impl ReadableTable<[u8; 32], Stored<NwcRequestRecordKind>>,
    connections: &impl ReadableTable<&'static str, Stored<NwcConnectionRecordKind>>,
    (before_us, revoked_before_us, max): (u64, u64, usize),
    ctx: &'static str,
) -> Result<Purgeable, StoreError> {
    let mut old = Vec::new();
    for entry in by_time.range(..(before_us, [0u8; 32])).ctx(ctx)?.take(max) {
        let (at, id) = entry.ctx(ctx)?.0.value();
        let answered = requests
            .get(id)
            .ctx(ctx)?
            .map(|v| v.value().decode())
            .transpose()?
            .is_none_or(|r: NwcRequestRecord| r.answer.is_some());
        if answered {
            old.push((at, id));
        }
    }
    let mut gone = Vec::new();
    for entry in connections.iter().ctx(ctx)? {
        let (id, value) = entry.ctx(ctx)?;
        let record: NwcConnectionRecord = value.value().decode()?;
        if record
            .revoked_at_us
            .is_some_and(|at| at < revoked_before_us)
        {
            gone.push(id.value().to_string());
        }
    }
    Ok(Purgeable {
        requests: old,
        connections: gone,
    })
}

/// Check the request index inside a read transaction (part of
/// `Store::verify_invariants`): one time row per request, naming it. Returns the
/// number of connections.
pub(super) fn verify(tx: &redb::ReadTransaction, ctx: &'static str) -> Result<u64, StoreError> {
    let bad = |msg: String| StoreError::Invariant(msg);
    let connections = tx.open_table(NWC_CONNECTIONS).ctx(ctx)?;
    for entry in connections.iter().ctx(ctx)? {
        let (key, value) = entry.ctx(ctx)?;
        let record: NwcConnectionRecord = value.value().decode()?;
        if record.id != key.value() {
            return Err(bad(format!(
                "wallet connection {} is stored under another id",
                key.value()
            )));
        }
    }
    let requests = tx.open_table(NWC_REQUESTS).ctx(ctx)?;
    let by_time = tx.open_table(NWC_REQUESTS_BY_TIME).ctx(ctx)?;
    if requests.len().ctx(ctx)? != by_time.len().ctx(ctx)? {
        return Err(bad(
            "the NWC request index and its table differ in size".into()
        ));
    }
    for entry in by_time.iter().ctx(ctx)? {
        let (at, id) = entry.ctx(ctx)?.0.value();
        let record: Option<NwcRequestRecord> = requests
            .get(id)
            .ctx(ctx)?
            .map(|v| v.value().decode())
            .transpose()?;
        if record.is_none_or(|r| r.received_at_us != at) {
            return Err(bad("an NWC request index row names no such request".into()));
        }
    }
    connections.len().ctx(ctx)
}

/// The payment of event `event_id`, if it has a row and no answer yet.
fn unanswered(
    requests: &redb::Table<'_, [u8; 32], Stored<NwcRequestRecordKind>>,
    event_id: [u8; 32],
    ctx: &'static str,
) -> Result<Option<NwcRequestRecord>, StoreError> {
    let request: Option<NwcRequestRecord> = requests
        .get(event_id)
        .ctx(ctx)?
        .map(|v| v.value().decode())
        .transpose()?;
    Ok(request.filter(|r| r.answer.is_none()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;

    fn connection(budget_msat: Option<u64>) -> NwcConnectionRecord {
        NwcConnectionRecord {
            id: "0123456789abcdef".into(),
            name: "app".into(),
            service_secret: [1; 32],
            client_pubkey: [2; 32],
            methods: vec!["pay_invoice".into()],
            max_payment_msat: None,
            budget_msat,
            budget_renewal: "never".into(),
            budget_used_msat: 0,
            budget_period_start_us: 0,
            spent_total_msat: 0,
            relays: vec![],
            created_at_us: 1,
            expires_at_us: None,
            revoked_at_us: None,
            last_used_at_us: None,
            payments: 0,
        }
    }

    fn request(at_us: u64, msat: u64) -> NwcRequestRecord {
        NwcRequestRecord {
            connection_id: "0123456789abcdef".into(),
            received_at_us: at_us,
            method: "pay_invoice".into(),
            reserved_msat: msat,
            budget_period_start_us: 0,
            payment_hash: Some([9; 32]),
            nip04: false,
            answer: None,
            request: None,
            d: None,
            approval: None,
        }
    }

    /// The check of `Store::nwc_begin_payment` as `nwc` runs it: take from the budget
    /// or refuse.
    fn take(
        msat: u64,
        at_us: u64,
    ) -> impl FnOnce(&mut NwcConnectionRecord) -> Result<NwcRequestRecord, &'static str> + Send + 'static
    {
        move |c| {
            let left = c.budget_msat.unwrap_or(u64::MAX) - c.budget_used_msat;
            if msat > left {
                return Err("over budget");
            }
            c.budget_used_msat += msat;
            c.payments += 1;
            Ok(request(at_us, msat))
        }
    }

    async fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open_async(&dir.path().join("berth.redb"), &StoreConfig::default())
            .await
            .expect("open")
            .0;
        (dir, store)
    }

    /// Two payments at once, each within the budget but not together: exactly one
    /// begins. The same request again finds its row; a failed one gives the budget back.
    #[tokio::test]
    async fn a_budget_is_taken_once_and_a_request_begins_once() {
        let (_dir, store) = open().await;
        store
            .nwc_add_connection(connection(Some(1_000)), 4)
            .await
            .expect("ok");
        let (a, b) = tokio::join!(
            store.nwc_begin_payment([1; 32], "0123456789abcdef", take(700, 10)),
            store.nwc_begin_payment([2; 32], "0123456789abcdef", take(700, 11)),
        );
        let began = [a.expect("ok"), b.expect("ok")];
        let new = began.iter().filter(|b| matches!(b, Begun::New(_))).count();
        let refused = began
            .iter()
            .filter(|b| matches!(b, Begun::Refused(_)))
            .count();
        assert_eq!((new, refused), (1, 1), "{began:?}");
        let winner = if matches!(began[0], Begun::New(_)) {
            [1; 32]
        } else {
            [2; 32]
        };

        // Delivered again: the row, not a second payment.
        let again = store
            .nwc_begin_payment(winner, "0123456789abcdef", take(700, 12))
            .await
            .expect("ok");
        assert!(
            matches!(again, Begun::Seen(ref r) if r.answer.is_none()),
            "{again:?}"
        );
        assert_eq!(store.nwc_unanswered().await.expect("ok").len(), 1);

        // It failed: answered, the budget back, and answered only once.
        assert!(
            store
                .nwc_finish_payment(winner, "failed".into(), false)
                .await
                .expect("ok")
        );
        assert!(
            !store
                .nwc_finish_payment(winner, "again".into(), true)
                .await
                .expect("ok")
        );
        let stored = store.nwc_connections().await.expect("ok").remove(0);
        assert_eq!(
            (
                stored.budget_used_msat,
                stored.payments,
                stored.spent_total_msat
            ),
            (0, 1, 0)
        );
        assert_eq!(
            store
                .nwc_request(winner)
                .await
                .expect("ok")
                .and_then(|r| r.answer)
                .as_deref(),
            Some("failed")
        );
        assert!(store.nwc_unanswered().await.expect("ok").is_empty());
        store.verify_invariants().await.expect("ok");
    }

    /// Revoked first: no payment begins after; the record stays until purged, and only
    /// answered requests older than the cut are forgotten.
    #[tokio::test]
    async fn revocation_and_purge() {
        let (_dir, store) = open().await;
        store
            .nwc_add_connection(connection(None), 4)
            .await
            .expect("ok");
        store
            .nwc_begin_payment([1; 32], "0123456789abcdef", take(5, 10))
            .await
            .expect("ok");
        store
            .nwc_begin_payment([2; 32], "0123456789abcdef", take(5, 20))
            .await
            .expect("ok");
        store
            .nwc_finish_payment([1; 32], "paid".into(), true)
            .await
            .expect("ok");
        let revoked = store
            .nwc_revoke_connection("0123456789abcdef", 100)
            .await
            .expect("ok");
        assert_eq!(revoked.map(|r| r.revoked_at_us), Some(Some(100)));
        assert!(
            store
                .nwc_revoke_connection("0123456789abcdef", 101)
                .await
                .expect("ok")
                .is_none()
        );
        let after = store
            .nwc_begin_payment(
                [3; 32],
                "0123456789abcdef",
                |c: &mut NwcConnectionRecord| {
                    if c.revoked_at_us.is_some() {
                        Err("revoked")
                    } else {
                        Ok(request(30, 1))
                    }
                },
            )
            .await
            .expect("ok");
        assert!(matches!(after, Begun::Refused("revoked")));
        // Both requests are older than the cut; only the answered one goes. The
        // connection was revoked at 100, not before 50: it stays.
        assert_eq!(store.nwc_purge(1_000, 50, 100).await.expect("ok"), (1, 0));
        assert!(store.nwc_request([1; 32]).await.expect("ok").is_none());
        assert!(store.nwc_request([2; 32]).await.expect("ok").is_some());
        assert_eq!(store.nwc_connections().await.expect("ok").len(), 1);
        assert_eq!(
            store.nwc_purge(1_000, 1_000, 100).await.expect("ok"),
            (0, 1)
        );
        assert!(store.nwc_connections().await.expect("ok").is_empty());
        // Nothing left to forget (the unanswered payment stays): no commit at all.
        let commits = store.commit_count();
        assert_eq!(
            store.nwc_purge(1_000, 1_000, 100).await.expect("ok"),
            (0, 0)
        );
        assert_eq!(store.commit_count(), commits);
        assert!(store.nwc_request([2; 32]).await.expect("ok").is_some());
        store.verify_invariants().await.expect("ok");
    }
}
