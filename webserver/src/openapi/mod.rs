//! `GET /openapi.json`: an OpenAPI 3.1 document of both APIs (the timer API
//! under `/api/xtimer` and `/xtimer`, the asyncflow task API under `/v1`,
//! and the operating routes). Its schemas are derived (`utoipa::ToSchema`)
//! from the structs the handlers read and write ([`WireTypes`]); its paths
//! come from [`ROUTES`] and [`TIMER_ROUTES`], the table of every route the
//! router serves (a test reads the router's source and fails on a route
//! served but not listed).

mod links;
pub mod schemas;

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn, PathItem};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, RefOr, Required,
    ResponseBuilder, Schema,
};
use utoipa::IntoParams;
use utoipa::OpenApi as _;
use xtimer_asyncflow::wire::path as v1;
use xtimer_asyncflow::wire::{
    CfgBody, CfgListBody, CountsBody, CreateTaskBody, Empty, Reply, TaskDataBody, TaskDataRequest, TaskListBody,
};
use xtimer_core::task::TaskScheduleCfg;

use crate::routes::health::{Health, Readiness};
use crate::routes::nodes::NodeList;
use crate::routes::timers::admin::{IssueToken, IssuedToken};
use crate::routes::timers::apply::{Applied, ApplyTimers};
use crate::routes::timers::backfill::{BackfillTimer, Backfilled};
use crate::routes::timers::batch::{CreateTimers, TimerIds};
use crate::routes::timers::explain::ExplainQuery;
use crate::routes::timers::explain::ExplainView;
use crate::routes::timers::flows::FlowRef;
use crate::routes::timers::flows::{FlowDeleted, FlowEntry, FlowList, SetFlowLimit};
use crate::routes::timers::input::{AppTimersQuery, CreateTimer, TimerRef, TimerTasksQuery};
use crate::routes::timers::lifecycle::{Triggered, UpdateTimer};
use crate::routes::timers::many::{
    AppList, AppPaused, BulkTimers, Bulked, HistoryList, PauseApp, ReplayFires, Replayed, ResumeApp,
};
use crate::routes::timers::preview::Preview;
use crate::routes::timers::preview::PreviewQuery;
use crate::routes::timers::view::{FireView, List, TimerId, TimerView};
use crate::routes::timers::when::{AppRef, CalendarRef, ForecastQuery};
use crate::routes::timers::when::{CalendarList, CalendarName, CalendarView, ForecastView, PutCalendar};
use crate::ui::overview::Overview;

/// One documented route.
#[derive(Debug, Clone, Copy)]
pub struct RouteDoc {
    pub method: &'static str,
    /// The path; timer routes are listed once, without their prefix.
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    /// Its query parameters: derived (`utoipa::IntoParams`) from the
    /// struct its handler reads them into, or listed for the `/v1` routes,
    /// which read them by hand (as Go's asyncflow does, with aliases).
    pub query: fn() -> Vec<Parameter>,
    /// The JSON body's schema (a component name), if it takes one.
    pub body: Option<&'static str>,
    /// The reply's `result` schema (a component name), or the reply itself
    /// for the `/v1` API and plain replies.
    pub reply: &'static str,
}

/// The query parameters of `T`, the struct a handler reads them into.
fn query<T: IntoParams>() -> Vec<Parameter> {
    T::into_params(|| Some(ParameterIn::Query))
}

/// No query parameters.
fn none() -> Vec<Parameter> {
    Vec::new()
}

/// Query parameters listed by hand: (name, required, `string` or `integer`).
fn listed(params: &[(&str, bool, &str)]) -> Vec<Parameter> {
    params
        .iter()
        .map(|(name, required, kind)| {
            ParameterBuilder::new()
                .name(*name)
                .parameter_in(ParameterIn::Query)
                .required(if *required { Required::True } else { Required::False })
                .schema(Some(ObjectBuilder::new().schema_type(primitive(kind)).build()))
                .build()
        })
        .collect()
}

const ID_APP: fn() -> Vec<Parameter> = query::<TimerRef>;

