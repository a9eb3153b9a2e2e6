//! One-shots by key (`dedupeKey`): what a create of a held key does.
//!
//! The store refuses a one-shot whose key a live timer of its app holds
//! (`Refusal::KeyHeld`: the holder is looked up under the app's usage
//! lock, and a unique index over live timers has the last word), so of any
//! number of concurrent creates of one key exactly one makes a timer. The
//! others do as their `onDuplicate` says: `reject` is a 409 naming the
//! holder, `keep` answers the holder's id and changes nothing, `replace`
//! gives the holder the create's definition and run time through the
//! update path (`TimerService::update_locked`: its fire made again as
//! `updateTimer` moving `runAt` makes it), the run time at most
//! `maxDelayMs` past the one the key's first create asked for.
//!
//! A replace needs the holder's fire still pending. Under the app's lock
//! it first deletes that fire, so that no node can claim it from then on.
//! If there was none because the fire is already under way (claimed or
//! ended, its timer not completed yet), the key is released from the
//! holder (`TimerRepo::release_dedupe_key`) and the create makes a new
//! timer, as it would a moment later, once the holder completed.
//!
//! Concurrent replaces of one key on this node are coalesced: a replace
//! that finds a newer one of its key waiting behind it leaves the holder
//! to that one (whose definition would replace its own at once) and
//! answers as replaced, so a burst of replaces costs about one update per
//! turn of the app's lock rather than one per call.

use xtimer_core::error::error_chain;
use xtimer_core::fire::FireStatus;
use xtimer_core::timer::{NewTimer, OnDuplicate, Schedule, Timer, TimerStatus};
use xtimer_store::FireWindow;

use crate::error::{Result, ServiceError};
use crate::key::{Actor, TimerKey};
use crate::replaces::Entered;
use crate::timer_service::TimerService;

/// Most times a keyed create goes round (the key taken, freed, contended)
/// before it answers [`ServiceError::KeyBusy`].
const KEY_TRIES: usize = 8;

/// The history's action of a replace.
const REPLACE: &str = "replace";

/// What a create did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// It made this timer.
    New(Box<Timer>),
    /// Timer `id` holds the create's `dedupeKey` and was left as it was
    /// (`onDuplicate: keep`).
    Kept(i64),
    /// Timer `id` held the create's `dedupeKey` and took its definition
    /// and run time (`onDuplicate: replace`).
    Replaced(i64),
}

impl Created {
    /// The id of the timer made, kept or replaced.
    pub fn id(&self) -> i64 {
        match self {
            Self::New(timer) => timer.id,
            Self::Kept(id) | Self::Replaced(id) => *id,
        }
    }
}

/// The refusal of `timer`, whose key live timer `id` holds.
pub(crate) fn held(timer: &NewTimer, id: i64) -> ServiceError {
    let key = timer.dedupe.as_ref().map(|d| d.key.clone()).unwrap_or_default();
    ServiceError::KeyHeld { app: timer.app.clone(), key, id }
}

/// The refusal of `timer`, whose key an earlier create of its batch asked
/// for and did not get: tried again.
pub(crate) fn contended(timer: &NewTimer) -> ServiceError {
    let key = timer.dedupe.as_ref().map(|d| d.key.clone()).unwrap_or_default();
    ServiceError::KeyBusy { app: timer.app.clone(), key }
}

impl TimerService {
    /// Creates `timer`, which gives a `dedupeKey`, or does as its
    /// `onDuplicate` says with the key's holder.
    pub(crate) async fn create_keyed(&self, timer: NewTimer, by: &Actor) -> Result<Created> {
        let on_duplicate = timer.dedupe.as_ref().map(|d| d.on_duplicate).unwrap_or_default();
        for _ in 0..KEY_TRIES {
            match self.0.creates.create(self, timer.clone(), by).await {
                Ok(created) => return Ok(Created::New(Box::new(created))),
                Err(ServiceError::KeyBusy { .. }) => continue,
                Err(ServiceError::KeyHeld { id, .. }) if on_duplicate == OnDuplicate::Keep => {
                    return Ok(Created::Kept(id))
                }
                Err(ServiceError::KeyHeld { id, .. }) if on_duplicate == OnDuplicate::Replace => {
                    match self.replace(id, &timer, by).await? {
                        Some(id) => return Ok(Created::Replaced(id)),
                        // The key was freed: created again.
                        None => continue,
                    }
                }
                Err(err) => return Err(err),
            }
        }
        Err(contended(&timer))
    }

