//! The web console at `/ui`: a small hand-written front end (HTML, CSS and
//! JavaScript embedded in the binary, no build step) over the timer API,
//! the nodes route, the `/v1` task API and [`overview`].
//!
//! Pages (hash routes of one document): timers of an app, searched by name
//! and filtered by status, with a form to create one, the app's forecast
//! (fires to be sent per second over the next ten minutes, its peak and
//! total) and its calendars (listed, put, deleted); one timer (definition
//! with everything that says when it fires, next fires with DST and
//! calendar notes, history with scheduled and sent times, enable / disable
//! / run now / edit / delete); lateness (p50 and p99 per minute over the
//! last hour) and the timers whose recent fires failed; the cluster (nodes
//! and their shards, task types and their counts). With auth on, a call
//! answered 401 makes the page ask for a token, kept in the browser's
//! local storage and sent as a bearer token.

pub mod overview;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::AppState;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The console's routes: the page, its assets and its overview data.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/ui/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        .route("/ui/api/overview", get(overview::overview_get))
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// An embedded asset; revalidated on every load so a new binary's console
/// is seen at once.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}
