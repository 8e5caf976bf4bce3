//! Wallet events: bark's notifications, recorded in a durable log and handed to every
//! kind of client (long-poll, websocket, SSE).
//!
//! bark broadcasts a `WalletNotification` after it commits a movement. A recorder task
//! appends each one to the log in the store (next id, strictly increasing timestamp),
//! keeps the newest in a small in-memory window so live readers rarely touch the disk,
//! and announces the new id. Readers are cursors: "give me what follows id N", waiting
//! if there is nothing yet. A reader never holds more than one page, so a slow client
//! costs one page of memory, and a replay that turns into live delivery can neither
//! skip nor repeat an event: both read the same log by id.
//!
//! A reader learns it missed events (the `channel-lagging` notification) when its
//! cursor is below what retention or a wallet delete removed, or when bark's own
//! channel overflowed before the recorder caught up (recorded in the log itself).

/// The vocabulary lives with the store, which keeps it inside every stored event.
pub use crate::store::vocabulary;

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::{FutureExt as _, StreamExt as _};
use tokio::sync::{Mutex, watch};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

pub use self::vocabulary::{Alert, EventKind};
use crate::store::records::StoredEvent;
use crate::store::{EventRetention, Store, StoreError, now_us};

/// Most events one read returns: bounds what a reader holds at once.
pub const MAX_PAGE: usize = 1000;
/// Events kept in memory for live readers.
pub const RECENT_CAPACITY: usize = 1024;
/// How often the log is pruned by age when nothing is appended.
const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// One event of the log.
#[derive(Debug)]
pub struct Event {
    pub id: u64,
    pub at_us: u64,
    pub kind: EventKind,
    pub movement: Option<bark::movement::Movement>,
    /// An alert's details (alert kinds only).
    pub alert: Option<Alert>,
    /// The API's JSON for this event, rendered once by the first reader that needs it.
    pub rendered: OnceLock<Box<serde_json::value::RawValue>>,
}

impl Event {
    fn new(id: u64, stored: StoredEvent) -> Self {
        Event {
            id,
            at_us: stored.at_us,
            kind: stored.kind,
            movement: stored.movement,
            alert: stored.alert,
            rendered: OnceLock::new(),
        }
    }

    pub fn at(&self) -> DateTime<Utc> {
        timestamp(self.at_us)
    }
}

