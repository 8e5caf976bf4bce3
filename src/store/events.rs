//! The event log's tables: append with retention in one transaction, read by id or by
//! time. What an event means and how it reaches clients is `crate::events`.
//!
//! Invariants (checked by `verify_invariants`):
//! - ids start at 1 and only grow (`LAST_EVENT_ID`), also across wallet deletes;
//! - timestamps strictly grow with ids, so `EVENTS_BY_TIME` maps each timestamp to
//!   exactly one event and id order is time order;
//! - everything with an id ≤ `EVENTS_PRUNED_THROUGH_ID` is gone; everything above it
//!   and ≤ `LAST_EVENT_ID` is present (ids are dense between the two).

use std::time::Duration;

use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};

use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::records::StoredEvent;
use crate::store::schema::{EVENTS, EVENTS_BY_TIME, META, meta_keys};
use crate::store::vocabulary::EventKind;

/// How much of the log is kept. An append removes what falls outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventRetention {
    /// Most events kept (at least 1).
    pub max_count: u64,
    /// Oldest event kept, by age.
    pub max_age: Duration,
}

impl Default for EventRetention {
    fn default() -> Self {
        EventRetention {
            max_count: 10_000,
            max_age: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// Where the log stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventBounds {
    /// Every event with an id up to this one has been removed (0: none ever was).
    pub pruned_through_id: u64,
    /// Timestamp of that event (µs; 0 when none was removed).
    pub pruned_through_at_us: u64,
    /// The newest id handed out (0: no event yet).
    pub last_id: u64,
}

/// One page of events read from the log, oldest first, with the bounds seen by the
/// same read transaction.
#[derive(Debug, Clone)]
pub struct EventPage {
    pub events: Vec<(u64, StoredEvent)>,
    pub bounds: EventBounds,
}

fn meta_value(
    tx: &redb::ReadTransaction,
    name: &str,
    ctx: &'static str,
) -> Result<u64, StoreError> {
    let meta = tx.open_table(META).ctx(ctx)?;
    Ok(meta.get(name).ctx(ctx)?.map(|v| v.value()).unwrap_or(0))
}

fn read_bounds(tx: &redb::ReadTransaction, ctx: &'static str) -> Result<EventBounds, StoreError> {
    Ok(EventBounds {
        pruned_through_id: meta_value(tx, meta_keys::EVENTS_PRUNED_THROUGH_ID, ctx)?,
        pruned_through_at_us: meta_value(tx, meta_keys::EVENTS_PRUNED_THROUGH_AT, ctx)?,
        last_id: meta_value(tx, meta_keys::LAST_EVENT_ID, ctx)?,
    })
}

/// Remove the oldest events while there are more than `keep` or they are older than
/// `cutoff_us`, recording how far the log has been pruned.
fn prune(
    tx: &WriteTransaction,
    keep: u64,
    cutoff_us: u64,
    ctx: &'static str,
) -> Result<u64, StoreError> {
    let mut events = tx.open_table(EVENTS).ctx(ctx)?;
    let mut by_time = tx.open_table(EVENTS_BY_TIME).ctx(ctx)?;
    let mut len = events.len().ctx(ctx)?;
    let mut last_pruned = None;
    let mut removed = 0;
    loop {
        // Times grow with ids, so the time index's first entry is the oldest event;
        // reading it there spares decoding the event.
        let Some((at_us, id)) = by_time
            .first()
            .ctx(ctx)?
            .map(|(at, id)| (at.value(), id.value()))
        else {
            break;
        };
        if !prune_due(len, at_us, keep, cutoff_us) {
            break;
        }
        events.remove(id).ctx(ctx)?;
        by_time.remove(at_us).ctx(ctx)?;
        len -= 1;
        removed += 1;
        last_pruned = Some((id, at_us));
    }
    if let Some((id, at_us)) = last_pruned {
        let mut meta = tx.open_table(META).ctx(ctx)?;
        meta.insert(meta_keys::EVENTS_PRUNED_THROUGH_ID, id)
            .ctx(ctx)?;
        meta.insert(meta_keys::EVENTS_PRUNED_THROUGH_AT, at_us)
            .ctx(ctx)?;
    }
    Ok(removed)
}

/// Whether a log of `len` events whose oldest was appended at `oldest_us` has one to
/// prune: more than `keep`, or older than `cutoff_us`.
fn prune_due(len: u64, oldest_us: u64, keep: u64, cutoff_us: u64) -> bool {
    len > keep || oldest_us < cutoff_us
}

/// Remove every event, inside the caller's transaction.
pub(super) fn clear(tx: &WriteTransaction, ctx: &'static str) -> Result<(), StoreError> {
    prune(tx, 0, u64::MAX, ctx).map(|_| ())
}

fn cutoff(now_us: u64, retention: EventRetention) -> u64 {
    let age = u64::try_from(retention.max_age.as_micros()).unwrap_or(u64::MAX);
    now_us.saturating_sub(age)
}

impl Store {
    /// Append one event and apply `retention`, in one durable transaction. The event
    /// gets the next id and the timestamp `now_us`, or one microsecond after the
    /// previous event's if the clock has not moved on (or went back). Returns both.
    pub async fn append_event(
        &self,
        kind: EventKind,
        movement: Option<bark::movement::Movement>,
        now_us: u64,
        retention: EventRetention,
    ) -> Result<(u64, StoredEvent), StoreError> {
        self.append_event_with(kind, movement, None, now_us, retention)
            .await
    }

    /// [`Store::append_event`] with an alert's details.
    pub async fn append_event_with(
        &self,
        kind: EventKind,
        movement: Option<bark::movement::Movement>,
        alert: Option<crate::store::vocabulary::Alert>,
        now_us: u64,
        retention: EventRetention,
    ) -> Result<(u64, StoredEvent), StoreError> {
        const CTX: &str = "appending to the event log";
        self.write(CTX, move |tx| {
            let previous_at = {
                let by_time = tx.open_table(EVENTS_BY_TIME).ctx(CTX)?;
                let last = by_time.last().ctx(CTX)?.map(|(at, _)| at.value());
                let meta = tx.open_table(META).ctx(CTX)?;
                let pruned = meta
                    .get(meta_keys::EVENTS_PRUNED_THROUGH_AT)
                    .ctx(CTX)?
                    .map(|v| v.value());
                last.or(pruned).unwrap_or(0)
            };
            let at_us = now_us.max(previous_at + 1);
            let id = {
                let mut meta = tx.open_table(META).ctx(CTX)?;
                let next = meta
                    .get(meta_keys::LAST_EVENT_ID)
                    .ctx(CTX)?
                    .map(|v| v.value())
                    .unwrap_or(0)
                    + 1;
                meta.insert(meta_keys::LAST_EVENT_ID, next).ctx(CTX)?;
                next
            };
            let event = StoredEvent {
                at_us,
                kind,
                movement,
                alert,
            };
            tx.open_table(EVENTS)
                .ctx(CTX)?
                .insert(id, Envelope::encode(&event)?)
                .ctx(CTX)?;
            tx.open_table(EVENTS_BY_TIME)
                .ctx(CTX)?
                .insert(at_us, id)
                .ctx(CTX)?;
            prune(
                tx,
                retention.max_count.max(1),
                cutoff(now_us, retention),
                CTX,
            )?;
            Ok((id, event))
        })
        .await
    }

    /// Apply `retention` without appending (the log ages even when nothing happens).
    /// Returns how many events were removed.
    pub async fn prune_events(
        &self,
        now_us: u64,
        retention: EventRetention,
    ) -> Result<u64, StoreError> {
        const CTX: &str = "pruning the event log";
        let (keep, cutoff_us) = (retention.max_count.max(1), cutoff(now_us, retention));
        // Looked at first, in a read: this runs at every start and hourly, and a write
        // that removes nothing would still cost the card a durable commit.
        let due = self
            .read(CTX, move |tx| {
                let events = tx.open_table(EVENTS).ctx(CTX)?;
                let by_time = tx.open_table(EVENTS_BY_TIME).ctx(CTX)?;
                let len = events.len().ctx(CTX)?;
                Ok(by_time
                    .first()
                    .ctx(CTX)?
                    .is_some_and(|(at, _)| prune_due(len, at.value(), keep, cutoff_us)))
            })
            .await?;
        if !due {
            return Ok(0);
        }
        self.write(CTX, move |tx| prune(tx, keep, cutoff_us, CTX))
            .await
    }

    /// Remove every event (the wallet they describe was deleted). Ids keep growing,
    /// so a reader's old cursor is seen to have missed them.
    pub async fn clear_events(&self) -> Result<(), StoreError> {
        const CTX: &str = "clearing the event log";
        self.write(CTX, |tx| clear(tx, CTX)).await
    }

    /// Up to `limit` events with ids greater than `after`, oldest first.
    pub async fn events_after(&self, after: u64, limit: usize) -> Result<EventPage, StoreError> {
        const CTX: &str = "reading the event log";
        self.read(CTX, move |tx| {
            let bounds = read_bounds(tx, CTX)?;
            let table = tx.open_table(EVENTS).ctx(CTX)?;
            let mut events = Vec::new();
            if let Some(start) = after.checked_add(1) {
                for entry in table.range(start..).ctx(CTX)?.take(limit) {
                    let (id, record) = entry.ctx(CTX)?;
                    events.push((id.value(), record.value().decode()?));
                }
            }
            Ok(EventPage { events, bounds })
        })
        .await
    }

    /// The id of the newest event at or before `at_us` (0 when there is none in the
    /// log), and the bounds: resuming after that id is resuming after `at_us`.
    pub async fn event_cursor_at(&self, at_us: u64) -> Result<(u64, EventBounds), StoreError> {
        const CTX: &str = "reading the event log";
        self.read(CTX, move |tx| {
            let bounds = read_bounds(tx, CTX)?;
            let by_time = tx.open_table(EVENTS_BY_TIME).ctx(CTX)?;
            let at_or_before = by_time
                .range(..=at_us)
                .ctx(CTX)?
                .next_back()
                .transpose()
                .ctx(CTX)?
                .map(|(_, id)| id.value());
            // Nothing retained that early: the cursor sits just before the oldest
            // retained event, and what was pruned is accounted for by the bounds.
            let cursor = at_or_before.unwrap_or(bounds.pruned_through_id);
            Ok((cursor, bounds))
        })
        .await
    }

    /// The log's bounds.
    pub async fn event_bounds(&self) -> Result<EventBounds, StoreError> {
        const CTX: &str = "reading the event log";
        self.read(CTX, |tx| read_bounds(tx, CTX)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;

    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open_async(&dir.path().join("db.redb"), &StoreConfig::default())
            .await
            .expect("open");
        (dir, store)
    }

    const KEEP_ALL: EventRetention = EventRetention {
        max_count: 1000,
        max_age: Duration::from_secs(3600),
    };

    #[tokio::test]
    async fn ids_and_timestamps_strictly_increase_even_when_the_clock_does_not() {
        let (_dir, store) = store().await;
        let mut last = (0, 0);
        for now in [5_000_000, 5_000_000, 4_000_000, 6_000_000] {
            let (id, event) = store
                .append_event(EventKind::ChannelLagging, None, now, KEEP_ALL)
                .await
                .expect("append");
            assert!(id > last.0 && event.at_us > last.1, "{id} {}", event.at_us);
            last = (id, event.at_us);
        }
        assert_eq!(last, (4, 6_000_000));
        let page = store.events_after(1, 10).await.expect("read");
        let ids: Vec<u64> = page.events.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![2, 3, 4]);
        let times: Vec<u64> = page.events.iter().map(|(_, e)| e.at_us).collect();
        assert_eq!(times, vec![5_000_001, 5_000_002, 6_000_000]);
    }

    #[tokio::test]
    async fn retention_by_count_and_by_age_records_what_was_pruned() {
        let (_dir, store) = store().await;
        let retention = EventRetention {
            max_count: 3,
            max_age: Duration::from_secs(10),
        };
        for i in 0..5u64 {
            store
                .append_event(EventKind::ChannelLagging, None, 1_000_000 + i, retention)
                .await
                .expect("append");
        }
        let page = store.events_after(0, 100).await.expect("read");
        assert_eq!(
            page.events.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        assert_eq!(page.bounds.pruned_through_id, 2);
        assert_eq!(page.bounds.pruned_through_at_us, 1_000_001);
        // Twenty seconds on, everything is older than ten seconds.
        let removed = store
            .prune_events(21_000_000, retention)
            .await
            .expect("prune");
        assert_eq!(removed, 3);
        let bounds = store.event_bounds().await.expect("bounds");
        assert_eq!((bounds.pruned_through_id, bounds.last_id), (5, 5));
        // With nothing left to prune, pruning commits nothing (no write for the card).
        let commits = store.commit_count();
        assert_eq!(
            store
                .prune_events(21_000_000, retention)
                .await
                .expect("prune"),
            0
        );
        assert_eq!(store.commit_count(), commits);
        // The next id continues, and its time is after everything pruned.
        let (id, event) = store
            .append_event(EventKind::ChannelLagging, None, 0, retention)
            .await
            .expect("append");
        assert_eq!((id, event.at_us), (6, 1_000_005));
    }

    #[tokio::test]
    async fn cursor_at_a_time_points_at_the_newest_event_not_after_it() {
        let (_dir, store) = store().await;
        for now in [100, 200, 300] {
            store
                .append_event(EventKind::ChannelLagging, None, now, KEEP_ALL)
                .await
                .expect("append");
        }
        let cursor = |at| {
            let store = store.clone();
            async move { store.event_cursor_at(at).await.expect("cursor").0 }
        };
        assert_eq!(cursor(50).await, 0);
        assert_eq!(cursor(100).await, 1);
        assert_eq!(cursor(250).await, 2);
        assert_eq!(cursor(300).await, 3);
        assert_eq!(cursor(u64::MAX).await, 3);
        store.clear_events().await.expect("clear");
        assert_eq!(cursor(50).await, 3, "after a clear, old cursors are pruned");
        assert!(
            store
                .events_after(0, 10)
                .await
                .expect("read")
                .events
                .is_empty()
        );
    }
}
