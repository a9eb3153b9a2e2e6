//! What receivers ask of their timers in their answers' headers (API 1e),
//! carried out as any other change: a one-shot's next run through
//! [`TimerService::update`] (checked, the app's limits applied, its fire
//! planned) and a pause through the store, its reason kept and noted.

use xtimer_core::steering::{NotDone, Steering};
use xtimer_core::timer::{Schedule, Timer, TimerStatus};

use crate::error::ServiceError;
use crate::key::Actor;
use crate::key::TimerKey;
use crate::timer_service::TimerService;

#[async_trait::async_trait]
impl Steering for TimerService {
    async fn run_again_at(&self, timer: &Timer, run_at_ms: i64) -> Result<(), NotDone> {
        let key = TimerKey { id: timer.id, app: timer.app.clone(), proven: true, by: Actor::Receiver };
        let moved = self
            .update(&key, |stored, _now| {
                if stored.status != TimerStatus::Enabled {
                    return Err(ServiceError::invalid("runAt", "the timer is no longer enabled"));
                }
                let Schedule::Once { .. } = stored.schedule else {
                    return Err(ServiceError::invalid("runAt", "the timer is no longer a one-shot"));
                };
                let mut moved = stored.def.clone();
                moved.schedule = Schedule::Once { run_at_ms };
                Ok(moved)
            })
            .await;
        moved.map(drop).map_err(|err| NotDone(err.to_string()))
    }

    async fn pause(&self, timer: &Timer, reason: &str) -> Result<(), NotDone> {
        let now = self.0.clock.now_ms();
        match self.0.timers.pause_with_reason(timer.id, reason, now).await {
            // The store notes it (`pause`, by the receiver, with its reason).
            Ok(true) => Ok(()),
            Ok(false) => Err(NotDone("the timer is not enabled".into())),
            Err(err) => Err(NotDone(xtimer_core::error::error_chain(&err))),
        }
    }
}