/// A microsecond timestamp as a date-time.
pub fn timestamp(at_us: u64) -> DateTime<Utc> {
    i64::try_from(at_us)
        .ok()
        .and_then(DateTime::from_timestamp_micros)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A date-time as a microsecond timestamp, rounded down (so "after `since`" keeps
/// meaning after it), clamped to the epoch.
pub fn micros(at: DateTime<Utc>) -> u64 {
    u64::try_from(at.timestamp_micros()).unwrap_or(0)
}

/// What a read returned: the events after the cursor (oldest first, at most a page),
/// and whether the reader missed some before them.
#[derive(Debug, Default)]
pub struct Page {
    pub events: Vec<Arc<Event>>,
    pub missed: bool,
}

impl Page {
    /// The cursor to read from next.
    pub fn next_cursor(&self, cursor: u64) -> u64 {
        self.events.last().map_or(cursor, |e| e.id)
    }
}

/// Why a wait returned with nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    Events,
    Deadline,
    Shutdown,
}

pub struct EventHub {
    store: Store,
    retention: EventRetention,
    /// One append at a time, so the in-memory window is in id order.
    append_order: Mutex<()>,
    /// The newest events, oldest first; at most `RECENT_CAPACITY` (or the retention
    /// count, if smaller).
    recent: RwLock<VecDeque<Arc<Event>>>,
    /// The newest id appended.
    latest: watch::Sender<u64>,
    /// `true` once the daemon is stopping: every wait returns.
    stopping: watch::Sender<bool>,
}

impl EventHub {
    /// The hub over the store's log, with the newest id already in the log.
    pub async fn open(store: Store, retention: EventRetention) -> Result<Arc<Self>, StoreError> {
        let bounds = store.event_bounds().await?;
        let (latest, _) = watch::channel(bounds.last_id);
        let (stopping, _) = watch::channel(false);
        let hub = EventHub {
            store,
            retention,
            append_order: Mutex::new(()),
            recent: RwLock::new(VecDeque::new()),
            latest,
            stopping,
        };
        // Start with the newest events in memory, as if they had just been appended.
        let capacity = hub.recent_capacity();
        let from = bounds.last_id.saturating_sub(capacity as u64);
        let page = hub.store.events_after(from, capacity).await?;
        hub.recent
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .extend(
                page.events
                    .into_iter()
                    .map(|(id, stored)| Arc::new(Event::new(id, stored))),
            );
        Ok(Arc::new(hub))
    }

    fn recent_capacity(&self) -> usize {
        usize::try_from(self.retention.max_count)
            .unwrap_or(usize::MAX)
            .clamp(1, RECENT_CAPACITY)
    }

    /// Append an event to the log and wake every waiting reader.
    pub async fn append(
        &self,
        kind: EventKind,
        movement: Option<bark::movement::Movement>,
    ) -> Result<Arc<Event>, StoreError> {
        self.append_with(kind, movement, None).await
    }

    /// Append an alert (one of the autopilot's opt-in kinds).
    pub async fn alert(&self, kind: EventKind, alert: Alert) -> Result<Arc<Event>, StoreError> {
        self.append_with(kind, None, Some(alert)).await
    }

    async fn append_with(
        &self,
        kind: EventKind,
        movement: Option<bark::movement::Movement>,
        alert: Option<Alert>,
    ) -> Result<Arc<Event>, StoreError> {
        let _order = self.append_order.lock().await;
        let (id, stored) = self
            .store
            .append_event_with(kind, movement, alert, now_us(), self.retention)
            .await?;
        let event = Arc::new(Event::new(id, stored));
        {
            let mut recent = self.recent.write().unwrap_or_else(|e| e.into_inner());
            recent.push_back(Arc::clone(&event));
            while recent.len() > self.recent_capacity() {
                recent.pop_front();
            }
        }
        self.latest.send_replace(id);
        Ok(event)
    }

    /// The newest id in the log (0: none yet). Reading after it starts "from now".
    pub fn latest_id(&self) -> u64 {
        *self.latest.borrow()
    }

    /// Up to `limit` events after `cursor`, and whether events right after `cursor`
    /// are gone from the log.
    pub async fn read_after(&self, cursor: u64, limit: usize) -> Result<Page, StoreError> {
        let limit = limit.clamp(1, MAX_PAGE);
        // Nothing follows the newest event, and nothing before it can have been
        // missed: the common case of a live reader, answered without the store.
        if cursor >= self.latest_id() {
            return Ok(Page::default());
        }
        {
            let recent = self.recent.read().unwrap_or_else(|e| e.into_inner());
            // Served from memory when the window holds the event right after the
            // cursor. Ids in the window are consecutive, so that event's position is
            // arithmetic.
            if let Some(first) = recent.front()
                && first.id <= cursor.saturating_add(1)
            {
                let skip = usize::try_from(cursor + 1 - first.id).unwrap_or(usize::MAX);
                let events = recent.iter().skip(skip).take(limit).cloned().collect();
                return Ok(Page {
                    events,
                    missed: false,
                });
            }
        }
        let page = self.store.events_after(cursor, limit).await?;
        Ok(Page {
            missed: cursor < page.bounds.pruned_through_id,
            events: page
                .events
                .into_iter()
                .map(|(id, stored)| Arc::new(Event::new(id, stored)))
                .collect(),
        })
    }

    /// The cursor that resumes after `since`, and whether events after `since` are
    /// gone from the log already.
    pub async fn cursor_at(&self, since: DateTime<Utc>) -> Result<(u64, bool), StoreError> {
        let since_us = micros(since);
        {
            let recent = self.recent.read().unwrap_or_else(|e| e.into_inner());
            if let Some(first) = recent.front()
                && first.at_us <= since_us
            {
                // Times increase along the window: the last event at or before `since`.
                let at_or_before = recent.partition_point(|e| e.at_us <= since_us);
                let cursor = recent.get(at_or_before - 1).map_or(first.id, |e| e.id);
                return Ok((cursor, false));
            }
        }
        let (cursor, bounds) = self.store.event_cursor_at(since_us).await?;
        Ok((cursor, since_us < bounds.pruned_through_at_us))
    }

    /// Like [`EventHub::read_after`], but when there is nothing to return yet, wait
    /// for the next append until `deadline` or shutdown.
    pub async fn wait_after(
        &self,
        cursor: u64,
        limit: usize,
        deadline: tokio::time::Instant,
    ) -> Result<(Page, Woken), StoreError> {
        let mut latest = self.latest.subscribe();
        let mut stopping = self.stopping.subscribe();
        loop {
            // Mark the current id seen before reading, so an append that lands after
            // the read wakes the wait below.
            latest.borrow_and_update();
            let page = self.read_after(cursor, limit).await?;
            if !page.events.is_empty() || page.missed {
                return Ok((page, Woken::Events));
            }
            if *stopping.borrow_and_update() {
                return Ok((page, Woken::Shutdown));
            }
            tokio::select! {
                changed = latest.changed() => {
                    if changed.is_err() {
                        return Ok((page, Woken::Shutdown));
                    }
                }
                _ = stopping.wait_for(|s| *s) => return Ok((page, Woken::Shutdown)),
                _ = tokio::time::sleep_until(deadline) => return Ok((page, Woken::Deadline)),
            }
        }
    }

    /// Resolves once the daemon is stopping.
    pub async fn stopped(&self) {
        let mut stopping = self.stopping.subscribe();
        let _ = stopping.wait_for(|s| *s).await;
    }

    /// The daemon is stopping: every wait returns now, and new ones at once.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Forget the in-memory window (the wallet was deleted and its log cleared).
    pub fn forget_recent(&self) {
        self.recent
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Prune by age now and then, even when nothing is appended.
    pub fn spawn_pruner(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let hub = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                match hub.store.prune_events(now_us(), hub.retention).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(removed = n, "event log pruned"),
                    Err(e) => tracing::warn!(error = %e, "cannot prune the event log"),
                }
                tokio::select! {
                    _ = tokio::time::sleep(PRUNE_INTERVAL) => {}
                    _ = hub.stopped() => return,
                }
            }
        })
    }

    /// Record every notification `wallet` emits, until `stop` turns `true`; then
    /// record what bark already sent and end. Call before the wallet's background tasks
    /// start, so nothing they do is missed.
    pub async fn spawn_recorder(
        self: &Arc<Self>,
        wallet: &bark::Wallet,
        mut stop: watch::Receiver<bool>,
    ) -> Result<tokio::task::JoinHandle<()>, StoreError> {
        let hub = Arc::clone(self);
        // Every movement that exists now was announced (or predates the log).
        let mut order = CreatedFirst::new(self.store.last_movement_id().await?);
        let mut stream = wallet.subscribe_notifications().into_raw_stream();
        Ok(tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = stream.next() => next,
                    _ = stop.wait_for(|s| *s) => break,
                };
                match next {
                    Some(item) => hub.record(&mut order, item).await,
                    None => return,
                }
            }
            // Stopping: what bark has already sent is still recorded.
            while let Some(Some(item)) = stream.next().now_or_never() {
                hub.record(&mut order, item).await;
            }
        }))
    }

    async fn record(
        &self,
        order: &mut CreatedFirst,
        item: Result<bark::WalletNotification, BroadcastStreamRecvError>,
    ) {
        use bark::WalletNotification as N;
        let (kind, movement) = match item {
            Ok(N::MovementCreated { movement }) => (
                order.kind(EventKind::MovementCreated, movement.id.0),
                Some(movement),
            ),
            Ok(N::MovementUpdated { movement }) => (
                order.kind(EventKind::MovementUpdated, movement.id.0),
                Some(movement),
            ),
            Ok(N::ChannelLagging) => (EventKind::ChannelLagging, None),
            Err(BroadcastStreamRecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "the event recorder fell behind bark's notifications"
                );
                (EventKind::ChannelLagging, None)
            }
        };
        if let Err(e) = self.append(kind, movement).await {
            tracing::error!(error = %e, ?kind, "cannot record a wallet event");
        }
    }
}

