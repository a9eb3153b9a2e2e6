//! The node's timer wheel: items wake at their deadline millisecond.
//!
//! Deadlines are kept in an ordered map of millisecond slots, so the driver
//! sleeps exactly until the earliest one (not a 1-second poll) and wakes
//! everything due in one batch. An insert earlier than the earliest
//! deadline wakes the driver at once (mini-redis `purge_expired_tasks`).
//!
//! A driver may hand items over up to a `window` early: each wake then
//! takes the earliest deadline and everything due within the window after
//! it, so items that fall due a few milliseconds apart leave in one batch
//! and one wake-up (at 2,000 a second, one wake per window instead of one
//! per millisecond).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;
use xtimer_core::SharedClock;

/// Longest sleep when the wheel is empty; an insert wakes the driver anyway.
const IDLE: Duration = Duration::from_secs(3600);

/// Items waiting for their deadline (Unix milliseconds).
#[derive(Debug)]
pub struct Wheel<T> {
    slots: Mutex<BTreeMap<i64, Vec<T>>>,
    earlier: Notify,
}

impl<T: Send + 'static> Wheel<T> {
    /// An empty wheel.
    pub fn new() -> Self {
        Self { slots: Mutex::new(BTreeMap::new()), earlier: Notify::new() }
    }

    /// Adds items with their deadlines.
    pub fn insert_many(&self, items: impl IntoIterator<Item = (i64, T)>) {
        let mut slots = self.slots.lock().expect("wheel lock");
        let first_before = slots.first_key_value().map(|(d, _)| *d);
        let mut earliest = i64::MAX;
        for (deadline, item) in items {
            earliest = earliest.min(deadline);
            slots.entry(deadline).or_default().push(item);
        }
        if first_before.is_none_or(|first| earliest < first) {
            self.earlier.notify_one();
        }
    }

    /// Removes the given items, each looked for at its deadline; items
    /// not waiting (already due, never added) are ignored.
    pub fn remove_many(&self, items: impl IntoIterator<Item = (i64, T)>)
    where
        T: PartialEq,
    {
        let mut slots = self.slots.lock().expect("wheel lock");
        for (deadline, item) in items {
            if let Some(slot) = slots.get_mut(&deadline) {
                slot.retain(|waiting| *waiting != item);
                if slot.is_empty() {
                    slots.remove(&deadline);
                }
            }
        }
    }

    /// Removes and returns every item due at `now_ms`.
    pub fn pop_due(&self, now_ms: i64) -> Vec<T> {
        let mut slots = self.slots.lock().expect("wheel lock");
        let later = slots.split_off(&(now_ms + 1));
        let due = std::mem::replace(&mut *slots, later);
        due.into_values().flatten().collect()
    }

    /// The earliest deadline, if any.
    pub fn next_deadline(&self) -> Option<i64> {
        self.slots.lock().expect("wheel lock").first_key_value().map(|(d, _)| *d)
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.slots.lock().expect("wheel lock").values().map(Vec::len).sum()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.slots.lock().expect("wheel lock").is_empty()
    }
}

impl<T: Send + 'static> Default for Wheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Drives a [`Wheel`]: sends each batch of due items on `out`.
pub struct WheelDriver<T> {
    pub wheel: Arc<Wheel<T>>,
    pub clock: SharedClock,
    pub out: mpsc::Sender<Vec<T>>,
    /// How early, at most, an item is handed over, ms: a wake takes what
    /// falls due within this of now. 0: each at its own millisecond.
    pub window_ms: i64,
}

impl<T: Send + 'static> WheelDriver<T> {
    /// Wakes due items until `shutdown` or until `out` closes.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let now = self.clock.now_ms();
            let due = self.wheel.pop_due(now + self.window_ms);
            if !due.is_empty() {
                if self.out.send(due).await.is_err() {
                    break;
                }
                continue;
            }
            let wait = match self.wheel.next_deadline() {
                Some(deadline) => Duration::from_millis((deadline - now).max(0) as u64),
                None => IDLE,
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.wheel.earlier.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use xtimer_core::clock::TokioClock;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn items_wake_at_their_millisecond_in_order() {
        let t0 = 1_767_225_600_000;
        let clock: SharedClock = Arc::new(TokioClock::new(t0));
        let wheel = Arc::new(Wheel::new());
        let (tx, mut rx) = mpsc::channel(16);
        let shutdown = CancellationToken::new();
        wheel.insert_many([(t0 + 250, "b"), (t0 + 100, "a"), (t0 + 250, "c")]);
        tokio::spawn(
            WheelDriver { wheel: wheel.clone(), clock: clock.clone(), out: tx, window_ms: 0 }.run(shutdown.clone()),
        );

        assert_eq!(rx.recv().await.unwrap(), vec!["a"]);
        assert_eq!(clock.now_ms() - t0, 100);
        assert_eq!(rx.recv().await.unwrap(), vec!["b", "c"]);
        assert_eq!(clock.now_ms() - t0, 250);

        // An insert earlier than anything waiting wakes the driver at once.
        wheel.insert_many([(t0 + 10_000, "late")]);
        tokio::time::sleep(Duration::from_millis(5)).await;
        wheel.insert_many([(t0 + 300, "early")]);
        assert_eq!(rx.recv().await.unwrap(), vec!["early"]);
        assert_eq!(clock.now_ms() - t0, 300);
        // A past deadline is due immediately.
        wheel.insert_many([(t0, "past")]);
        assert_eq!(rx.recv().await.unwrap(), vec!["past"]);
        assert_eq!(clock.now_ms() - t0, 300);
        assert_eq!(wheel.len(), 1);
        wheel.remove_many([(t0 + 10_000, "late"), (t0 + 1, "never added")]);
        assert!(wheel.is_empty());
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_hands_over_what_falls_due_within_it_in_one_wake() {
        let t0 = 1_767_225_600_000;
        let clock: SharedClock = Arc::new(TokioClock::new(t0));
        let wheel = Arc::new(Wheel::new());
        let (tx, mut rx) = mpsc::channel(16);
        let shutdown = CancellationToken::new();
        wheel.insert_many([(t0 + 100, 1), (t0 + 101, 2), (t0 + 149, 3), (t0 + 150, 4), (t0 + 151, 5), (t0 + 400, 6)]);
        let driver = WheelDriver { wheel: wheel.clone(), clock: clock.clone(), out: tx, window_ms: 50 };
        tokio::spawn(driver.run(shutdown.clone()));

        // Woken at the earliest deadline, never before it; the window after it rides along.
        assert_eq!(rx.recv().await.unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(clock.now_ms() - t0, 100);
        assert_eq!(rx.recv().await.unwrap(), vec![5]);
        assert_eq!(clock.now_ms() - t0, 151);
        assert_eq!(rx.recv().await.unwrap(), vec![6]);
        assert_eq!(clock.now_ms() - t0, 400);
        // An item inserted within the window of now leaves at once.
        wheel.insert_many([(t0 + 430, 7)]);
        assert_eq!(rx.recv().await.unwrap(), vec![7]);
        assert_eq!(clock.now_ms() - t0, 400);
        shutdown.cancel();
    }
}
