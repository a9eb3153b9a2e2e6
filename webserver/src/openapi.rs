//! `GET /openapi.json`: an OpenAPI 3.1 document of both APIs (the timer API
//! under `/api/xtimer` and `/xtimer`, the asyncflow task API under `/v1`,
//! and the operating routes), built with `utoipa` from [`ROUTES`], the one
//! table of every route the router serves (a test checks the two agree).

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, RefOr, Required,
    ResponseBuilder, Schema,
};
use xtimer_asyncflow::wire::path as v1;

/// One documented route.
#[derive(Debug, Clone, Copy)]
pub struct RouteDoc {
    pub method: &'static str,
    /// The path; timer routes are listed once, without their prefix.
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    /// Query parameters: (name, required, type: `string`, `integer` or `boolean`).
    pub query: &'static [(&'static str, bool, &'static str)],
    /// The JSON body's schema (a component name), if it takes one.
    pub body: Option<&'static str>,
    /// The reply's `result` schema (a component name), or the reply itself
    /// for the `/v1` API and plain replies.
    pub reply: &'static str,
}

const ID_APP: &[(&str, bool, &str)] = &[("id", true, "integer"), ("app", true, "string")];

/// The timer API's routes, each served under both [`TIMER_PREFIXES`].
pub const TIMER_ROUTES: &[RouteDoc] = &[
    route("POST", "createTimer", "Create a timer (status 2: enabled at once).", &[], Some("Timer"), "TimerId"),
    route("POST", "createTimers", "Create up to 1000 timers, all or none.", &[], Some("TimerBatch"), "TimerIds"),
    route("GET", "enableTimer", "Enable a timer.", ID_APP, None, "TimerId"),
    route("GET", "unableTimer", "Disable a timer.", ID_APP, None, "TimerId"),
    route("DELETE", "delTimer", "Delete a timer.", ID_APP, None, "TimerId"),
    route("GET", "getTimer", "One timer, with its next fire when enabled.", ID_APP, None, "TimerView"),
    route(
        "GET",
        "getAppTimers",
        "A page of an app's timers matching a search (name, status, label selector).",
        &[
            ("app", true, "string"),
            ("pageIndex", false, "integer"),
            ("pageSize", false, "integer"),
            ("q", false, "string"),
            ("status", false, "integer"),
            ("selector", false, "string"),
        ],
        None,
        "TimerList",
    ),
    route(
        "GET",
        "getTimerTasks",
        "A timer's fires: due ones newest first, or upcoming ones soonest first.",
        &[
            ("id", true, "integer"),
            ("app", true, "string"),
            ("status", false, "integer"),
            ("upcoming", false, "boolean"),
            ("pageIndex", false, "integer"),
            ("pageSize", false, "integer"),
        ],
        None,
        "FireList",
    ),
    route(
        "POST",
        "admin/issueToken",
        "Issue an app's API token (admin token only).",
        &[],
        Some("IssueToken"),
        "Object",
    ),
    route("GET", "nodes", "Every live node and the shards it holds.", &[], None, "NodeList"),
    route(
        "POST",
        "updateTimer",
        "Change a timer's fields (absent ones keep their value); fires not yet claimed follow the new definition.",
        &[],
        Some("TimerUpdate"),
        "TimerView",
    ),
    route("POST", "triggerTimer", "One extra fire now, marked manual.", ID_APP, None, "Triggered"),
    route(
        "POST",
        "backfillTimer",
        "Fire every scheduled time in [from, to) that has no fire record, oldest first, at a bounded pace.",
        &[],
        Some("Backfill"),
        "Backfilled",
    ),
    route(
        "GET",
        "previewCron",
        "The next fire times of a cron in a zone, with daylight-saving notes.",
        &[
            ("cron", true, "string"),
            ("timezone", false, "string"),
            ("from", false, "string"),
            ("count", false, "integer"),
        ],
        None,
        "CronPreview",
    ),
    route(
        "POST",
        "putCalendar",
        "Create or replace an app's calendar of excluded days and ranges.",
        &[],
        Some("Object"),
        "Object",
    ),
    route("GET", "getCalendar", "One calendar.", &[("app", true, "string"), ("name", true, "string")], None, "Object"),
    route("GET", "getAppCalendars", "An app's calendars.", &[("app", true, "string")], None, "Object"),
    route(
        "DELETE",
        "delCalendar",
        "Delete a calendar no timer excludes.",
        &[("app", true, "string"), ("name", true, "string")],
        None,
        "Object",
    ),
    route(
        "GET",
        "getForecast",
        "Fires to be sent in each second of a window, as planned now, with the peak.",
        &[("app", false, "string"), ("from", false, "string"), ("seconds", false, "integer")],
        None,
        "Object",
    ),
    route("GET", "getApps", "The apps the caller may see, their timers counted, their pauses.", &[], None, "AppList"),
    route(
        "POST",
        "bulkTimers",
        "Enable, disable, delete or trigger every timer a search matches.",
        &[],
        Some("BulkTimers"),
        "Bulked",
    ),
    route(
        "POST",
        "applyTimers",
        "Make an app's timers match a list (by name), all or nothing: created, updated, unchanged, pruned.",
        &[],
        Some("ApplyTimers"),
        "Applied",
    ),
    route("POST", "pauseApp", "Pause an app: its fires due meanwhile are skipped.", &[], Some("PauseApp"), "AppPaused"),
    route("POST", "resumeApp", "Resume a paused app.", &[], Some("ResumeApp"), "AppPaused"),
    route(
        "POST",
        "replayFires",
        "Send again the failed and missed fires of a time range, oldest first, at a bounded rate.",
        &[],
        Some("ReplayFires"),
        "Replayed",
    ),
    route(
        "POST",
        "setFlowLimit",
        "Set a flow's rate, parallelism or pause, across the cluster: its fires over them wait.",
        &[],
        Some("SetFlowLimit"),
        "Flow",
    ),
    route(
        "GET",
        "getFlows",
        "An app's flows with limits, their waiting fires and open callbacks.",
        &[("app", true, "string")],
        None,
        "FlowList",
    ),
    route(
        "DELETE",
        "delFlowLimit",
        "Remove a flow's limits: its waiting fires go.",
        &[("app", true, "string"), ("key", true, "string")],
        None,
        "FlowDeleted",
    ),
    route(
        "GET",
        "getTimerHistory",
        "Every change to a timer, newest first, and who made it.",
        ID_APP,
        None,
        "HistoryList",
    ),
    route(
        "GET",
        "explainFire",
        "Why a scheduled time of a timer fired as it did, or did not: the fire, its timeline, a verdict.",
        &[("id", true, "integer"), ("app", true, "string"), ("runTimer", true, "integer")],
        None,
        "Explanation",
    ),
];