/// Keeps "created" before "updated" for every movement.
///
/// bark 0.8 creates some movements (boards, sends) by inserting them, applying their
/// first update, and only then announcing the creation, so its notifications say
/// "updated" before "created". A client must not hear of an update to a movement it
/// has never been told exists. Movement ids only grow, so an update to a movement
/// newer than every one announced is that movement's creation; bark's own "created"
/// that follows is then an update (it carries the same or a newer state).
#[derive(Debug)]
struct CreatedFirst {
    /// Every movement up to this id has been announced.
    announced_through: u32,
    /// Announced early (on an update); bark's "created" for them is still to come.
    early: HashSet<u32>,
}

/// Most movements awaiting bark's late "created" (each is normally a few
/// milliseconds away); beyond this the oldest are forgotten.
const MAX_EARLY: usize = 256;

impl CreatedFirst {
    fn new(announced_through: u32) -> Self {
        CreatedFirst {
            announced_through,
            early: HashSet::new(),
        }
    }

    /// The kind to record for bark's `kind` about movement `id`.
    fn kind(&mut self, kind: EventKind, id: u32) -> EventKind {
        match kind {
            EventKind::MovementUpdated if id > self.announced_through => {
                self.announced_through = id;
                if self.early.len() >= MAX_EARLY
                    && let Some(oldest) = self.early.iter().min().copied()
                {
                    self.early.remove(&oldest);
                }
                self.early.insert(id);
                EventKind::MovementCreated
            }
            EventKind::MovementCreated if self.early.remove(&id) => EventKind::MovementUpdated,
            EventKind::MovementCreated => {
                self.announced_through = self.announced_through.max(id);
                kind
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;

    #[test]
    fn a_movement_is_always_created_before_it_is_updated() {
        use EventKind::{MovementCreated as C, MovementUpdated as U};
        let mut order = CreatedFirst::new(3);
        // bark's order for a board: update, then create; then later updates.
        let recorded: Vec<EventKind> = [(U, 4), (C, 4), (U, 4), (C, 5), (U, 5), (U, 2)]
            .into_iter()
            .map(|(kind, id)| order.kind(kind, id))
            .collect();
        assert_eq!(recorded, vec![C, U, U, C, U, U]);
        assert!(order.early.is_empty());
    }

    async fn hub(retention: EventRetention) -> (tempfile::TempDir, Arc<EventHub>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open_async(&dir.path().join("db.redb"), &StoreConfig::default())
            .await
            .expect("open");
        let hub = EventHub::open(store, retention).await.expect("hub");
        (dir, hub)
    }

    fn ids(page: &Page) -> Vec<u64> {
        page.events.iter().map(|e| e.id).collect()
    }

    #[tokio::test]
    async fn reads_from_memory_and_from_the_log_agree() {
        let retention = EventRetention {
            max_count: 5000,
            ..EventRetention::default()
        };
        let (_dir, hub) = hub(retention).await;
        for _ in 0..1500 {
            hub.append(EventKind::ChannelLagging, None)
                .await
                .expect("append");
        }
        // The window holds the newest 1024; older reads go to the log.
        let mut cursor = 0;
        let mut seen = Vec::new();
        loop {
            let page = hub.read_after(cursor, 100).await.expect("read");
            assert!(!page.missed);
            if page.events.is_empty() {
                break;
            }
            cursor = page.next_cursor(cursor);
            seen.extend(ids(&page));
        }
        assert_eq!(seen, (1..=1500).collect::<Vec<_>>());
        let (cursor, missed) = hub
            .cursor_at(hub.read_after(699, 1).await.expect("read").events[0].at())
            .await
            .expect("cursor");
        assert_eq!((cursor, missed), (700, false));
    }

    #[tokio::test]
    async fn a_cursor_behind_retention_is_told_it_missed_events() {
        let retention = EventRetention {
            max_count: 3,
            ..EventRetention::default()
        };
        let (_dir, hub) = hub(retention).await;
        let first = hub
            .append(EventKind::ChannelLagging, None)
            .await
            .expect("append");
        for _ in 0..4 {
            hub.append(EventKind::ChannelLagging, None)
                .await
                .expect("append");
        }
        let page = hub.read_after(0, 10).await.expect("read");
        assert!(page.missed);
        assert_eq!(ids(&page), vec![3, 4, 5]);
        let page = hub.read_after(2, 10).await.expect("read");
        assert!(!page.missed, "events up to 2 are pruned, none after");
        let (cursor, missed) = hub.cursor_at(first.at()).await.expect("cursor");
        assert!(missed, "event 2 came after `since` and is gone");
        assert_eq!(cursor, 2);
    }

    #[tokio::test]
    async fn a_wait_wakes_on_append_on_deadline_and_on_stop() {
        let (_dir, hub) = hub(EventRetention::default()).await;
        let soon = || tokio::time::Instant::now() + Duration::from_millis(50);
        let (page, woken) = hub.wait_after(0, 10, soon()).await.expect("wait");
        assert_eq!((page.events.len(), woken), (0, Woken::Deadline));

        let waiter = {
            let hub = Arc::clone(&hub);
            tokio::spawn(async move {
                let far = tokio::time::Instant::now() + Duration::from_secs(30);
                hub.wait_after(0, 10, far).await.expect("wait")
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        hub.append(EventKind::MovementCreated, None)
            .await
            .expect("append");
        let (page, woken) = waiter.await.expect("join");
        assert_eq!((ids(&page), woken), (vec![1], Woken::Events));

        let waiter = {
            let hub = Arc::clone(&hub);
            tokio::spawn(async move {
                let far = tokio::time::Instant::now() + Duration::from_secs(30);
                hub.wait_after(1, 10, far).await.expect("wait")
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        hub.stop();
        let (_, woken) = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("stop wakes the wait")
            .expect("join");
        assert_eq!(woken, Woken::Shutdown);
    }
}
