//! The names of the headers xtimer sends with a callback, lower case.

/// `t=<unix secs>,v1=<hex>,v2=<hex>`: see [`signature`](crate::signature).
pub const SIGNATURE: &str = "x-xtimer-signature";
/// The timer's id.
pub const TIMER_ID: &str = "x-xtimer-timer-id";
/// When the fire was sent, Unix milliseconds.
pub const RUN_TIME: &str = "x-xtimer-run-time";
/// The fire's scheduled time, Unix milliseconds.
pub const SCHEDULED_TIME: &str = "x-xtimer-scheduled-time";
/// `{timerId}_{scheduledMs}`, the same on every attempt of one fire.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// `1` on a fire sent again by `replayFires`.
pub const REPLAY: &str = "x-xtimer-replay";
/// Which attempt this is, 1 first.
pub const ATTEMPT: &str = "x-xtimer-attempt";
