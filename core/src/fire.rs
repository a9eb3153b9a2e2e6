//! One fire of a timer: a `t_timer_task` row and the key that makes it unique.

use std::fmt;

/// `stats` of `getTimer`: the last 24 hours of the timer's fires.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimerStats {
    /// Fires due in the window, every status.
    pub fires: u64,
    /// Succeeded.
    pub succeeded: u64,
    /// Failed.
    pub failed: u64,
    /// Missed by the misfire policy.
    pub missed: u64,
    /// Median lateness of the fires sent, ms (null: none sent).
    pub late_p50_ms: Option<i64>,
    /// 99th percentile of that lateness, ms.
    pub late_p99_ms: Option<i64>,
}

/// Status of a fire. Numbers are the wire and storage values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FireStatus {
    /// Waiting for its time.
    Pending = 0,
    /// Claimed by a node, which holds a lease on it.
    Running = 1,
    /// The callback answered 2xx.
    Succeeded = 2,
    /// Every attempt failed.
    Failed = 3,
    /// Not fired because the timer was disabled or deleted.
    Skipped = 4,
    /// Not fired because its time passed and the misfire policy said so.
    Missed = 5,
}

impl FireStatus {
    /// The storage value.
    pub fn code(self) -> i64 {
        self as i64
    }
    /// Parses a storage value.
    pub fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            0 => Self::Pending,
            1 => Self::Running,
            2 => Self::Succeeded,
            3 => Self::Failed,
            4 => Self::Skipped,
            5 => Self::Missed,
            _ => return None,
        })
    }
    /// Whether the fire is over.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }
}

/// The idempotency key of a fire: (timer, run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FireKey {
    pub timer_id: i64,
    /// When it is sent, Unix milliseconds: the scheduled time, unless the
    /// timer spreads its fires (then the time chosen, unique per timer too).
    pub run_ms: i64,
}

impl FireKey {
    /// Parses a shard member `{timer_id}_{run_ms}`.
    pub fn parse_member(member: &str) -> Option<Self> {
        let (id, run) = member.split_once('_')?;
        Some(Self { timer_id: id.parse().ok()?, run_ms: run.parse().ok()? })
    }

    /// `{timer_id}_{run_ms}`, as [`Display`](fmt::Display) writes it, made
    /// without the formatter (once per fire, on the hot path).
    pub fn member(&self) -> String {
        let mut out = String::with_capacity(41);
        out.push_str(itoa::Buffer::new().format(self.timer_id));
        out.push('_');
        out.push_str(itoa::Buffer::new().format(self.run_ms));
        out
    }
}

/// `{timer_id}_{run_ms}`: the shard member and the `Idempotency-Key` header.
impl fmt::Display for FireKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.timer_id, self.run_ms)
    }
}

/// A stored fire (`t_timer_task` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fire {
    pub task_id: i64,
    pub timer_id: i64,
    pub app: String,
    /// When it is sent, Unix milliseconds: its scheduled time, or later
    /// when the timer spreads its fires (`runTimer`).
    pub run_ms: i64,
    /// Its scheduled time, its identity (`scheduledTimer`).
    pub scheduled_ms: i64,
    pub status: FireStatus,
    /// HTTP attempts made so far.
    pub attempt: u32,
    /// Response status and the first bytes of the body, or the error.
    pub output: String,
    /// How late the first attempt was sent, milliseconds.
    pub cost_time: i64,
    /// Made by `triggerTimer`, not by the schedule.
    pub manual: bool,
    /// Sent again by `replayFires`.
    pub replayed: bool,
    pub create_time: i64,
    pub modify_time: i64,
}

/// A fire this node has claimed: it holds the lease under `owner`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedFire {
    pub task_id: i64,
    pub key: FireKey,
    /// Its scheduled time: `key.run_ms` unless the timer spreads its fires.
    pub scheduled_ms: i64,
    /// Attempts made before this claim.
    pub attempt: u32,
    /// The claim's fencing token; results are written only under it.
    pub owner: String,
    /// Made by `triggerTimer`, not by the schedule.
    pub manual: bool,
    /// Sent again by `replayFires` (its callback says so: `X-Xtimer-Replay: 1`).
    pub replay: bool,
    /// The timer's `modify_time` when the fire was claimed: a definition
    /// read before it is stale.
    pub timer_modified: i64,
}

impl ClaimedFire {
    /// The `Idempotency-Key` of the fire: `{timer_id}_{scheduled_ms}` for
    /// a scheduled fire (sent later when spread, its key is still its
    /// scheduled time), `{timer_id}_{run_ms}_manual` for a triggered one,
    /// so the two can never be mistaken for each other.
    pub fn idempotency_key(&self) -> String {
        let mut key = FireKey { timer_id: self.key.timer_id, run_ms: self.scheduled_ms }.member();
        if self.manual {
            key.push_str("_manual");
        }
        key
    }
}

/// In-process feed of fires just indexed, so the node's trigger can pick up
/// late additions to a shard it holds without waiting for its next re-poll.
pub type FireFeed = tokio::sync::broadcast::Sender<std::sync::Arc<[FireKey]>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_round_trips() {
        let key = FireKey { timer_id: 42, run_ms: 1_700_000_000_123 };
        assert_eq!(key.to_string(), "42_1700000000123");
        assert_eq!(FireKey::parse_member(&key.to_string()), Some(key));
        assert_eq!(FireKey::parse_member("42"), None);
        assert_eq!(FireKey::parse_member("a_1"), None);
        let negative = FireKey { timer_id: -7, run_ms: i64::MIN };
        assert_eq!(negative.member(), negative.to_string(), "member() writes what Display writes");
    }

    #[test]
    fn a_manual_fire_has_its_own_idempotency_key() {
        let fire = |manual| ClaimedFire {
            task_id: 1,
            key: FireKey { timer_id: 42, run_ms: 1_700_000_000_123 },
            scheduled_ms: 1_700_000_000_123,
            attempt: 0,
            owner: "n:1".into(),
            manual,
            replay: false,
            timer_modified: 0,
        };
        assert_eq!(fire(false).idempotency_key(), "42_1700000000123");
        assert_eq!(fire(true).idempotency_key(), "42_1700000000123_manual");
    }
}