/// The prefixes the timer routes answer under.
pub const TIMER_PREFIXES: &[&str] = &["/api/xtimer", "/xtimer"];

/// Every other route, with its full path.
pub const ROUTES: &[RouteDoc] = &[
    route("GET", "/healthz", "Liveness: the process serves HTTP.", &[], None, "Object"),
    route("GET", "/metrics", "Prometheus text format.", &[], None, "text"),
    route("GET", "/openapi.json", "This document.", &[], None, "Object"),
    route("GET", "/ui", "The web console.", &[], None, "html"),
    route("GET", "/ui/", "The web console.", &[], None, "html"),
    route("GET", "/ui/app.js", "The console's script.", &[], None, "text"),
    route("GET", "/ui/app.css", "The console's style sheet.", &[], None, "text"),
    route("GET", "/ui/api/overview", "Lateness per minute and failing timers, last hour.", &[], None, "Object"),
    route("POST", v1::CREATE_TASK, "Create an asyncflow task.", &[], Some("TaskDataBody"), "V1Reply"),
    route(
        "POST",
        v1::HOLD_TASKS,
        "Claim due tasks of a type.",
        &[("task_type", true, "string"), ("limit", false, "integer")],
        None,
        "V1Reply",
    ),
    route("POST", v1::SET_TASK, "Report on a task.", &[], Some("TaskDataBody"), "V1Reply"),
    route("GET", v1::GET_TASK, "One task by id.", &[("task_id", true, "string")], None, "V1Reply"),
    route(
        "GET",
        v1::GET_TASK_LIST,
        "Tasks of a type.",
        &[("task_type", true, "string"), ("status", false, "integer"), ("limit", false, "integer")],
        None,
        "V1Reply",
    ),
    route("GET", v1::GET_TASK_SCHEDULE_CFG_LIST, "Every task type's configuration.", &[], None, "V1Reply"),
    route(
        "GET",
        v1::GET_TASK_COUNTS_BY_TYPE,
        "How many tasks a type has.",
        &[("task_type", true, "string")],
        None,
        "V1Reply",
    ),
    route("POST", v1::REGISTER_TASK, "Register a task type (8048 if it exists).", &[], Some("Object"), "V1Reply"),
    route("POST", v1::SET_TASK_SCHEDULE_CFG, "Change a task type's configuration.", &[], Some("Object"), "V1Reply"),
    route("GET", v1::PING, "Liveness of the task API.", &[], None, "Object"),
];

