//! From an [`Outcome`] to the [`TaskData`] set_task sends: pure, so the
//! retry progression is tested without a server.
//!
//! The status and order_time rules are `xtimer_asyncflow::retry`'s, the
//! same code the server's governance runs, so a Rust worker, a Go worker
//! and a timed-out task all back off alike (API.md, "Worker retry rule").
//!
//! The task's `schedule_log` is JSON shaped like the Go worker's
//! `ScheduleLog{LastData, HistoryDatas}` of `ScheduleData{TraceId, ErrMsg,
//! Cost}`, with the stage, the outcome and the times added, so tools that
//! read Go workers' logs read ours.

use xtimer_asyncflow::retry::{apply_failure, apply_next_stage};
pub use xtimer_asyncflow::schedule_log::{ScheduleData, ScheduleLog, HISTORY_LEN};
use xtimer_asyncflow::wire::{rfc3339, TaskData, TaskStatus};

use crate::handler::Outcome;

/// Longest error text kept in a schedule_log entry, in bytes.
pub const MAX_ERR_LEN: usize = 512;

/// One run of a handler: what the schedule_log records besides the outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Identifies the attempt in logs.
    pub trace_id: String,
    /// Unix milliseconds when the handler started.
    pub start_ms: i64,
    /// Unix milliseconds when it returned.
    pub end_ms: i64,
}

/// The set_task body for a held task whose handler returned `outcome`.
///
/// `cfg_max_retry_interval` is the type's cap on a doubling retry interval
/// (from the cfg list; 0 when unknown), `now` is Unix seconds.
/// - `Next`: status 1, the new stage and context, order_time = now - priority.
/// - `Done`: status 3, the final context if given.
/// - `Retry`: the retry rule (status 1 later, or 4 with retries spent).
/// - `Fatal`: status 4.
pub fn report(
    held: &TaskData,
    outcome: &Outcome,
    cfg_max_retry_interval: i64,
    now: i64,
    attempt: &Attempt,
) -> TaskData {
    let mut task = TaskData { create_time: None, modify_time: None, ..held.clone() };
    let label = match outcome {
        Outcome::Next { stage, context } => {
            task.task_stage = stage.clone();
            task.context = context.clone();
            apply_next_stage(&mut task, now);
            "next"
        }
        Outcome::Done { context } => {
            if let Some(context) = context {
                task.context = context.clone();
            }
            task.status = TaskStatus::Success.code();
            "done"
        }
        Outcome::Retry(_) => {
            apply_failure(&mut task, cfg_max_retry_interval, now);
            "retry"
        }
        Outcome::Fatal(_) => {
            task.status = TaskStatus::Failed.code();
            "fatal"
        }
    };
    let mut log = ScheduleLog::parse(&held.schedule_log);
    log.push(ScheduleData {
        trace_id: attempt.trace_id.clone(),
        err_msg: truncate(outcome.error().unwrap_or_default(), MAX_ERR_LEN),
        cost: format!("{}ms", (attempt.end_ms - attempt.start_ms).max(0)),
        stage: held.task_stage.clone(),
        outcome: label.into(),
        start_time: rfc3339(attempt.start_ms),
        end_time: rfc3339(attempt.end_ms),
    });
    task.schedule_log = serde_json::to_string(&log).unwrap_or_default();
    task
}

