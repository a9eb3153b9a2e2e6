//! The names of the metrics `GET /metrics` exports (API.md section 1c),
//! shared by the parts that record them and the exporter that renders them.

/// Counter of fires that ended, labelled `outcome`: `succeeded`, `failed`,
/// `missed` or `skipped`.
pub const FIRES_TOTAL: &str = "xtimer_fires_total";
/// Histogram of a fire's lateness in seconds: its first callback leaving
/// (or task being created) minus its scheduled time.
pub const FIRE_LATENESS_SECONDS: &str = "xtimer_fire_lateness_seconds";
/// Gauge of timers by `status` (`disabled`, `enabled`, `completed`).
pub const TIMERS: &str = "xtimer_timers";
/// Gauge of the shards this node holds now.
pub const SHARDS_HELD: &str = "xtimer_shards_held";
/// Counter of HTTP requests by `route` (the route's pattern) and `code`.
pub const HTTP_REQUESTS_TOTAL: &str = "xtimer_http_requests_total";
/// Gauge of asyncflow tasks by `task_type` and `status` (`pending`,
/// `processing`, `success`, `failed`).
pub const ASYNCFLOW_TASKS: &str = "asyncflow_tasks";

/// Gauge of a limited flow's fires waiting on this node, by `app` and
/// `key` (API 1g).
pub const FLOW_WAITING: &str = "xtimer_flow_waiting";
/// Counter of a limited flow's sends let go, by `app` and `key`.
pub const FLOW_SENT_TOTAL: &str = "xtimer_flow_sent_total";

/// The `outcome` label of [`FIRES_TOTAL`].
pub mod outcome {
    pub const SUCCEEDED: &str = "succeeded";
    pub const FAILED: &str = "failed";
    pub const MISSED: &str = "missed";
    pub const SKIPPED: &str = "skipped";
}

/// The buckets of [`FIRE_LATENESS_SECONDS`]: 1 ms steps where on-time
/// fires land, then coarser up to the misfire threshold and beyond.
pub const LATENESS_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0, 300.0,
];
