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
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::replies::{OK, REDIRECT};
use crate::AppState;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The console's routes: the page, its assets and its overview data.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(root))
        .routes(routes!(index))
        .routes(routes!(index_with_slash))
        .routes(routes!(app_js))
        .routes(routes!(app_css))
        .routes(routes!(overview::overview_get))
}

/// `GET /`: the way to the console.
#[utoipa::path(
    get,
    path = "/",
    operation_id = "_",
    summary = "Leads to the web console: a redirect to /ui.",
    responses((status = 307, description = REDIRECT))
)]
async fn root() -> Redirect {
    Redirect::temporary("/ui")
}

/// `GET /ui`: the console's page.
#[utoipa::path(
    get,
    path = "/ui",
    operation_id = "_ui",
    summary = "The web console.",
    responses((status = 200, description = OK, content_type = "text/html"))
)]
async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /ui/`: the console's page.
#[utoipa::path(
    get,
    path = "/ui/",
    operation_id = "_ui_",
    summary = "The web console.",
    responses((status = 200, description = OK, content_type = "text/html"))
)]
async fn index_with_slash() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /ui/app.js`: the console's script.
#[utoipa::path(
    get,
    path = "/ui/app.js",
    operation_id = "_ui_app.js",
    summary = "The console's script.",
    responses((status = 200, description = OK, content_type = "text/plain"))
)]
async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// `GET /ui/app.css`: the console's style sheet.
#[utoipa::path(
    get,
    path = "/ui/app.css",
    operation_id = "_ui_app.css",
    summary = "The console's style sheet.",
    responses((status = 200, description = OK, content_type = "text/plain"))
)]
async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

/// An embedded asset; revalidated on every load so a new binary's console
/// is seen at once.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}