/// The set_task body that gives a held task back untouched, for a worker
/// that stops before it ran it: pending again at its old order_time, no
/// retry counted, so the next worker takes it first.
pub fn hand_back(held: &TaskData) -> TaskData {
    TaskData { status: TaskStatus::Pending.code(), create_time: None, modify_time: None, ..held.clone() }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    fn held() -> TaskData {
        TaskData {
            task_id: "u_t_1".into(),
            task_type: "t".into(),
            task_stage: "fetch".into(),
            status: 2,
            priority: Some(5),
            max_retry_num: 3,
            max_retry_interval: 10,
            context: "{}".into(),
            order_time: NOW - 100,
            create_time: Some("2024-01-01T00:00:00Z".into()),
            ..Default::default()
        }
    }

    fn attempt() -> Attempt {
        Attempt { trace_id: "tr".into(), start_ms: NOW * 1000, end_ms: NOW * 1000 + 7 }
    }

    #[test]
    fn next_stage_is_pending_now_less_priority_with_new_stage_and_context() {
        let out = report(
            &held(),
            &Outcome::Next { stage: "transform".into(), context: "{\"a\":1}".into() },
            60,
            NOW,
            &attempt(),
        );
        assert_eq!((out.status, out.order_time), (1, NOW - 5));
        assert_eq!((out.task_stage.as_str(), out.context.as_str()), ("transform", "{\"a\":1}"));
        assert_eq!((out.crt_retry_num, out.max_retry_interval), (0, 10));
        assert_eq!(out.create_time, None);
        let log = ScheduleLog::parse(&out.schedule_log);
        assert_eq!(log.last_data.stage, "fetch");
        assert_eq!(log.last_data.outcome, "next");
        assert_eq!(log.last_data.cost, "7ms");
        assert_eq!(log.last_data.err_msg, "");
    }

    #[test]
    fn done_is_success_and_keeps_or_replaces_context() {
        let out = report(&held(), &Outcome::done(), 60, NOW, &attempt());
        assert_eq!((out.status, out.context.as_str(), out.order_time), (3, "{}", NOW - 100));
        let out = report(&held(), &Outcome::Done { context: Some("r".into()) }, 60, NOW, &attempt());
        assert_eq!((out.status, out.context.as_str()), (3, "r"));
    }

    #[test]
    fn retries_double_up_to_the_cfg_cap_then_fail() {
        let mut task = held();
        let mut seen = Vec::new();
        for _ in 0..4 {
            task = report(&task, &Outcome::retry("flaky"), 35, NOW, &attempt());
            seen.push((task.status, task.crt_retry_num, task.max_retry_interval, task.order_time - NOW));
            assert_eq!(task.task_stage, "fetch", "a retry runs the same stage again");
        }
        assert_eq!(seen, [(1, 1, 20, 20), (1, 2, 35, 35), (1, 3, 35, 35), (4, 3, 35, 35)]);
        let log = ScheduleLog::parse(&task.schedule_log);
        assert_eq!(log.last_data.err_msg, "flaky");
        assert_eq!(log.history_datas.len(), 3);
    }

    #[test]
    fn negative_interval_retries_at_a_fixed_delay() {
        let task = TaskData { max_retry_interval: -4, ..held() };
        let out = report(&task, &Outcome::retry("x"), 35, NOW, &attempt());
        assert_eq!((out.status, out.max_retry_interval, out.order_time), (1, -4, NOW + 4));
    }

    #[test]
    fn fatal_fails_at_once_whatever_the_retries_left() {
        let out = report(&held(), &Outcome::fatal("bad input"), 35, NOW, &attempt());
        assert_eq!((out.status, out.crt_retry_num), (4, 0));
        assert_eq!(ScheduleLog::parse(&out.schedule_log).last_data.err_msg, "bad input");
    }

    #[test]
    fn history_is_bounded_and_newest_first() {
        let mut task = held();
        for i in 0..20 {
            let a = Attempt { trace_id: format!("t{i}"), ..attempt() };
            task = report(&task, &Outcome::Next { stage: "s".into(), context: String::new() }, 0, NOW, &a);
        }
        let log = ScheduleLog::parse(&task.schedule_log);
        assert_eq!(log.last_data.trace_id, "t19");
        assert_eq!(log.history_datas.len(), HISTORY_LEN);
        assert_eq!(log.history_datas[0].trace_id, "t18");
    }

    #[test]
    fn long_errors_are_truncated_on_a_char_boundary() {
        let err = "é".repeat(400);
        let out = report(&held(), &Outcome::retry(&err), 0, NOW, &attempt());
        let msg = ScheduleLog::parse(&out.schedule_log).last_data.err_msg;
        assert!(msg.len() <= MAX_ERR_LEN + '…'.len_utf8(), "{}", msg.len());
    }

    #[test]
    fn hand_back_is_pending_at_the_old_order_time_without_a_retry() {
        let out = hand_back(&held());
        assert_eq!((out.status, out.order_time, out.crt_retry_num), (1, NOW - 100, 0));
    }

    #[test]
    fn foreign_schedule_log_starts_fresh_and_a_go_log_is_kept() {
        assert_eq!(ScheduleLog::parse("not json"), ScheduleLog::default());
        let go = r#"{"LastData":{"TraceId":"g","ErrMsg":"e","Cost":"1s"},"HistoryDatas":null}"#;
        let task = TaskData { schedule_log: go.into(), ..held() };
        let out = report(&task, &Outcome::done(), 0, NOW, &attempt());
        let log = ScheduleLog::parse(&out.schedule_log);
        assert_eq!((log.history_datas.len(), log.history_datas[0].trace_id.as_str()), (1, "g"));
    }
}
