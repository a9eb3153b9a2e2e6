//! Fires of timers whose notify creates an asyncflow task instead of
//! calling a URL. The executor knows only this trait; the node implements
//! it over the task engine.

use async_trait::async_trait;
use xtimer_core::fire::FireKey;
use xtimer_core::timer::AsyncflowNotify;

/// Creates the task of one fire.
#[async_trait]
pub trait TaskCreator: Send + Sync {
    /// Creates the task `notify` describes for fire `key` of a timer of
    /// `app`, and returns its task id. Called again for the same fire (a
    /// retry, a second node), it creates no second task. The error is a
    /// message for the fire's record.
    async fn create_task(&self, app: &str, notify: &AsyncflowNotify, key: FireKey) -> Result<String, String>;
}
