//! Supervision of Berth's background tasks (the autopilot, and for a loaded wallet the
//! work bark's daemon would do: `engine::wallet_tasks`): each runs one step at a time,
//! every step in its own tokio task so a panic is caught like an error; a failing step is
//! retried with backoff (1 s, doubling, at most 5 minutes) instead of spinning or dying,
//! and every task's state is visible (`/health`).
//!
//! A step may be long: following a stream (round events, the mailbox) is one step that
//! ends when the stream does. Aborting a task's handle aborts its running step too.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Longest wait before retrying a failing task.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The state of one supervised task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskStatus {
    /// Steps run.
    pub runs: u64,
    /// Steps that failed (an error or a panic), ever.
    pub failures: u64,
    /// Failures since the last success; 0 when healthy.
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
    pub last_ok_at: Option<SystemTime>,
    /// When a failing task tries again.
    pub retry_at: Option<SystemTime>,
}

/// The registry of supervised tasks.
#[derive(Debug, Default)]
pub struct Tasks {
    statuses: Mutex<BTreeMap<&'static str, TaskStatus>>,
}

/// How long to wait after `failures` consecutive failures.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(16)).min(MAX_BACKOFF)
}

impl Tasks {
    pub fn snapshot(&self) -> Vec<(&'static str, TaskStatus)> {
        self.statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, status)| (*name, status.clone()))
            .collect()
    }

    /// Forget a task's state (its wallet was unloaded: a stale entry would mislead).
    pub fn remove(&self, name: &str) {
        self.statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    fn record(&self, name: &'static str, f: impl FnOnce(&mut TaskStatus)) {
        let mut statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        f(statuses.entry(name).or_default());
    }

    /// Run `step` again and again, `pause` after each success and with backoff after
    /// each failure, until the returned handle is aborted. `pause` is awaited between
    /// steps (a sleep, or a wait for whichever comes first of a timer and an event).
    pub fn spawn<S, SF, P, PF>(
        self: &Arc<Self>,
        name: &'static str,
        step: S,
        pause: P,
    ) -> tokio::task::JoinHandle<()>
    where
        S: Fn() -> SF + Send + 'static,
        SF: Future<Output = Result<(), String>> + Send + 'static,
        P: Fn() -> PF + Send + 'static,
        PF: Future<Output = ()> + Send + 'static,
    {
        let tasks = Arc::clone(self);
        tasks.record(name, |_| {});
        tokio::spawn(async move {
            loop {
                let running = tokio::spawn(step());
                // Dropped when this task is aborted: the step must not outlive it.
                let _abort_step = AbortOnDrop(running.abort_handle());
                let outcome = match running.await {
                    Ok(result) => result,
                    Err(e) if e.is_panic() => Err("the task panicked".to_string()),
                    // Cancelled: the runtime is shutting down.
                    Err(_) => return,
                };
                match outcome {
                    Ok(()) => {
                        tasks.record(name, |s| {
                            s.runs += 1;
                            s.consecutive_failures = 0;
                            s.last_ok_at = Some(SystemTime::now());
                            s.retry_at = None;
                        });
                        pause().await;
                    }
                    Err(error) => {
                        let mut wait = Duration::ZERO;
                        tasks.record(name, |s| {
                            s.runs += 1;
                            s.failures += 1;
                            s.consecutive_failures = s.consecutive_failures.saturating_add(1);
                            wait = backoff(s.consecutive_failures);
                            s.retry_at = Some(SystemTime::now() + wait);
                            s.last_error = Some(error.clone());
                        });
                        tracing::warn!(target: "berth::supervisor", task = name, %error,
                            retry_in_secs = wait.as_secs(), "background task failed; retrying");
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        })
    }
}

/// Aborts a spawned step when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_or_panicking_task_is_restarted_and_its_state_shown() {
        let tasks = Arc::new(Tasks::default());
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let handle = tasks.spawn(
            "flaky",
            move || {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    match n {
                        0 => Err("first failure".to_string()),
                        1 => panic!("second failure"),
                        _ => Ok(()),
                    }
                }
            },
            || tokio::time::sleep(Duration::from_secs(10)),
        );
        // After the first failure: one retry pending with a 1 s backoff.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (_, status) = tasks.snapshot()[0].clone();
        assert_eq!(status.consecutive_failures, 1);
        assert_eq!(status.last_error.as_deref(), Some("first failure"));
        assert!(status.retry_at.is_some());
        // The panic is caught like an error (2 s backoff), then it succeeds.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let (name, status) = tasks.snapshot()[0].clone();
        assert_eq!(name, "flaky");
        assert_eq!(status.failures, 2);
        assert_eq!(status.consecutive_failures, 0);
        assert_eq!(status.last_error.as_deref(), Some("the task panicked"));
        assert!(status.last_ok_at.is_some() && status.retry_at.is_none());
        assert!(calls.load(Ordering::SeqCst) >= 3);
        // Healthy steps keep running at the pause's pace.
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert!(tasks.snapshot()[0].1.runs >= 5);
        handle.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn aborting_a_task_aborts_its_running_step() {
        /// Records that the step's future was dropped (aborted), not left running.
        struct Dropped(Arc<AtomicU32>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let tasks = Arc::new(Tasks::default());
        let dropped = Arc::new(AtomicU32::new(0));
        let flag = Arc::clone(&dropped);
        let handle = tasks.spawn(
            "stream",
            move || {
                let guard = Dropped(Arc::clone(&flag));
                async move {
                    // A stream that never ends.
                    let _guard = guard;
                    std::future::pending::<()>().await;
                    Ok(())
                }
            },
            || tokio::time::sleep(Duration::from_secs(1)),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(dropped.load(Ordering::SeqCst), 0, "the step is running");
        handle.abort();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the step was aborted with its task"
        );
        tasks.remove("stream");
        assert!(tasks.snapshot().is_empty());
    }
}
