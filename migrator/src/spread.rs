//! Load-aware placement of spread fires
//! ([`TimerSpec::spread_ms`](xtimer_core::spec::TimerSpec::spread_ms)).
//!
//! Each fire of a timer with a spread is sent at the second of
//! `[scheduled, scheduled + spread)` with the fewest fires already
//! planned (every app's, read from the database, so every node sees the
//! same load), the earliest on a tie. The window also ends before the
//! timer's next scheduled time, so a timer's fires never overtake one
//! another. A batch is placed in scheduled-time order, each fire adding to
//! the load the next one sees.
//!
//! The load counts every placement recorded ([`FireRepo::spread_load`]),
//! not only the fire rows that follow them, and reading it, choosing and
//! recording are one step under a cluster lock: two nodes planning the
//! same minute at once place one after the other, the second over the
//! first one's choices. The lock only keeps the profile flat: the choice
//! is recorded by fire identity ([`FireRepo::place_spread`]) and the first
//! one recorded wins, so a scheduled time is one fire even when the lock
//! lapsed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use xtimer_core::timer::Timer;
use xtimer_store::{FireRepo, LockStore};

use crate::Result;

/// How long a placement holds the lock at most.
const LOCK_TTL_MS: u64 = 10_000;
/// How long a placement waits for the lock before placing without it.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// One spread fire to place: its timer, scheduled time and window end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub timer_id: i64,
    pub scheduled_ms: i64,
    /// End of its window, exclusive.
    pub until_ms: i64,
}

impl Candidate {
    /// The fire of `timer` scheduled at `scheduled_ms`, with its window.
    pub fn of(timer: &Timer, scheduled_ms: i64) -> Self {
        let spread = timer.timing.spread_ms as i64;
        let next = timer.schedule.next_fire_at_or_after(scheduled_ms.saturating_add(1)).unwrap_or(i64::MAX);
        Self { timer_id: timer.id, scheduled_ms, until_ms: scheduled_ms.saturating_add(spread).min(next) }
    }
}

/// Start (Unix ms) of the second `t_ms` falls in.
fn second_of(t_ms: i64) -> i64 {
    t_ms - t_ms.rem_euclid(1000)
}

/// Chooses each candidate's send time over `load` (fires per second,
/// by second start), adding each choice to it. Pure: the planner's core.
pub fn choose(candidates: &mut [Candidate], load: &mut HashMap<i64, u64>) -> Vec<(i64, i64, i64)> {
    candidates.sort_unstable_by_key(|c| (c.scheduled_ms, c.timer_id));
    let mut chosen = Vec::with_capacity(candidates.len());
    for c in candidates.iter() {
        let mut best = c.scheduled_ms;
        let mut best_load = u64::MAX;
        let mut t = c.scheduled_ms;
        while t < c.until_ms {
            let n = load.get(&second_of(t)).copied().unwrap_or(0);
            if n < best_load {
                (best, best_load) = (t, n);
                if n == 0 {
                    break;
                }
            }
            t += 1000;
        }
        *load.entry(second_of(best)).or_default() += 1;
        chosen.push((c.timer_id, c.scheduled_ms, best));
    }
    chosen
}

/// Places spread fires: reads the planned load, chooses, records.
#[derive(Clone)]
pub struct Placer {
    fires: Arc<dyn FireRepo>,
    locks: Arc<dyn LockStore>,
    lock_key: String,
    token: String,
}

impl Placer {
    /// A placer over `fires`, serialised by `locks` under `lock_key`.
    pub fn new(fires: Arc<dyn FireRepo>, locks: Arc<dyn LockStore>, lock_key: String, token: String) -> Self {
        Self { fires, locks, lock_key, token }
    }

    /// The send time of each candidate, by `(timer_id, scheduled_ms)`:
    /// chosen and recorded while holding the lock.
    pub async fn place(&self, mut candidates: Vec<Candidate>) -> Result<HashMap<(i64, i64), i64>> {
        if candidates.is_empty() {
            return Ok(HashMap::new());
        }
        let locked = self.lock().await;
        let placed = self.place_locked(&mut candidates).await;
        if locked {
            if let Err(err) = self.locks.release(&self.lock_key, &self.token).await {
                tracing::debug!(error = %err, "Releasing the spread lock failed; it lapses on its own.");
            }
        }
        placed
    }

    /// Reads the load (placements included), chooses, records.
    async fn place_locked(&self, candidates: &mut [Candidate]) -> Result<HashMap<(i64, i64), i64>> {
        let from = candidates.iter().map(|c| c.scheduled_ms).min().unwrap_or(0);
        let to = candidates.iter().map(|c| c.until_ms).max().unwrap_or(0);
        let mut load: HashMap<i64, u64> =
            self.fires.spread_load(second_of(from), second_of(to) + 1000).await?.into_iter().collect();
        let chosen = choose(candidates, &mut load);
        Ok(self.fires.place_spread(&chosen).await?)
    }

    /// Takes the cluster's spread lock, waiting a while for it; false when
    /// it could not be had (placed anyway: the profile may be less flat).
    async fn lock(&self) -> bool {
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        let mut wait = Duration::from_millis(2);
        loop {
            match self.locks.acquire(&self.lock_key, &self.token, LOCK_TTL_MS).await {
                Ok(true) => return true,
                Ok(false) if tokio::time::Instant::now() < deadline => {}
                Ok(false) => return false,
                Err(err) => {
                    tracing::debug!(error = %err, "The spread lock is out of reach; placing without it.");
                    return false;
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_790_000_040_000;

    #[test]
    fn each_fire_goes_to_the_emptiest_second_earliest_on_a_tie() {
        let mut load = HashMap::from([(T0, 5), (T0 + 1000, 1)]);
        let mut c: Vec<Candidate> =
            (1..=4).map(|id| Candidate { timer_id: id, scheduled_ms: T0, until_ms: T0 + 3_000 }).collect();
        let chosen = choose(&mut c, &mut load);
        let sends: Vec<i64> = chosen.iter().map(|c| c.2 - T0).collect();
        assert_eq!(sends, vec![2_000, 1_000, 2_000, 1_000]);
        assert_eq!(load[&T0], 5, "the full second got nothing");
    }

    #[test]
    fn three_thousand_fires_over_a_minute_are_flat() {
        let mut load = HashMap::new();
        let mut c: Vec<Candidate> =
            (0..3_000).map(|id| Candidate { timer_id: id, scheduled_ms: T0, until_ms: T0 + 60_000 }).collect();
        let chosen = choose(&mut c, &mut load);
        assert!(chosen.iter().all(|(_, s, t)| *t >= *s && *t < s + 60_000));
        assert_eq!(load.len(), 60);
        assert!(load.values().all(|n| *n == 50), "{load:?}");
    }

    #[test]
    fn a_window_ends_before_the_next_scheduled_time() {
        use xtimer_core::timer::*;
        let schedule = Schedule::Every { every_ms: 2_000, anchor_ms: T0, timezone: "UTC".into() };
        let notify = Notify::Asyncflow(AsyncflowNotify {
            task_type: "t".into(),
            task_stage: String::new(),
            context: String::new(),
        });
        let mut timer = NewTimer::enabled("a", "n", schedule, notify).stored(1, T0);
        timer.timing = Timing { spread_ms: 60_000, ..Timing::default() };
        assert_eq!(Candidate::of(&timer, T0).until_ms, T0 + 2_000);
        assert_eq!(
            Candidate::of(
                &{
                    timer.timing.spread_ms = 1_500;
                    timer
                },
                T0
            )
            .until_ms,
            T0 + 1_500
        );
    }
}