/// The timer API's routes, each served under both [`TIMER_PREFIXES`].
pub const TIMER_ROUTES: &[RouteDoc] = &[
    route("POST", "createTimer", "Create a timer (status 2: enabled at once).", none, Some("Timer"), "TimerId"),
    route("POST", "createTimers", "Create up to 1000 timers, all or none.", none, Some("TimerBatch"), "TimerIds"),
    route("GET", "enableTimer", "Enable a timer.", ID_APP, None, "TimerId"),
    route("GET", "unableTimer", "Disable a timer.", ID_APP, None, "TimerId"),
    route("DELETE", "delTimer", "Delete a timer.", ID_APP, None, "TimerId"),
    route("GET", "getTimer", "One timer, with its next fire when enabled.", ID_APP, None, "TimerView"),
    route(
        "GET",
        "getAppTimers",
        "A page of an app's timers matching a search (name, status, label selector).",
        query::<AppTimersQuery>,
        None,
        "List_TimerView",
    ),
    route(
        "GET",
        "getTimerTasks",
        "A timer's fires: due ones newest first, or upcoming ones soonest first.",
        query::<TimerTasksQuery>,
        None,
        "List_Fire",
    ),
    route(
        "POST",
        "admin/issueToken",
        "Issue an app's API token (admin token only).",
        none,
        Some("IssueToken"),
        "IssuedToken",
    ),
    route("GET", "nodes", "Every live node and the shards it holds.", none, None, "NodeList"),
    route(
        "POST",
        "updateTimer",
        "Change a timer's fields (absent ones keep their value); fires not yet claimed follow the new definition.",
        none,
        Some("TimerUpdate"),
        "TimerView",
    ),
    route("POST", "triggerTimer", "One extra fire now, marked manual.", ID_APP, None, "Triggered"),
    route(
        "POST",
        "backfillTimer",
        "Fire every scheduled time in [from, to) that has no fire record, oldest first, at a bounded pace.",
        none,
        Some("Backfill"),
        "Backfilled",
    ),
    route(
        "GET",
        "previewCron",
        "The next fire times of a cron in a zone, with daylight-saving notes.",
        query::<PreviewQuery>,
        None,
        "CronPreview",
    ),
    route(
        "POST",
        "putCalendar",
        "Create or replace an app's calendar of excluded days and ranges.",
        none,
        Some("PutCalendar"),
        "CalendarName",
    ),
    route("GET", "getCalendar", "One calendar.", query::<CalendarRef>, None, "CalendarView"),
    route("GET", "getAppCalendars", "An app's calendars.", query::<AppRef>, None, "CalendarList"),
    route("DELETE", "delCalendar", "Delete a calendar no timer excludes.", query::<CalendarRef>, None, "CalendarName"),
    route(
        "GET",
        "getForecast",
        "Fires to be sent in each second of a window, as planned now, with the peak.",
        query::<ForecastQuery>,
        None,
        "ForecastView",
    ),
    route("GET", "getApps", "The apps the caller may see, their timers counted, their pauses.", none, None, "AppList"),
    route(
        "POST",
        "bulkTimers",
        "Enable, disable, delete or trigger every timer a search matches.",
        none,
        Some("BulkTimers"),
        "Bulked",
    ),
    route(
        "POST",
        "applyTimers",
        "Make an app's timers match a list (by name), all or nothing: created, updated, unchanged, pruned.",
        none,
        Some("ApplyTimers"),
        "Applied",
    ),
    route(
        "POST",
        "pauseApp",
        "Pause an app: its fires due meanwhile are skipped.",
        none,
        Some("PauseApp"),
        "AppPaused",
    ),
    route("POST", "resumeApp", "Resume a paused app.", none, Some("ResumeApp"), "AppPaused"),
    route(
        "POST",
        "replayFires",
        "Send again the failed and missed fires of a time range, oldest first, at a bounded rate.",
        none,
        Some("ReplayFires"),
        "Replayed",
    ),
    route(
        "POST",
        "setFlowLimit",
        "Set a flow's rate, parallelism or pause, across the cluster: its fires over them wait.",
        none,
        Some("SetFlowLimit"),
        "Flow",
    ),
    route(
        "GET",
        "getFlows",
        "An app's flows with limits, their waiting fires and open callbacks.",
        query::<AppRef>,
        None,
        "FlowList",
    ),
    route(
        "DELETE",
        "delFlowLimit",
        "Remove a flow's limits: its waiting fires go.",
        query::<FlowRef>,
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
        query::<ExplainQuery>,
        None,
        "Explanation",
    ),
];

/// The prefixes the timer routes answer under.
pub const TIMER_PREFIXES: &[&str] = &["/api/xtimer", "/xtimer"];

