//! What a caller reads of timers in one call: a timer with what it shows
//! (`getTimer`), and a page of a search with each timer's next fire
//! (`getAppTimers`).

use xtimer_core::timer::Timer;

use crate::error::Result;
use crate::explain::TimerStats;
use crate::key::Page;
use crate::key::TimerKey;
use crate::many::Search;
use crate::timer_service::TimerService;

/// One timer as `getTimer` shows it.
#[derive(Debug, Clone)]
pub struct TimerDetail {
    /// The timer.
    pub timer: Timer,
    /// Its next scheduled time that fires, if enabled and any is left.
    pub next_fire: Option<i64>,
    /// How many scheduled times its run limit leaves; `None` without a limit.
    pub fires_left: Option<u64>,
    /// Its figures over the last day.
    pub stats: TimerStats,
}

/// A page of a search: each timer with its next fire, and how many match.
#[derive(Debug, Clone, Default)]
pub struct TimerPage {
    /// The timers of the page, by id, each with its next fire.
    pub timers: Vec<(Timer, Option<i64>)>,
    /// How many timers match, over every page.
    pub total: u64,
}

impl TimerService {
    /// The timer `key` names (as [`Self::get`] finds it) with its next
    /// fire, what its run limit leaves and its figures.
    pub async fn detail(&self, key: &TimerKey) -> Result<TimerDetail> {
        let timer = self.get(key).await?;
        let next_fire = self.next_fire(&timer, self.0.clock.now_ms()).await?;
        let fires_left = self.fires_left(&timer).await?;
        let stats = self.stats(&timer).await?;
        Ok(TimerDetail { timer, next_fire, fires_left, stats })
    }

    /// A page of `app`'s timers that are not deleted and match `search`,
    /// each with its next fire. One read of the store; the next fires are
    /// worked out in memory (the calendars a timer excludes come from the
    /// planner's cache).
    pub async fn page(&self, app: &str, search: &Search, page: Page) -> Result<TimerPage> {
        let (found, total) = self.search(app, search, page).await?;
        let now = self.0.clock.now_ms();
        let mut timers = Vec::with_capacity(found.len());
        for timer in found {
            let next = self.next_fire(&timer, now).await?;
            timers.push((timer, next));
        }
        Ok(TimerPage { timers, total })
    }
}
