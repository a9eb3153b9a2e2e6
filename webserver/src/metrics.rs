//! `GET /metrics`: Prometheus text format (API.md section 1c).
//!
//! Counters and the lateness histogram are recorded where things happen
//! (the executor and reconciler record fires, [`count_requests`] every
//! HTTP request) into the process's one recorder, installed by [`install`].
//! Gauges of state (timers by status, shards held, asyncflow tasks by type
//! and status) are read from the stores when scraped, so they cost nothing
//! between scrapes. Counting the timers reads an index entry of every
//! timer, so [`crate::scrape::TimerCounts`] reuses a count for a while after it, and
//! makes the next one in the background: however often `/metrics` is
//! scraped, counting takes at most 2% of the node's time, and only the
//! first scrape waits for it.

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;
use xtimer_core::metrics::{
    ASYNCFLOW_TASKS, FIRE_LATENESS_SECONDS, HTTP_REQUESTS_TOTAL, LATENESS_BUCKETS, SHARDS_HELD, TIMERS,
};
use xtimer_core::period::Period;
use xtimer_core::timer::TimerStatus;

use crate::auth::AuthContext;
use crate::error::error_chain;
use crate::{ApiError, AppState};

/// The `route` label of requests that matched no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's metrics recorder (once; later calls return the
/// same handle). When another recorder was installed first, the handle
/// renders only the gauges read at scrape time.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(FIRE_LATENESS_SECONDS.into()), LATENESS_BUCKETS)
            .expect("the lateness buckets are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("Another metrics recorder is installed; /metrics shows only the gauges.");
        }
        handle
    })
}

/// How often [`MetricsUpkeep`] drains the recorder.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The recorder's upkeep: a histogram's samples wait in the recorder until
/// a scrape or an upkeep folds them into its buckets, so without it a node
/// nobody scrapes keeps every fire's lateness sample (8 bytes and more a
/// fire, growing for as long as the node runs). `build_recorder` spawns no
/// upkeep of its own.
pub struct MetricsUpkeep {
    handle: &'static PrometheusHandle,
}

impl MetricsUpkeep {
    /// The upkeep of the process's recorder ([`install`]s it if need be).
    pub fn new() -> Self {
        Self { handle: install() }
    }

    /// Drains the recorder every [`UPKEEP_EVERY`] until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut period = Period::new(UPKEEP_EVERY);
        while period.tick(&shutdown).await {
            self.handle.run_upkeep();
        }
    }
}

impl Default for MetricsUpkeep {
    fn default() -> Self {
        Self::new()
    }
}

/// The route a request matched, left in the response for [`count_requests`].
#[derive(Clone)]
struct RouteLabel(MatchedPath);

/// Route middleware (inside the router): notes the matched route's pattern.
pub async fn tag_route(path: MatchedPath, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    response.extensions_mut().insert(RouteLabel(path));
    response
}

/// The route pattern that answered `response` (tagged by [`tag_route`]),
/// or [`UNMATCHED_ROUTE`].
pub(crate) fn route_of(response: &Response) -> &str {
    match response.extensions().get::<RouteLabel>() {
        Some(RouteLabel(path)) => path.as_str(),
        None => UNMATCHED_ROUTE,
    }
}

/// Middleware: counts every request by its route's pattern (not its path,
/// so ids in paths cannot grow the label set) and its status code.
pub async fn count_requests(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let route = route_of(&response).to_owned();
    let code = response.status().as_str().to_owned();
    metrics::counter!(HTTP_REQUESTS_TOTAL, "route" => route, "code" => code).increment(1);
    response
}

/// `GET /metrics`: every metric in Prometheus text format. With auth on,
/// any valid token (an app's or the admin's) may read it. A gauge whose
/// store read fails is left out and the failure logged.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "_metrics",
    summary = "Prometheus text format.",
    responses((status = 200, description = crate::replies::OK, content_type = "text/plain"))
)]
pub async fn metrics_get(State(state): State<AppState>, auth: AuthContext) -> Result<Response, ApiError> {
    auth.require_token()?;
    let mut text = install().render();
    gauges(&state, &mut text).await;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}

/// Appends the gauges of state, read now. They are this node's view
/// (written here, not kept in the process-wide recorder, which several
/// nodes in one process would share).
async fn gauges(state: &AppState, out: &mut String) {
    let service = state.service.clone();
    match state.timer_counts.get(move || async move { service.count_timers().await }).await {
        Ok(counts) => {
            gauge_head(out, TIMERS, "Timers by status (deleted ones left out).");
            for status in [TimerStatus::Disabled, TimerStatus::Enabled, TimerStatus::Completed] {
                let n = counts.iter().find(|(s, _)| *s == status).map_or(0, |(_, n)| *n);
                let _ = writeln!(out, "{TIMERS}{{status=\"{}\"}} {n}", timer_status_label(status));
            }
        }
        Err(err) => tracing::warn!(error = %error_chain(&err), "Counting timers for /metrics failed."),
    }
    if let Some(held) = &state.shards_held {
        gauge_head(out, SHARDS_HELD, "Shards this node holds now.");
        let _ = writeln!(out, "{SHARDS_HELD} {}", held());
    }
    let Some(tasks) = &state.tasks else { return };
    let types = match tasks.cfgs().await {
        Ok(types) => types,
        Err(err) => {
            tracing::warn!(error = %error_chain(&err), "Listing task types for /metrics failed.");
            return;
        }
    };
    gauge_head(out, ASYNCFLOW_TASKS, "asyncflow tasks by type and status.");
    for row in types {
        let task_type = row.cfg.task_type;
        match tasks.count_by_status(&task_type).await {
            Ok(counts) => {
                for (code, label) in TASK_STATUSES {
                    let n = counts.iter().find(|(c, _)| c == code).map_or(0, |(_, n)| *n);
                    let _ = writeln!(
                        out,
                        "{ASYNCFLOW_TASKS}{{task_type=\"{}\",status=\"{label}\"}} {n}",
                        label_value(&task_type)
                    );
                }
            }
            Err(err) => tracing::warn!(task_type, error = %error_chain(&err), "Counting tasks for /metrics failed."),
        }
    }
}

fn gauge_head(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// A label value escaped as the text format asks (backslash, quote, newline).
fn label_value(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The asyncflow task statuses and their `status` labels.
const TASK_STATUSES: &[(i64, &str)] = &[(1, "pending"), (2, "processing"), (3, "success"), (4, "failed")];

fn timer_status_label(status: TimerStatus) -> &'static str {
    match status {
        TimerStatus::Disabled => "disabled",
        TimerStatus::Enabled => "enabled",
        TimerStatus::Deleted => "deleted",
        TimerStatus::Completed => "completed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_upkeep_folds_samples_into_the_histogram_without_losing_any() {
        let handle = install();
        let stop = CancellationToken::new();
        let upkeep = tokio::spawn(MetricsUpkeep::new().run(stop.clone()));
        let count = || -> u64 {
            let text = handle.render();
            let line = text.lines().find(|l| l.starts_with("xtimer_fire_lateness_seconds_count")).unwrap_or("x 0");
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        let before = count();
        for _ in 0..1_000 {
            metrics::histogram!(FIRE_LATENESS_SECONDS).record(0.002);
        }
        // Two upkeeps pass with nobody scraping.
        tokio::time::sleep(UPKEEP_EVERY * 2 + Duration::from_millis(1)).await;
        assert_eq!(count() - before, 1_000, "every sample is in the histogram after the upkeep");
        stop.cancel();
        upkeep.await.unwrap();
    }
}