const fn route(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    query: &'static [(&'static str, bool, &'static str)],
    body: Option<&'static str>,
    reply: &'static str,
) -> RouteDoc {
    RouteDoc { method, path, operation_id: path, summary, query, body, reply }
}

/// The document, built once.
pub fn document() -> &'static OpenApi {
    static DOC: OnceLock<OpenApi> = OnceLock::new();
    DOC.get_or_init(build)
}

/// `GET /openapi.json`.
pub async fn openapi_get() -> Response {
    let text = document().to_json().expect("the document serializes");
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

fn build() -> OpenApi {
    let mut paths = PathsBuilder::new();
    let mut all: Vec<(String, RouteDoc, bool)> = Vec::new();
    for prefix in TIMER_PREFIXES {
        for r in TIMER_ROUTES {
            all.push((format!("{prefix}/{}", r.path), *r, *prefix == "/api/xtimer"));
        }
    }
    all.extend(ROUTES.iter().map(|r| (r.path.to_owned(), *r, true)));
    for (path, r, primary) in all {
        paths = paths.path(path, PathItem::new(method(r.method), operation(&r, primary)));
    }
    let components = SCHEMAS.iter().fold(ComponentsBuilder::new(), |c, (name, props)| c.schema(*name, object(props)));
    let mut doc = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("xtimer")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "A distributed cron/timer service. Timer API replies are the envelope {code, msg, result}; \
                     the /v1 task API is wire-compatible with asyncflow workers.",
                ))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components.build()))
        .build();
    doc.openapi = utoipa::openapi::OpenApiVersion::Version31;
    doc
}

fn method(name: &str) -> HttpMethod {
    match name {
        "POST" => HttpMethod::Post,
        "DELETE" => HttpMethod::Delete,
        "PUT" => HttpMethod::Put,
        _ => HttpMethod::Get,
    }
}

fn operation(r: &RouteDoc, primary: bool) -> utoipa::openapi::path::Operation {
    let id = if primary { r.operation_id.to_owned() } else { format!("{}_alias", r.operation_id) };
    let mut op = OperationBuilder::new().operation_id(Some(id.replace('/', "_"))).summary(Some(r.summary));
    for (name, required, kind) in r.query {
        op = op.parameter(
            ParameterBuilder::new()
                .name(*name)
                .parameter_in(ParameterIn::Query)
                .required(if *required { Required::True } else { Required::False })
                .schema(Some(ObjectBuilder::new().schema_type(primitive(kind)).build())),
        );
    }
    if let Some(body) = r.body {
        let content = ContentBuilder::new().schema(Some(Ref::from_schema_name(body))).build();
        op = op.request_body(Some(
            RequestBodyBuilder::new().content("application/json", content).required(Some(Required::True)).build(),
        ));
    }
    let ok = match r.reply {
        "text" => ResponseBuilder::new().description("ok").content("text/plain", ContentBuilder::new().build()),
        "html" => ResponseBuilder::new().description("ok").content("text/html", ContentBuilder::new().build()),
        reply if r.path.starts_with("/v1/") || reply == "Object" => ResponseBuilder::new()
            .description("ok")
            .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name(reply))).build()),
        result => ResponseBuilder::new()
            .description("the envelope, result as below")
            .content("application/json", ContentBuilder::new().schema(Some(envelope(result))).build()),
    };
    let error = ResponseBuilder::new()
        .description("an error: code is the HTTP status, msg names the field and the problem, result null")
        .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))).build());
    op.response("200", ok.build()).response("default", error.build()).build()
}

