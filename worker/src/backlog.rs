//! [`Backlog`]: how many tasks this worker holds but has not reported yet.
//!
//! A poll reserves room before it calls hold_tasks and gives back what the
//! server did not return, so polls of several types at once never take the
//! backlog past its cap. Each task frees its slot once it is reported (or
//! handed back, or abandoned).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Tasks held and not yet reported, with a cap.
#[derive(Debug)]
pub struct Backlog {
    held: AtomicUsize,
    cap: usize,
}

impl Backlog {
    /// An empty backlog that holds at most `cap` tasks.
    pub fn new(cap: usize) -> Self {
        Self { held: AtomicUsize::new(0), cap }
    }

    /// Tasks held now (reserved included).
    pub fn len(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a poll now would be skipped.
    pub fn is_full(&self) -> bool {
        self.len() >= self.cap
    }

    /// Reserves room for up to `want` tasks and returns how many it
    /// reserved: `min(want, room)`, 0 when the backlog is full (skip the poll).
    pub fn reserve(&self, want: usize) -> usize {
        let mut got = 0;
        // A compare-and-swap loop, so two polls racing for the last slots
        // split them instead of both taking them.
        let _ = self.held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
            got = want.min(self.cap.saturating_sub(held));
            (got > 0).then_some(held + got)
        });
        got
    }

    /// Counts `n` more tasks whatever the cap (a server returned more than
    /// was reserved).
    pub fn add(&self, n: usize) {
        self.held.fetch_add(n, Ordering::AcqRel);
    }

    /// Frees `n` slots: tasks reported, or reserved and not returned.
    pub fn release(&self, n: usize) {
        let _ = self.held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| Some(held.saturating_sub(n)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_backlog_skips_the_poll_until_a_task_is_reported() {
        let b = Backlog::new(5);
        assert_eq!(b.reserve(3), 3);
        assert_eq!(b.reserve(3), 2, "only the room left");
        assert!(b.is_full());
        assert_eq!(b.reserve(3), 0, "full: skip");
        b.release(1);
        assert!(!b.is_full());
        assert_eq!(b.reserve(3), 1);
    }

    #[test]
    fn unreturned_reservations_are_given_back() {
        let b = Backlog::new(100);
        let got = b.reserve(100);
        b.release(got - 7); // the server returned 7 tasks
        assert_eq!(b.len(), 7);
        b.release(50);
        assert!(b.is_empty(), "never below zero");
    }

    #[test]
    fn racing_reservations_never_exceed_the_cap() {
        let b = std::sync::Arc::new(Backlog::new(1000));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || (0..500).map(|_| b.reserve(3)).sum::<usize>())
            })
            .collect();
        let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!((total, b.len()), (1000, 1000));
    }
}
