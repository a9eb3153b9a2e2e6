//! The web console at `/ui`: a small hand-written front end (HTML, CSS and
//! JavaScript embedded in the binary, no build step) over the timer API,
//! the nodes route, the `/v1` task API and [`overview`].
//!
//! Pages (hash routes of one document; `/ui` opens the first, and `/`
//! leads there):
//!
//! - `#/apps`: the apps the token may see (timers, enabled, paused), with
//!   pause (until, reason) and resume;
//! - `#/app/{app}?q=&status=&selector=&page=`: the app's timers searched
//!   server-side (name, status, label selector), their labels, next fire
//!   in UTC and in the timer's zone, failing ones marked (from
//!   [`overview`]); bulk enable / disable / run / delete of the search,
//!   a dry run's count shown first; its flows (API 1g: limits, waiting
//!   and in-flight fires) paused, resumed, limited and freed; the
//!   forecast and the calendars;
//! - `#/new?app=`: a form with every timer field and its validation
//!   messages (checked in the page, then the server's put by their fields);
//! - `#/timer/{app}/{id}`: definition, next fires with DST and calendar
//!   notes, fires, backfill, replay of failed fires, change history;
//!   enable / disable / run now / edit / delete;
//! - `#/lateness`: p50 and p99 per minute over the last hour, failing timers;
//! - `#/cluster`: nodes and their shards (as ranges);
//! - `#/tasks`, `#/tasks/{type}?status=`, `#/task/{id}`: asyncflow task
//!   types, a type's tasks by status, one task (context, schedule log,
//!   retries), from the `/v1` API.
//!
//! With auth on, a call answered 401 makes the page ask for a token, kept
//! in the browser's local storage and sent as a bearer token. In a browser
//! under automation (`navigator.webdriver`), `set.{id}=` and `click=`
//! in the hash's query fill inputs and click buttons: how the browser test
//! goes through each action.

pub mod overview;

use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use crate::AppState;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The console's routes: the page, its assets and its overview data.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::temporary("/ui") }))
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
