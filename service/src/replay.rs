//! `replayFires`: fires that failed or were missed (or the statuses
//! asked) in a time range, of one timer or of the timers a selector
//! matches, sent again oldest first at a bounded rate, each with its
//! original `Idempotency-Key` and `X-Xtimer-Replay: 1`.
//!
//! The replay is stored, not held by a node: each fire is made pending
//! again with the time it may be sent (the way a backfill paces its
//! fires), so the reconciler of whichever node is alive sends it, after a
//! crash too. The record takes the new outcome.

use std::collections::BTreeMap;

use serde_json::json;
use xtimer_core::fire::FireStatus;
use xtimer_core::timer::TimerStatus;
use xtimer_store::TimerQuery;

use crate::error::{Result, ServiceError};
use crate::history::Changes;
use crate::key::Actor;
use crate::key::TimerKey;
use crate::many::Search;
use crate::timer_service::TimerService;

/// What `replay` is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// One timer, or else the timers `search` matches.
    pub id: Option<i64>,
    /// Which timers (when no `id`): by selector, name, status.
    pub search: Search,
    /// Fire statuses to replay; failed and missed when empty.
    pub statuses: Vec<i64>,
    /// Scheduled from (included), Unix ms.
    pub from_ms: i64,
    /// Scheduled until (excluded), Unix ms.
    pub to_ms: i64,
    /// Fires sent per second; [`DEFAULT_RATE`] when absent.
    pub rate_per_sec: Option<i64>,
    /// Count only.
    pub dry_run: bool,
}

/// What a replay did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Fires sent again (on a dry run: that would be).
    pub count: u64,
    /// Matching fires of deleted timers, left out.
    pub left_out: u64,
}

/// Fires a replay sends per second by default.
pub const DEFAULT_RATE: i64 = 100;
/// The most a replay may send per second.
pub const MAX_RATE: i64 = 10_000;
/// The widest time range of one replay: 7 days.
pub const MAX_RANGE_MS: i64 = 7 * 86_400_000;
/// Most fires one replay sends.
pub const MAX_FIRES: u32 = 100_000;
/// Timers whose fires are looked up per query.
const TIMERS_PER_QUERY: usize = 500;

impl TimerService {
    /// Sends again the fires of `app` that `replay` names, whatever their
    /// timers' status now (disabled, completed, paused by failures), with
    /// each timer's current definition; a deleted timer's are left out
    /// and counted.
    pub async fn replay(&self, app: &str, replay: &Replay, by: &Actor) -> Result<Replayed> {
        crate::checks::check_app(app)?;
        let statuses = statuses(&replay.statuses)?;
        let (from, to) = (replay.from_ms, replay.to_ms);
        if from >= to {
            return Err(ServiceError::invalid("to", "must be after `from`"));
        }
        if to - from > MAX_RANGE_MS {
            return Err(ServiceError::invalid("to", "the range may be at most 7 days (604800000 ms)"));
        }
        let rate = replay.rate_per_sec.unwrap_or(DEFAULT_RATE);
        if !(1..=MAX_RATE).contains(&rate) {
            return Err(ServiceError::invalid("ratePerSec", format!("must be 1 to {MAX_RATE}, got {rate}")));
        }
        let timer_ids = match replay.id {
            Some(id) => match self.0.timers.get_timer(id).await? {
                // A deleted timer's fires are left out, and counted.
                Some(timer) if timer.status == TimerStatus::Deleted && timer.app == app => Vec::new(),
                _ => {
                    let key = TimerKey { id, app: app.to_owned(), proven: true, by: by.clone() };
                    vec![self.get(&key).await?.id]
                }
            },
            None => self.matching_ids(app, &replay.search).await?,
        };
        // Counted for one timer or the whole app (a selector names no deleted timer).
        let left_out = if replay.id.is_some() || replay.search.is_empty() {
            self.0.fires.count_of_deleted(app, replay.id, &statuses, from, to).await?
        } else {
            0
        };
        let mut fires = Vec::new();
        for ids in timer_ids.chunks(TIMERS_PER_QUERY) {
            fires.extend(self.0.fires.replayable(ids, &statuses, from, to, MAX_FIRES).await?);
        }
        fires.sort_by_key(|(task_id, _, run_ms)| (*run_ms, *task_id));
        fires.truncate(MAX_FIRES as usize);
        if replay.dry_run || fires.is_empty() {
            return Ok(Replayed { count: fires.len() as u64, left_out });
        }
        let now = self.0.clock.now_ms();
        let first = now + self.0.config.paced_lead_ms as i64;
        let gap_ms = 1_000.0 / rate as f64;
        let paced: Vec<(i64, i64)> =
            fires.iter().enumerate().map(|(i, (task_id, ..))| (*task_id, first + (i as f64 * gap_ms) as i64)).collect();
        let count = self.0.fires.replay(&paced, &statuses, now).await?;
        self.note_replays(app, &fires, from, to, by).await;
        Ok(Replayed { count, left_out })
    }

    /// The ids of `app`'s timers `search` matches.
    async fn matching_ids(&self, app: &str, search: &Search) -> Result<Vec<i64>> {
        let query: TimerQuery = search.query()?;
        let mut ids = Vec::new();
        let mut after = 0;
        loop {
            let page = self.0.timers.find_timer_ids(app, &query, after, 1_000).await?;
            let Some(&(last, _)) = page.last() else { return Ok(ids) };
            after = last;
            ids.extend(page.into_iter().map(|(id, _)| id));
        }
    }

    /// Notes, per timer, how many of its fires were replayed.
    async fn note_replays(&self, app: &str, fires: &[(i64, i64, i64)], from: i64, to: i64, by: &Actor) {
        let mut per_timer: BTreeMap<i64, usize> = BTreeMap::new();
        for (_, timer_id, _) in fires {
            *per_timer.entry(*timer_id).or_default() += 1;
        }
        for (id, count) in per_timer {
            let mut changes = Changes::new();
            changes.insert("window".into(), json!([null, [from, to]]));
            changes.insert("count".into(), json!([null, count]));
            self.note(id, app, "replay", by, changes).await;
        }
    }
}

/// The fire statuses asked for: failed and missed when none.
fn statuses(asked: &[i64]) -> Result<Vec<FireStatus>> {
    if asked.is_empty() {
        return Ok(vec![FireStatus::Failed, FireStatus::Missed]);
    }
    asked
        .iter()
        .map(|code| match FireStatus::from_code(*code) {
            Some(s @ (FireStatus::Succeeded | FireStatus::Failed | FireStatus::Skipped | FireStatus::Missed)) => Ok(s),
            _ => Err(ServiceError::invalid(
                "status",
                format!("must list ended fire statuses (2 succeeded, 3 failed, 4 skipped, 5 missed), got {code}"),
            )),
        })
        .collect()
}