    /// Gives `holder`, the live timer holding `timer`'s key, `timer`'s
    /// definition and run time (clamped to the key's first run time plus
    /// `maxDelayMs`); its id, or none when the key turned out free (the
    /// holder ended or was deleted, or its fire is under way: then the key
    /// is released from it).
    async fn replace(&self, holder: i64, timer: &NewTimer, by: &Actor) -> Result<Option<i64>> {
        let Some(dedupe) = &timer.dedupe else { return Ok(None) };
        let replaces = &self.0.replaces;
        let entered =
            Entered { replaces, app: &timer.app, key: &dedupe.key, ticket: replaces.enter(&timer.app, &dedupe.key) };
        let _app_lock = self.0.app_locks.lock(&timer.app).await;
        if replaces.superseded(entered.app, entered.key, entered.ticket) {
            return Ok(Some(holder));
        }
        let key = TimerKey { id: holder, app: timer.app.clone(), proven: false, by: by.clone() };
        let stored = match self.get(&key).await {
            Ok(stored) => stored,
            Err(ServiceError::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(err),
        };
        let live = matches!(stored.status, TimerStatus::Enabled | TimerStatus::Disabled);
        let Some(first_run_ms) = stored.dedupe.as_ref().filter(|d| live && d.key == dedupe.key).map(|d| d.first_run_ms)
        else {
            return Ok(None);
        };
        // Its pending fire first: from here on no node can claim it.
        let removed = self.0.fires.delete_pending_from(holder, i64::MIN).await?;
        if removed == 0 && stored.status == TimerStatus::Enabled && self.fire_under_way(&stored).await? {
            self.0.timers.release_dedupe_key(holder).await?;
            return Ok(None);
        }
        let mut new = timer.clone();
        if let Schedule::Once { run_at_ms } = &mut new.schedule {
            let clamped = dedupe.clamped(first_run_ms, *run_at_ms);
            if clamped < *run_at_ms {
                *run_at_ms = clamped.max(self.0.clock.now_ms());
            }
        }
        match self.update_locked(&key, |_, _| Ok::<_, ServiceError>(new), true, REPLACE).await {
            Ok(replaced) => Ok(Some(replaced.id)),
            Err(err) => {
                if removed > 0 {
                    self.plan_again(&stored).await;
                }
                Err(err)
            }
        }
    }

    /// Whether the fire of one-shot `timer` is claimed or ended.
    async fn fire_under_way(&self, timer: &Timer) -> Result<bool> {
        let Schedule::Once { run_at_ms } = timer.schedule else { return Ok(false) };
        let (fires, _) = self.0.fires.list_fires_in(timer.id, None, FireWindow::All, 0, 100).await?;
        Ok(fires.iter().any(|f| !f.manual && f.scheduled_ms == run_at_ms && f.status != FireStatus::Pending))
    }

    /// Plans the fire of `stored` again, whose pending fire a replace that
    /// then failed deleted, if its definition is still the one stored.
    async fn plan_again(&self, stored: &Timer) {
        let again = match self.0.timers.get_timer(stored.id).await {
            Ok(Some(now)) if now.modify_time == stored.modify_time && now.status == TimerStatus::Enabled => {
                self.0.expander.expand_timer(&now).await.map(|_| ())
            }
            Ok(_) => Ok(()),
            Err(err) => Err(err.into()),
        };
        if let Err(err) = again {
            tracing::error!(
                timer_id = stored.id,
                error = %error_chain(&err),
                "Planning a timer's fire again after a failed replace failed."
            );
        }
    }
}