/// Every other route, with its full path.
pub const ROUTES: &[RouteDoc] = &[
    route("GET", "/healthz", "Liveness: the process serves HTTP.", none, None, "Health"),
    route(
        "GET",
        "/readyz",
        "Readiness: this node's heartbeats reach its database; 503 with Retry-After and the reason while they do not.",
        none,
        None,
        "Readiness",
    ),
    route("GET", "/metrics", "Prometheus text format.", none, None, "text"),
    route("GET", "/openapi.json", "This document.", none, None, "Object"),
    route("GET", "/", "Leads to the web console: a redirect to /ui.", none, None, "redirect"),
    route("GET", "/ui", "The web console.", none, None, "html"),
    route("GET", "/ui/", "The web console.", none, None, "html"),
    route("GET", "/ui/app.js", "The console's script.", none, None, "text"),
    route("GET", "/ui/app.css", "The console's style sheet.", none, None, "text"),
    route("GET", "/ui/api/overview", "Lateness per minute and failing timers, last hour.", none, None, "Overview"),
    route("POST", v1::CREATE_TASK, "Create an asyncflow task.", none, Some("TaskDataRequest"), "Reply_CreateTaskBody"),
    route(
        "POST",
        v1::HOLD_TASKS,
        "Claim due tasks of a type.",
        || listed(&[("task_type", true, "string"), ("limit", false, "integer")]),
        None,
        "Reply_TaskListBody",
    ),
    route("POST", v1::SET_TASK, "Report on a task.", none, Some("TaskDataRequest"), "Reply_Empty"),
    route(
        "GET",
        v1::GET_TASK,
        "One task by id.",
        || listed(&[("task_id", true, "string")]),
        None,
        "Reply_TaskDataBody",
    ),
    route(
        "GET",
        v1::GET_TASK_LIST,
        "Tasks of a type.",
        || listed(&[("task_type", true, "string"), ("status", false, "integer"), ("limit", false, "integer")]),
        None,
        "Reply_TaskListBody",
    ),
    route("GET", v1::GET_TASK_SCHEDULE_CFG_LIST, "Every task type's configuration.", none, None, "Reply_CfgListBody"),
    route(
        "GET",
        v1::GET_TASK_COUNTS_BY_TYPE,
        "How many tasks a type has.",
        || listed(&[("task_type", true, "string")]),
        None,
        "Reply_CountsBody",
    ),
    route(
        "POST",
        v1::REGISTER_TASK,
        "Register a task type (8048 if it exists).",
        none,
        Some("TaskScheduleCfg"),
        "Reply_Empty",
    ),
    route(
        "POST",
        v1::SET_TASK_SCHEDULE_CFG,
        "Change a task type's configuration.",
        none,
        Some("TaskScheduleCfg"),
        "Reply_CfgBody",
    ),
    route("GET", v1::PING, "Liveness of the task API.", none, None, "Object"),
];

const fn route(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    query: fn() -> Vec<Parameter>,
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
    let derived = WireTypes::openapi().components.map(|c| c.schemas).unwrap_or_default();
    let components = envelope_schemas(ComponentsBuilder::new()).schemas_from_iter(derived);
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
    // Doc comments' rustdoc links read as the numbers and names they stand for.
    let mut value = serde_json::to_value(&doc).expect("the document serializes");
    links::resolve(&mut value);
    serde_json::from_value(value).expect("the document reads back")
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
    for param in (r.query)() {
        op = op.parameter(param);
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
    if r.reply == "redirect" {
        let see = ResponseBuilder::new().description("a redirect (Location: /ui) to the web console");
        return op.response("307", see.build()).response("default", error.build()).build();
    }
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

/// The wire types of every route, each schema derived (`utoipa::ToSchema`)
/// from the struct its handler reads or writes; the types they name are
/// collected with them.
#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(
    CreateTimer,
    CreateTimers,
    UpdateTimer,
    BackfillTimer,
    TimerId,
    TimerIds,
    TimerView,
    List<TimerView>,
    List<FireView>,
    Triggered,
    Backfilled,
    Preview,
    PutCalendar,
    CalendarName,
    CalendarView,
    CalendarList,
    ForecastView,
    AppList,
    BulkTimers,
    Bulked,
    ApplyTimers,
    Applied,
    PauseApp,
    ResumeApp,
    AppPaused,
    ReplayFires,
    Replayed,
    SetFlowLimit,
    FlowEntry,
    FlowList,
    FlowDeleted,
    HistoryList,
    ExplainView,
    IssueToken,
    IssuedToken,
    NodeList,
    Health,
    Readiness,
    Overview,
    TaskDataRequest,
    TaskScheduleCfg,
    Reply<CreateTaskBody>,
    Reply<TaskListBody>,
    Reply<TaskDataBody>,
    Reply<CfgListBody>,
    Reply<CountsBody>,
    Reply<CfgBody>,
    Reply<Empty>,
)))]
struct WireTypes;

/// The error envelope (`code` is the HTTP status, `result` null) and an
/// object of any shape: the two schemas no single struct serves.
fn envelope_schemas(components: ComponentsBuilder) -> ComponentsBuilder {
    let error = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("code", ObjectBuilder::new().schema_type(Type::Integer))
        .property("msg", ObjectBuilder::new().schema_type(Type::String))
        .property("result", ObjectBuilder::new().schema_type(Type::Null))
        .required("code")
        .required("msg");
    components.schema("Error", error).schema("Object", ObjectBuilder::new().schema_type(Type::Object))
}

/// What `json!` would give for the document; for tests and tools.
pub fn document_json() -> serde_json::Value {
    serde_json::to_value(document()).unwrap_or_else(|_| json!({}))
}