fn envelope(result: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .property("code", ObjectBuilder::new().schema_type(Type::Integer))
        .property("msg", ObjectBuilder::new().schema_type(Type::String))
        .property("result", Ref::from_schema_name(result))
        .required("code")
        .required("msg")
        .into()
}

fn primitive(kind: &str) -> Type {
    match kind {
        "integer" => Type::Integer,
        "boolean" => Type::Boolean,
        "array" => Type::Array,
        "object" => Type::Object,
        _ => Type::String,
    }
}

fn object(props: &[(&str, &str)]) -> Schema {
    let mut o = ObjectBuilder::new().schema_type(Type::Object);
    for (name, kind) in props {
        o = match kind.strip_prefix('#') {
            Some(reference) => o.property(*name, Ref::from_schema_name(reference)),
            None => o.property(*name, ObjectBuilder::new().schema_type(primitive(kind))),
        };
    }
    Schema::Object(o.build())
}

/// Component schemas: (name, [(property, type or `#Component`)]).
const SCHEMAS: &[(&str, &[(&str, &str)])] = &[
    (
        "Timer",
        &[
            ("app", "string"),
            ("name", "string"),
            ("cron", "string"),
            ("runAt", "string"),
            ("timezone", "string"),
            ("status", "integer"),
            ("notifyHTTPParam", "#Notify"),
            ("notifyAsyncflowParam", "object"),
            ("retry", "#Retry"),
            ("misfire", "string"),
            ("callbackTimeoutMs", "integer"),
            ("onFailure", "#Notify"),
            ("onMissed", "#Notify"),
            ("onLate", "#LateAlert"),
            ("labels", "object"),
        ],
    ),
    (
        "Notify",
        &[
            ("url", "string"),
            ("method", "string"),
            ("header", "object"),
            ("body", "string"),
            ("template", "boolean"),
            ("flowKey", "string"),
            ("example", "#ExampleRequest"),
        ],
    ),
    ("ExampleRequest", &[("method", "string"), ("url", "string"), ("headers", "object"), ("body", "string")]),
    ("LateAlert", &[("thresholdMs", "integer"), ("notify", "#Notify")]),
    ("Retry", &[("maxAttempts", "integer"), ("backoffMs", "integer"), ("noRetryStatuses", "array")]),
    ("TimerBatch", &[("timers", "array")]),
    ("TimerId", &[("id", "integer")]),
    ("TimerUpdate", &[("id", "integer"), ("app", "string")]),
    ("Triggered", &[("runTimer", "integer")]),
    (
        "Backfill",
        &[("id", "integer"), ("app", "string"), ("from", "string"), ("to", "string"), ("maxFires", "integer")],
    ),
    ("Backfilled", &[("count", "integer")]),
    ("CronPreview", &[("list", "array")]),
    ("TimerIds", &[("ids", "array")]),
    (
        "TimerView",
        &[
            ("id", "integer"),
            ("app", "string"),
            ("name", "string"),
            ("status", "integer"),
            ("cron", "string"),
            ("runAt", "string"),
            ("timezone", "string"),
            ("notifyHTTPParam", "#Notify"),
            ("retry", "#Retry"),
            ("misfire", "string"),
            ("nextRunTimer", "integer"),
            ("nextRunTime", "string"),
            ("pauseReason", "string"),
            ("onFailure", "#Notify"),
            ("onMissed", "#Notify"),
            ("onLate", "#LateAlert"),
            ("labels", "object"),
            ("stats", "#TimerStats"),
            ("createTime", "string"),
            ("modifyTime", "string"),
        ],
    ),
    ("TimerList", &[("list", "array"), ("total", "integer")]),
    ("AppList", &[("list", "array")]),
    ("HistoryList", &[("list", "array")]),
    ("Explanation", &[("fire", "#Fire"), ("timeline", "array"), ("verdict", "string")]),
    (
        "TimerStats",
        &[
            ("fires", "integer"),
            ("succeeded", "integer"),
            ("failed", "integer"),
            ("missed", "integer"),
            ("lateP50Ms", "integer"),
            ("lateP99Ms", "integer"),
        ],
    ),
    (
        "ReplayFires",
        &[
            ("app", "string"),
            ("id", "integer"),
            ("selector", "string"),
            ("status", "array"),
            ("from", "string"),
            ("to", "string"),
            ("ratePerSec", "integer"),
            ("dryRun", "boolean"),
        ],
    ),
    ("Replayed", &[("count", "integer")]),
    (
        "BulkTimers",
        &[
            ("app", "string"),
            ("action", "string"),
            ("selector", "string"),
            ("q", "string"),
            ("status", "integer"),
            ("ids", "array"),
            ("dryRun", "boolean"),
        ],
    ),
    ("Bulked", &[("matched", "integer"), ("changed", "integer"), ("ids", "array")]),
    (
        "ApplyTimers",
        &[("app", "string"), ("timers", "array"), ("prune", "boolean"), ("owner", "string"), ("dryRun", "boolean")],
    ),
    ("Applied", &[("created", "array"), ("updated", "array"), ("unchanged", "array"), ("deleted", "array")]),
    ("PauseApp", &[("app", "string"), ("until", "string"), ("reason", "string")]),
    ("ResumeApp", &[("app", "string")]),
    ("AppPaused", &[("app", "string"), ("paused", "boolean"), ("pausedUntil", "integer"), ("reason", "string")]),
    (
        "SetFlowLimit",
        &[
            ("app", "string"),
            ("key", "string"),
            ("ratePerSec", "number"),
            ("parallelism", "integer"),
            ("paused", "boolean"),
        ],
    ),
    (
        "Flow",
        &[
            ("key", "string"),
            ("ratePerSec", "number"),
            ("parallelism", "integer"),
            ("paused", "boolean"),
            ("waiting", "integer"),
            ("inFlight", "integer"),
        ],
    ),
    ("FlowList", &[("list", "array")]),
    ("FlowDeleted", &[("key", "string"), ("deleted", "boolean")]),
    (
        "Fire",
        &[
            ("taskId", "integer"),
            ("timerId", "integer"),
            ("runTimer", "integer"),
            ("status", "integer"),
            ("manual", "boolean"),
            ("replayed", "boolean"),
            ("attempt", "integer"),
            ("output", "string"),
            ("costTime", "integer"),
            ("createTime", "string"),
            ("modifyTime", "string"),
        ],
    ),
    ("FireList", &[("list", "array"), ("total", "integer")]),
    ("NodeList", &[("list", "array"), ("total", "integer")]),
    ("IssueToken", &[("app", "string")]),
    ("Error", &[("code", "integer"), ("msg", "string"), ("result", "object")]),
    ("Object", &[]),
    (
        "TaskData",
        &[
            ("user_id", "string"),
            ("task_id", "string"),
            ("task_type", "string"),
            ("task_stage", "string"),
            ("status", "integer"),
            ("priority", "integer"),
            ("crt_retry_num", "integer"),
            ("max_retry_num", "integer"),
            ("max_retry_interval", "integer"),
            ("schedule_log", "string"),
            ("context", "string"),
            ("order_time", "integer"),
            ("create_time", "string"),
            ("modify_time", "string"),
        ],
    ),
    ("TaskDataBody", &[("task_data", "#TaskData")]),
    ("V1Reply", &[("code", "integer"), ("msg", "string")]),
];

/// What `json!` would give for the document; for tests and tools.
pub fn document_json() -> serde_json::Value {
    serde_json::to_value(document()).unwrap_or_else(|_| json!({}))
}
