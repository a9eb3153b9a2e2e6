//! An adversarial run against one node with auth on: over 10,000 generated
//! malformed or hostile requests, and what the service answers to them.
//!
//! The node serves two apps, `alpha` and `beta`, each with disabled timers,
//! a task type registered with its own token and a few pending tasks. A
//! seeded generator then sends, 16 at a time, requests of every kind a
//! hostile or broken client makes: bad JSON, wrong types, huge bodies, deep
//! nesting, invalid and extreme cron, bad time zones, SSRF callback URLs,
//! unknown ids, other apps' ids and tokens, bad admin calls, wrong methods
//! and paths, and on `/v1` broken task ids, table positions that do not
//! exist, bad hold and list parameters, status changes of tasks that do not
//! exist, bad registrations and other apps' task types. Every request is
//! built to be refused: the base bodies it mutates are proved valid while
//! seeding, so each refusal comes from what was mutated.
//!
//! It proves that every request is answered with a clear error: on the
//! timer API a 4xx in the envelope (`code` = the HTTP status, a non-empty
//! `msg`, `result: null`); on `/v1` HTTP 200 with an asyncflow error code
//! and a non-empty `msg` (or 401/403 in that shape for auth), as Go workers
//! expect. No request gets a 5xx (a panicking handler answers 500, so this
//! also means no handler panicked; a panic hook counts panics in product
//! code besides), every loop of the node is still running afterwards, a
//! valid read still works, and a dump of every table of the database is
//! the same before and after the run.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use xtimer_asyncflow::wire::code;
use xtimer_core::config::{AppCredentials, Secret};

use crate::helpers::{Stack, Storage, TestNode};
use crate::on_both_stacks;

/// Requests generated, round-robin over the categories.
const TOTAL: usize = 11_000;
/// Requests in flight at once.
const IN_FLIGHT: usize = 16;
/// The generator's seed (`XTIMER_ADVERSARIAL_SEED` overrides it).
const SEED: u64 = 0x5eed_a11e_ba5e_d00d;
const ADMIN: &str = "adv-admin-token";

/// Codes a `/v1` error may carry (API.md section 2).
const ASYNCFLOW_CODES: [i32; 12] = [
    code::INPUT_INVALID,
    code::SHOULD_BIND,
    code::GET_TASK_INFO,
    code::CREATE_TASK,
    code::GET_TASK_LIST,
    code::GET_TASK_SET_POS,
    code::SET_TASK,
    code::GET_TASK_POS,
    code::GET_TASK_CFG,
    code::GET_TASK_COUNT,
    code::REGISTER_CREATE_TABLE,
    code::REGISTER_INSERT,
];

on_both_stacks!(ten_thousand_hostile_requests_change_nothing);

/// One app of the run and what it owns.
struct App {
    name: &'static str,
    token: &'static str,
    task_type: &'static str,
    /// Live (disabled) timers.
    timers: Vec<i64>,
    /// A deleted timer.
    deleted: i64,
    /// Pending tasks.
    tasks: Vec<String>,
}

impl App {
    fn new(name: &'static str, token: &'static str, task_type: &'static str) -> Self {
        Self { name, token, task_type, timers: Vec::new(), deleted: 0, tasks: Vec::new() }
    }
}

pub async fn ten_thousand_hostile_requests_change_nothing(stack: Stack) {
    count_product_panics();
    let storage = Storage::new(stack).await;
    let mut config = storage.config.clone();
    config.auth.enabled = true;
    config.auth.admin_token = Secret::new(ADMIN);
    let mut apps = [App::new("alpha", "adv-alpha-token", "adv_alpha"), App::new("beta", "adv-beta-token", "adv_beta")];
    for app in &apps {
        config.auth.apps.insert(
            app.name.into(),
            AppCredentials { token: Secret::new(app.token), secret: Secret::new(format!("{}-secret", app.name)) },
        );
    }
    // Off, so that every request reaches validation (the limiter has its own test below).
    config.limits.requests_per_second = 0;
    let max_body = config.server.max_body_bytes;
    let db_url = config.database.url.clone();
    let mut node = TestNode::spawn_with(config).await;

    let seed = std::env::var("XTIMER_ADVERSARIAL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(SEED);
    seed_state(&node, &mut apps, seed).await;
    wait_for_heartbeat_row(&db_url).await;
    let before = snapshot(&db_url).await;
    let panics_before = PRODUCT_PANICS.load(Ordering::SeqCst);

    let mut gen = Gen::new(seed, &apps, max_body);
    let requests: Vec<Hostile> = (0..TOTAL).map(|i| gen.next(i)).collect();
    let started = Instant::now();
    let outcomes = send_all(&node, requests).await;
    let elapsed = started.elapsed();

    let report = Report::from(&outcomes);
    report.print(stack, seed, elapsed);
    assert!(outcomes.len() >= 10_000, "only {} requests", outcomes.len());
    assert!(report.categories.len() == CATEGORIES.len(), "every category ran: {:?}", report.categories.keys());
    let failures: Vec<&String> = outcomes.iter().filter_map(|o| o.failure.as_ref()).collect();
    for failure in failures.iter().take(300) {
        eprintln!("FAILED {failure}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} hostile requests were not answered with a clear error; the first ones:\n{}",
        failures.len(),
        outcomes.len(),
        failures.iter().take(25).map(|f| f.as_str()).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(report.server_errors, 0, "no 5xx");
    assert_eq!(PRODUCT_PANICS.load(Ordering::SeqCst) - panics_before, 0, "panics in product code (see the log)");

    // The node is alive and serves a valid caller (reads only: nothing may be written).
    assert!(
        tokio::time::timeout(Duration::from_millis(200), node.node.exited()).await.is_err(),
        "every loop of the node is still running"
    );
    let alpha = &apps[0];
    let url = format!("{}/api/xtimer/getTimer?id={}&app=alpha", node.base, alpha.timers[0]);
    let reply: Value = node.http.get(url).bearer_auth(alpha.token).send().await.unwrap().json().await.unwrap();
    assert_eq!(reply["code"], 0, "{reply}");
    let url = format!("{}/v1/get_task?task_id={}", node.base, alpha.tasks[0]);
    let reply: Value = node.http.get(url).bearer_auth(alpha.token).send().await.unwrap().json().await.unwrap();
    assert_eq!((reply["code"].as_i64(), reply["task_data"]["status"].as_i64()), (Some(0), Some(1)), "{reply}");

    let after = snapshot(&db_url).await;
    assert_snapshots_equal(&before, &after);
    node.stop().await;
}

/// With a rate limit on, a caller over it gets a 429 in the envelope, naming
/// the limit, with `Retry-After`, on both APIs (one bucket per app). On
/// `/v1` that is the timer API's envelope, not an asyncflow code: Go workers
/// still read a non-zero `code` as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limiter_answers_429_in_the_envelope() {
    let storage = Storage::new(Stack::Embedded).await;
    let mut config = storage.config.clone();
    config.auth.enabled = true;
    let credentials = AppCredentials { token: Secret::new("adv-alpha-token"), secret: Secret::default() };
    config.auth.apps.insert("alpha".into(), credentials);
    config.limits.requests_per_second = 1;
    config.limits.request_burst = 3;
    let node = TestNode::spawn_with(config).await;
    let paths = ["/api/xtimer/getTimer?id=424242&app=alpha", "/v1/get_task?task_id=0a1b_lark_1"];
    let mut statuses = Vec::new();
    for path in paths.iter().flat_map(|p| [p; 3]) {
        let resp = node.http.get(format!("{}{path}", node.base)).bearer_auth("adv-alpha-token").send().await.unwrap();
        let status = resp.status();
        let retry_after = resp.headers().get(RETRY_AFTER).cloned();
        let body: Value = resp.json().await.unwrap();
        statuses.push(status.as_u16());
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(body["code"], 429, "{body}");
            assert!(body["msg"].as_str().unwrap().contains("limits.requests_per_second"), "{body}");
            assert!(retry_after.is_some(), "Retry-After on {path}");
        }
    }
    // The burst of 3 (a bucket refills at 1/s; these calls take milliseconds), then the limit.
    assert_eq!(statuses[..4], [404, 404, 404, 429], "{statuses:?}");
    node.stop().await;
}

// ---------------------------------------------------------------------------
// Seeding and the database snapshot.

/// Timers, task types and tasks for both apps, made with the generator's
/// own base bodies, which proves those bodies valid.
async fn seed_state(node: &TestNode, apps: &mut [App; 2], seed: u64) {
    let mut gen = Gen::new(seed ^ 0xa5a5, apps, usize::MAX);
    let mut bodies = Vec::new();
    for (i, app) in apps.iter().enumerate() {
        let mut timers = vec![gen.valid_timer(app), gen.valid_timer(app), gen.valid_timer(app)];
        // A one-shot far ahead, disabled too: nothing fires during the run.
        timers[1].as_object_mut().unwrap().remove("cron");
        timers[1]["runAt"] = json!("2099-06-01T00:00:00+08:00");
        bodies.push((i, timers, Gen::valid_cfg(app.task_type), gen.valid_task(app)));
    }
    for (i, timers, cfg, task) in bodies {
        let app = &mut apps[i];
        for body in timers {
            let reply = post(node, "/api/xtimer/createTimer", app.token, &body).await;
            assert_eq!(reply["code"], 0, "seeding {}: {reply}", app.name);
            app.timers.push(reply["result"]["id"].as_i64().unwrap());
        }
        app.deleted = app.timers.pop().unwrap();
        let url = format!("{}/api/xtimer/delTimer?id={}&app={}", node.base, app.deleted, app.name);
        let reply: Value = node.http.delete(url).bearer_auth(app.token).send().await.unwrap().json().await.unwrap();
        assert_eq!(reply["code"], 0, "{reply}");

        let reply = post(node, "/v1/register_task", app.token, &json!({ "task_config_data": cfg })).await;
        assert_eq!(reply["code"], 0, "register {}: {reply}", app.task_type);
        for _ in 0..3 {
            let reply = post(node, "/v1/create_task", app.token, &task).await;
            assert_eq!(reply["code"], 0, "create task: {reply}");
            app.tasks.push(reply["task_id"].as_str().unwrap().to_string());
        }
        let set = json!({"task_data": {"task_id": app.tasks[0], "task_stage": "seeded", "status": 1}});
        let reply = post(node, "/v1/set_task", app.token, &set).await;
        assert_eq!(reply["code"], 0, "set task: {reply}");
    }
}

async fn post(node: &TestNode, path: &str, token: &str, body: &Value) -> Value {
    let resp = node.http.post(format!("{}{path}", node.base)).bearer_auth(token).json(body).send().await.unwrap();
    resp.json().await.unwrap()
}

/// Every table's rows, as text, sorted; plus the list of tables (and, on
/// SQLite, every schema object). Keys: table names; `"(schema)"` for the list.
type Snapshot = BTreeMap<String, Vec<String>>;

/// Columns that change with no request: the heartbeat loop rewrites this
/// node's `t_node` row every 2 s (its time and the shards it holds). The
/// row itself, and every other column, is compared.
const LIVE_COLUMNS: [(&str, &str); 2] = [("t_node", "heartbeat_at"), ("t_node", "shards")];

fn is_live(table: &str, column: &str) -> bool {
    LIVE_COLUMNS.iter().any(|(t, c)| *t == table && *c == column)
}

async fn snapshot(url: &str) -> Snapshot {
    if url.starts_with("postgres") {
        snapshot_postgres(url).await
    } else {
        snapshot_sqlite(url).await
    }
}

async fn snapshot_sqlite(url: &str) -> Snapshot {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).unwrap().read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await.expect("open the SQLite file read-only");
    let mut out = Snapshot::new();
    let schema: Vec<(String, String, Option<String>)> =
        sqlx::query_as("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    out.insert("(schema)".into(), schema.iter().map(|s| format!("{s:?}")).collect());
    for (_, table, _) in schema.iter().filter(|(kind, _, _)| kind == "table") {
        let columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info($1) ORDER BY cid")
            .bind(table)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        let row = columns
            .iter()
            .filter(|c| !is_live(table, c))
            .map(|c| format!("quote(\"{c}\")"))
            .collect::<Vec<_>>()
            .join(" || '|' || ");
        let sql = format!("SELECT {row} AS r FROM \"{table}\" ORDER BY r");
        out.insert(table.clone(), sqlx::query_scalar(&sql).fetch_all(&mut conn).await.unwrap());
    }
    conn.close().await.unwrap();
    out
}

async fn snapshot_postgres(url: &str) -> Snapshot {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect to the test database");
    let mut out = Snapshot::new();
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.table_name::text, c.column_name::text, c.data_type::text FROM information_schema.columns c \
         JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
         WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' ORDER BY 1, c.ordinal_position",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    out.insert("(schema)".into(), columns.iter().map(|c| format!("{c:?}")).collect());
    let mut tables: Vec<&String> = columns.iter().map(|(t, _, _)| t).collect();
    tables.dedup();
    for table in tables {
        let live: String = LIVE_COLUMNS.iter().filter(|(t, _)| t == table).map(|(_, c)| format!(" - '{c}'")).collect();
        let sql = format!("SELECT (to_jsonb(t){live})::text AS r FROM \"{table}\" t ORDER BY r");
        out.insert(table.clone(), sqlx::query_scalar(&sql).fetch_all(&mut conn).await.unwrap());
    }
    conn.close().await.unwrap();
    out
}

/// The heartbeat inserts this node's row shortly after start; wait for it,
/// so that the insert is not mistaken for a change made by the run.
async fn wait_for_heartbeat_row(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while snapshot(url).await.get("t_node").is_none_or(Vec::is_empty) {
        assert!(Instant::now() < deadline, "the node's heartbeat row never appeared");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn assert_snapshots_equal(before: &Snapshot, after: &Snapshot) {
    if before == after {
        return;
    }
    let tables: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for table in tables {
        let (b, a) = (before.get(table), after.get(table));
        if b != a {
            let show = |rows: Option<&Vec<String>>| match rows {
                None => "(no such table)".to_string(),
                Some(rows) => rows.iter().take(20).map(|r| format!("  {r}")).collect::<Vec<_>>().join("\n"),
            };
            let gone: Vec<&String> = b.into_iter().flatten().filter(|r| !a.is_some_and(|a| a.contains(r))).collect();
            let new: Vec<&String> = a.into_iter().flatten().filter(|r| !b.is_some_and(|b| b.contains(r))).collect();
            panic!(
                "the database changed during the hostile run; first differing table `{table}`:\n\
                 rows gone: {gone:#?}\nrows new: {new:#?}\nbefore:\n{}\nafter:\n{}",
                show(b),
                show(a)
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Panics.

static PRODUCT_PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics raised outside the tests' own code (a test failing, or a
/// test's handler panicking on purpose, is not counted).
fn count_product_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.location().is_some_and(|l| l.file().starts_with("tests/")) {
                PRODUCT_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

// ---------------------------------------------------------------------------
// Sending and judging.

/// What a reply must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The timer API's envelope: a 4xx, `code` = the status, a non-empty `msg`, `result: null`.
    Envelope,
    /// The asyncflow shape: 200 (401/403 for auth) with a non-zero asyncflow `code` and a non-empty `msg`.
    Asyncflow,
}

/// One hostile request.
struct Hostile {
    category: &'static str,
    expect: Expect,
    method: Method,
    /// Path and query, encoded.
    path: String,
    /// `Authorization` values, in order (none, one, or several).
    auth: Vec<HeaderValue>,
    content_type: Option<&'static str>,
    body: Option<Vec<u8>>,
}

impl Hostile {
    fn new(expect: Expect, method: Method, path: impl Into<String>) -> Self {
        Self { category: "", expect, method, path: path.into(), auth: Vec::new(), content_type: None, body: None }
    }

    /// A timer API call.
    fn timer(method: Method, path: impl Into<String>) -> Self {
        Self::new(Expect::Envelope, method, path)
    }

    /// A `/v1` call.
    fn v1(method: Method, path: impl Into<String>) -> Self {
        Self::new(Expect::Asyncflow, method, path)
    }

    fn bearer(mut self, token: &str) -> Self {
        self.auth.push(HeaderValue::from_str(&format!("Bearer {token}")).expect("token is a header value"));
        self
    }

    fn authorization(mut self, value: HeaderValue) -> Self {
        self.auth.push(value);
        self
    }

    /// A body sent as `application/json`.
    fn json(self, body: impl Into<Vec<u8>>) -> Self {
        self.raw(Some("application/json"), body)
    }

    fn raw(mut self, content_type: Option<&'static str>, body: impl Into<Vec<u8>>) -> Self {
        self.content_type = content_type;
        self.body = Some(body.into());
        self
    }

    fn describe(&self) -> String {
        let path: String = self.path.chars().take(300).collect();
        let auth: Vec<String> =
            self.auth.iter().map(|v| String::from_utf8_lossy(v.as_bytes()).chars().take(60).collect()).collect();
        let body = self.body.as_ref().map(|b| {
            let text: String = String::from_utf8_lossy(b).chars().take(300).collect();
            format!(" body ({} bytes, {:?}): {text}", b.len(), self.content_type)
        });
        format!("[{}] {} {path} auth={auth:?}{}", self.category, self.method, body.unwrap_or_default())
    }
}

/// What became of one request.
struct Outcome {
    category: &'static str,
    status: Option<u16>,
    failure: Option<String>,
}

async fn send_all(node: &TestNode, requests: Vec<Hostile>) -> Vec<Outcome> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let mut lanes: Vec<Vec<Hostile>> = (0..IN_FLIGHT).map(|_| Vec::new()).collect();
    for (i, r) in requests.into_iter().enumerate() {
        lanes[i % IN_FLIGHT].push(r);
    }
    let mut workers = tokio::task::JoinSet::new();
    for lane in lanes {
        let (http, base) = (http.clone(), node.base.clone());
        workers.spawn(async move {
            let mut out = Vec::with_capacity(lane.len());
            for h in lane {
                out.push(send(&http, &base, &h).await);
            }
            out
        });
    }
    let mut outcomes = Vec::new();
    while let Some(lane) = workers.join_next().await {
        outcomes.extend(lane.expect("a sender lane"));
    }
    outcomes
}

async fn send(http: &reqwest::Client, base: &str, h: &Hostile) -> Outcome {
    let mut req = http.request(h.method.clone(), format!("{base}{}", h.path));
    for value in &h.auth {
        req = req.header(AUTHORIZATION, value.clone());
    }
    if let Some(ct) = h.content_type {
        req = req.header(CONTENT_TYPE, ct);
    }
    if let Some(body) = &h.body {
        req = req.body(body.clone());
    }
    let (status, failure) = match req.send().await {
        Err(err) => (None, Some(format!("no answer ({err:?}): {}", h.describe()))),
        Ok(resp) => {
            let status = resp.status();
            let closes = resp.headers().get(CONNECTION).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            match resp.bytes().await {
                Err(err) => {
                    (Some(status.as_u16()), Some(format!("{status}, body unreadable ({err}): {}", h.describe())))
                }
                Ok(body) => {
                    let verdict = judge(h.expect, status, closes, &body);
                    (Some(status.as_u16()), verdict.err().map(|why| format!("{why}: {}", h.describe())))
                }
            }
        }
    };
    Outcome { category: h.category, status, failure }
}

/// Whether a reply is the clear error `expect` asks for (`closes`: it
/// has `Connection: close`).
fn judge(expect: Expect, status: StatusCode, closes: bool, body: &[u8]) -> Result<(), String> {
    let text = || String::from_utf8_lossy(body).chars().take(300).collect::<String>();
    if status.is_server_error() {
        return Err(format!("{status} {}", text()));
    }
    if status == StatusCode::PAYLOAD_TOO_LARGE && !closes {
        // The rest of the body is left unread, so the connection cannot carry another request.
        return Err("413 without `Connection: close`".into());
    }
    let reply: Value =
        serde_json::from_slice(body).map_err(|e| format!("{status} with a body that is not JSON ({e}): {}", text()))?;
    let msg_ok = reply["msg"].as_str().is_some_and(|m| !m.trim().is_empty());
    match expect {
        Expect::Envelope => {
            let ok = status.is_client_error()
                && reply["code"].as_u64() == Some(u64::from(status.as_u16()))
                && msg_ok
                && reply.get("result") == Some(&Value::Null);
            if ok {
                Ok(())
            } else {
                Err(format!("not a 4xx envelope: {status} {}", text()))
            }
        }
        Expect::Asyncflow => {
            let code = reply["code"].as_i64().and_then(|c| i32::try_from(c).ok());
            let status_ok = matches!(status, StatusCode::OK | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
            if status_ok && code.is_some_and(|c| ASYNCFLOW_CODES.contains(&c)) && msg_ok {
                Ok(())
            } else {
                Err(format!("not an asyncflow error: {status} {}", text()))
            }
        }
    }
}

/// Counts of a run.
#[derive(Default)]
struct Report {
    categories: BTreeMap<&'static str, (usize, BTreeMap<u16, usize>)>,
    statuses: BTreeMap<u16, usize>,
    no_answer: usize,
    server_errors: usize,
    failures: usize,
}

impl Report {
    fn from(outcomes: &[Outcome]) -> Self {
        let mut r = Self::default();
        for o in outcomes {
            let entry = r.categories.entry(o.category).or_default();
            entry.0 += 1;
            match o.status {
                Some(s) => {
                    *entry.1.entry(s).or_default() += 1;
                    *r.statuses.entry(s).or_default() += 1;
                    r.server_errors += usize::from(s >= 500);
                }
                None => r.no_answer += 1,
            }
            r.failures += usize::from(o.failure.is_some());
        }
        r
    }

    fn print(&self, stack: Stack, seed: u64, elapsed: Duration) {
        let total: usize = self.categories.values().map(|(n, _)| n).sum();
        eprintln!(
            "adversarial run on {stack:?} (seed {seed:#x}): {total} requests in {:.1} s, \
             {} not answered clearly, {} without an answer, {} 5xx",
            elapsed.as_secs_f64(),
            self.failures,
            self.no_answer,
            self.server_errors
        );
        eprintln!("  by status: {:?}", self.statuses);
        for (category, (n, statuses)) in &self.categories {
            eprintln!("  {category:<18} {n:>5}  {statuses:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// The generator.

/// xorshift64*: small, seeded, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

type Generator = for<'g, 'a> fn(&'g mut Gen<'a>) -> Hostile;

/// Every category, with its generator; requests go round-robin over them.
const CATEGORIES: [(&str, Generator); 20] = [
    ("bad_json", |g| g.bad_json()),
    ("wrong_types", |g| g.wrong_types()),
    ("huge_body", |g| g.huge_body()),
    ("deep_nesting", |g| g.deep_nesting()),
    ("bad_cron", |g| g.bad_cron()),
    ("bad_timezone", |g| g.bad_timezone()),
    ("ssrf_url", |g| g.ssrf_url()),
    ("unknown_id", |g| g.unknown_id()),
    ("other_apps_id", |g| g.other_apps_id()),
    ("bad_token", |g| g.bad_token()),
    ("admin", |g| g.admin()),
    ("wrong_route", |g| g.wrong_route()),
    ("v1_bad_json", |g| g.v1_bad_json()),
    ("v1_wrong_types", |g| g.v1_wrong_types()),
    ("v1_broken_task_id", |g| g.v1_broken_task_id()),
    ("v1_missing_table", |g| g.v1_missing_table()),
    ("v1_hold_and_list", |g| g.v1_hold_and_list()),
    ("v1_set_missing", |g| g.v1_set_missing()),
    ("v1_register", |g| g.v1_register()),
    ("v1_other_apps", |g| g.v1_other_apps()),
];

/// Builds hostile requests from the apps' real ids and a seeded [`Rng`].
struct Gen<'a> {
    rng: Rng,
    apps: &'a [App; 2],
    names: u64,
    max_body: usize,
    /// Where each [`Gen::cycle`] list is.
    turns: BTreeMap<&'static str, usize>,
    /// `(field, value)` pairs that make a valid body invalid, per call.
    mutations: Mutations,
}

/// The mutation tables, each a list of `(field, value)`.
struct Mutations {
    create_timer: Vec<(&'static str, Value)>,
    create_task: Vec<(&'static str, Value)>,
    set_task: Vec<(&'static str, Value)>,
    register_task: Vec<(&'static str, Value)>,
}

impl Mutations {
    fn new() -> Self {
        // Over the length limits (256 bytes) of a task's short texts.
        let long = [("user_id", json!("u".repeat(257))), ("task_stage", json!("s".repeat(257)))];
        Self {
            create_timer: create_timer_mutations(),
            create_task: pairs(&CREATE_TASK_MUTATIONS).into_iter().chain(long.clone()).collect(),
            set_task: pairs(&SET_TASK_MUTATIONS).into_iter().chain(long).collect(),
            register_task: pairs(&REGISTER_TASK_MUTATIONS),
        }
    }
}

const GET: Method = Method::GET;
const POST: Method = Method::POST;
const DELETE: Method = Method::DELETE;

/// Timer routes acting on one timer: method and name.
const TIMER_ROUTES: [(Method, &str); 5] = [
    (Method::GET, "enableTimer"),
    (Method::GET, "unableTimer"),
    (Method::DELETE, "delTimer"),
    (Method::GET, "getTimer"),
    (Method::GET, "getTimerTasks"),
];

/// Strings that try to break out of SQL, paths or templates.
const INJECTIONS: [&str; 10] = [
    "x'; DROP TABLE t_schedule_cfg;--",
    "adv_alpha\"; DELETE FROM t_timer; --",
    "1 OR 1=1",
    "' OR '1'='1",
    "t_adv_alpha_task_1\" WHERE 1=1 --",
    "../../../../etc/passwd",
    "${jndi:ldap://127.0.0.1/a}",
    "{{7*7}}",
    "adv_alpha\0",
    "adv_alpha;SELECT pg_sleep(10)",
];

impl<'a> Gen<'a> {
    fn new(seed: u64, apps: &'a [App; 2], max_body: usize) -> Self {
        Self { rng: Rng(seed | 1), apps, names: 0, max_body, turns: BTreeMap::new(), mutations: Mutations::new() }
    }

    /// Request `i`: category `i mod 20`.
    fn next(&mut self, i: usize) -> Hostile {
        let (category, generate) = CATEGORIES[i % CATEGORIES.len()];
        let mut h = generate(self);
        h.category = category;
        h
    }

    // --- small helpers

    fn below(&mut self, n: usize) -> usize {
        (self.rng.next() % n as u64) as usize
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// The next item of the list named `key`, in turn, so that every item
    /// of a long list is sent (lists start at a random item).
    fn cycle<T: Clone>(&mut self, key: &'static str, items: &[T]) -> T {
        items[self.turn(key, items.len())].clone()
    }

    /// The next index, in turn, into the list named `key` of `len` items.
    fn turn(&mut self, key: &'static str, len: usize) -> usize {
        let start = self.below(len);
        let turn = self.turns.entry(key).or_insert(start);
        *turn += 1;
        *turn % len
    }

    /// The next mutation, in turn, of the table `which` picks.
    fn mutation(
        &mut self,
        key: &'static str,
        which: fn(&Mutations) -> &Vec<(&'static str, Value)>,
    ) -> (&'static str, Value) {
        let i = self.turn(key, which(&self.mutations).len());
        which(&self.mutations)[i].clone()
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// A caller app and the other one.
    fn apps(&mut self) -> (&'a App, &'a App) {
        let i = self.below(2);
        (&self.apps[i], &self.apps[1 - i])
    }

    /// A name no timer has: a request accepted by mistake shows as a
    /// success, not as a name conflict.
    fn fresh_name(&mut self) -> String {
        self.names += 1;
        format!("adv-{}-{}", self.names, self.rng.next() % 1_000_000)
    }

    fn prefix(&mut self) -> &'static str {
        self.pick(&["/api/xtimer", "/xtimer"])
    }

    fn hex(&mut self, len: usize) -> String {
        (0..len).map(|_| char::from_digit((self.rng.next() % 16) as u32, 16).unwrap()).collect()
    }

    fn uuid(&mut self) -> String {
        format!("{}-{}-4{}-a{}-{}", self.hex(8), self.hex(4), self.hex(3), self.hex(3), self.hex(12))
    }

    /// An id no timer has.
    fn unknown_timer_id(&mut self) -> i64 {
        let random = 1_000_000 + (self.rng.next() % 1_000_000_000_000) as i64;
        self.pick(&[0, -1, i64::MIN, i64::MAX, random])
    }

    fn deep(&mut self, depth: usize) -> String {
        if self.chance(50) {
            format!("{}{}", "[".repeat(depth), "]".repeat(depth))
        } else {
            format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
        }
    }

    // --- valid base bodies (seeding proves them valid)

    /// A valid, disabled cron timer of `app`.
    fn valid_timer(&mut self, app: &App) -> Value {
        json!({
            "app": app.name,
            "name": self.fresh_name(),
            "cron": "0 0 3 * * ?",
            "timezone": "Asia/Shanghai",
            "status": 1,
            "notifyHTTPParam": {
                "url": "http://127.0.0.1:9/adv",
                "method": "POST",
                "header": {"X-Adv": "1"},
                "body": "{\"a\":1}"
            },
            "retry": {"maxAttempts": 3, "backoffMs": 1000},
            "misfire": "skip"
        })
    }

    /// A valid create_task body of `app`'s type.
    fn valid_task(&self, app: &App) -> Value {
        json!({"task_data": {"task_type": app.task_type, "user_id": "u-adv", "context": "{\"n\":1}", "priority": 0}})
    }

    /// A valid cfg of `task_type`.
    fn valid_cfg(task_type: &str) -> Value {
        json!({
            "task_type": task_type, "schedule_limit": 10, "schedule_interval": 5, "max_processing_time": 600,
            "max_retry_num": 2, "retry_interval": 5, "max_retry_interval": 60
        })
    }

    /// A createTimer request of `app` with its own token and `body`.
    fn create(&mut self, app: &App, body: &Value) -> Hostile {
        let path = format!("{}/createTimer", self.prefix());
        Hostile::timer(POST, path).bearer(app.token).json(body.to_string())
    }

    /// A createTimer of `app` whose otherwise valid body has `field` = `value` (a path like `retry.backoffMs`).
    fn create_with(&mut self, app: &App, field: &str, value: Value) -> Hostile {
        let mut body = self.valid_timer(app);
        set_path(&mut body, field, value);
        self.create(app, &body)
    }

    // --- the timer API

    /// Bodies that are not JSON, or not the JSON asked for.
    fn bad_json(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let valid = self.valid_timer(app).to_string().into_bytes();
        let path = format!("{}/createTimer", self.prefix());
        let body: Vec<u8> = match self.below(13) {
            12 => {
                // delTimer's fields as an array: serde would read them in order.
                let path = format!("{}/delTimer", self.prefix());
                let body = json!([self.pick(&app.timers), app.name]).to_string();
                let ct = self.pick(&[Some("application/json"), None]);
                return Hostile::timer(DELETE, path).bearer(app.token).raw(ct, body);
            }
            0 => valid[..self.below(valid.len())].to_vec(),
            1 => [valid.clone(), self.pick(&["x", "}", "{}", ",", "\0", "]", "null", "\u{7f}", "{\"a\":1}"]).into()]
                .concat(),
            2 => {
                // Invalid UTF-8 inside the name string.
                let at = find(&valid, b"adv-") + 1;
                let bad: &[u8] =
                    self.pick(&[&b"\xff"[..], b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"]);
                [&valid[..at], bad, &valid[at..]].concat()
            }
            3 => self.pick(&["", " ", "\n\t", "\r\n  "]).into(),
            4 => {
                let top = self.pick(&["[]", "null", "true", "42", "\"x\"", "-0", "1e999"]);
                if self.chance(30) {
                    format!("[{}]", String::from_utf8_lossy(&valid)).into_bytes()
                } else {
                    top.into()
                }
            }
            5 => [&b"\xef\xbb\xbf"[..], &valid].concat(),
            6 => {
                let text = String::from_utf8_lossy(&valid).into_owned();
                match self.below(4) {
                    0 => text.replacen('"', "'", 4),
                    1 => format!("{},}}", &text[..text.len() - 1]),
                    2 => text.replacen("{\"app\"", "{/*c*/\"app\"", 1),
                    _ => text.replacen("\"app\":", "app:", 1),
                }
                .into_bytes()
            }
            7 => {
                let number =
                    self.pick(&["NaN", "Infinity", "-Infinity", "1e400", "0x10", "01", "+1", ".5", "1.", "1_0"]);
                String::from_utf8_lossy(&valid)
                    .replacen("\"status\":1", &format!("\"status\":{number}"), 1)
                    .into_bytes()
            }
            8 => {
                let dup = self.pick(&[
                    "\"app\":\"alpha\",",
                    "\"name\":\"other\",",
                    "\"status\":1,",
                    "\"cron\":\"* * * * *\",",
                ]);
                String::from_utf8_lossy(&valid).replacen('{', &format!("{{{dup}"), 1).into_bytes()
            }
            9 => {
                let bad = self.pick(&["\\ud800", "\\udfff", "\\u00", "\\x41", "\\", "\u{1}", "\n", "\\uZZZZ"]);
                String::from_utf8_lossy(&valid).replacen("adv-", &format!("adv{bad}-"), 1).into_bytes()
            }
            10 => self
                .pick(&[
                    "{\"app\":\"alpha}",
                    "{]",
                    "{\"a\" 1}",
                    "{\"app\"::\"alpha\"}",
                    "{{}}",
                    "{\"notifyHTTPParam\":{\"url\":\"x\"]}",
                    "{,}",
                    "{\"app\":\"alpha\",}",
                ])
                .into(),
            _ => {
                // A valid body, but not declared JSON.
                let ct = self.pick(&[
                    None,
                    Some("text/plain"),
                    Some("application/x-www-form-urlencoded"),
                    Some("multipart/form-data; boundary=x"),
                    Some("application/+json"),
                    Some("application/jsonp"),
                    Some("text/json"),
                    Some("json"),
                    Some("application/xml"),
                    Some(""),
                ]);
                return Hostile::timer(POST, path).bearer(app.token).raw(ct, valid);
            }
        };
        match self.below(6) {
            // delTimer reads a JSON body when there is no query string.
            0 => {
                let path = format!("{}/delTimer", self.prefix());
                let ct = self.pick(&[Some("application/json"), None]);
                Hostile::timer(DELETE, path).bearer(app.token).raw(ct, body)
            }
            1 => {
                let path = format!("{}/admin/issueToken", self.prefix());
                Hostile::timer(POST, path).bearer(ADMIN).json(body)
            }
            _ => Hostile::timer(POST, path).bearer(app.token).json(body),
        }
    }

    /// Each field of createTimer, and each query parameter, with a value of the wrong type or range.
    fn wrong_types(&mut self) -> Hostile {
        let (app, other) = self.apps();
        if self.chance(30) {
            return self.bad_query(app);
        }
        let (field, value) = self.mutation("create_timer", |m| &m.create_timer);
        let mut body = self.valid_timer(app);
        match field {
            "runAt" => {
                body.as_object_mut().unwrap().remove("cron");
            }
            "notifyAsyncflowParam" => {
                body.as_object_mut().unwrap().remove("notifyHTTPParam");
            }
            _ => {}
        }
        let field = field.strip_suffix("+http").unwrap_or(field);
        set_path(&mut body, field, value);
        let text = body.to_string().replace("$OWN_TYPE", app.task_type).replace("$OTHER_TYPE", other.task_type);
        let path = format!("{}/createTimer", self.prefix());
        Hostile::timer(POST, path).bearer(app.token).json(text)
    }

    /// Query strings of the GET routes with wrong types, ranges or unknown keys.
    fn bad_query(&mut self, app: &App) -> Hostile {
        let id = self.pick(&app.timers);
        let a = app.name;
        let bad_id = self.pick(&[
            "abc",
            "1.5",
            "",
            "9223372036854775808",
            "-9223372036854775809",
            "0x10",
            "1e3",
            "%00",
            "１",
            "1%20",
            "NaN",
            "[1]",
        ]);
        let query = match self.below(4) {
            0 => format!("id={bad_id}&app={a}"),
            1 => {
                let q = self.pick(&[
                    "pageSize=0",
                    "pageSize=501",
                    "pageSize=-1",
                    "pageSize=abc",
                    "pageSize=1e3",
                    "pageIndex=0",
                    "pageIndex=-1",
                    "pageIndex=abc",
                    "pageIndex=9223372036854775807",
                    "pageIndex=9223372036854775808",
                    "pageSize=18446744073709551616",
                    "limit=10",
                    "page=2",
                ]);
                let path = format!("{}/getAppTimers?app={a}&{q}", self.prefix());
                return Hostile::timer(GET, path).bearer(app.token);
            }
            2 => {
                let q = self.pick(&[
                    "status=6",
                    "status=-1",
                    "status=abc",
                    "status=9223372036854775808",
                    "pageSize=0",
                    "pageIndex=0",
                    "pageSize=1000",
                    "state=1",
                ]);
                let path = format!("{}/getTimerTasks?id={id}&app={a}&{q}", self.prefix());
                return Hostile::timer(GET, path).bearer(app.token);
            }
            _ => {
                let q = self.pick(&[
                    "id={id}&app={a}&extra=1",
                    "id={id}",
                    "app={a}",
                    "id={id}&app=",
                    "ID={id}&app={a}",
                    "id={id}&app={a}&app=",
                    "id={id}&APP={a}",
                ]);
                q.replace("{id}", &id.to_string()).replace("{a}", a)
            }
        };
        let (method, route) = self.pick(&TIMER_ROUTES);
        let path = format!("{}/{route}?{query}", self.prefix());
        Hostile::timer(method, path).bearer(app.token)
    }

    /// Bodies over `server.max_body_bytes` (413), and fields over their own limits.
    fn huge_body(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let over = self.max_body + 1 + self.below(3 * self.max_body);
        match self.below(8) {
            0 => self.create_with(app, "name", json!("n".repeat(over))),
            1 => self.create_with(app, "notifyHTTPParam.body", json!("b".repeat(over))),
            2 => {
                let path = format!("{}/delTimer", self.prefix());
                let body = json!({"id": app.timers[0], "app": app.name, "pad": "p".repeat(over)}).to_string();
                Hostile::timer(DELETE, path).bearer(app.token).json(body)
            }
            3 => {
                let path = format!("{}/admin/issueToken", self.prefix());
                Hostile::timer(POST, path).bearer(ADMIN).json(json!({"app": "a".repeat(over)}).to_string())
            }
            4 => {
                let path = self.pick(&["/v1/create_task", "/v1/set_task", "/v1/register_task", "/v1/hold_tasks"]);
                let body = json!({"task_data": {"task_type": app.task_type, "context": "c".repeat(over)}}).to_string();
                Hostile::v1(POST, path).bearer(app.token).json(body)
            }
            // Under the body limit, over a field's limit.
            _ => {
                let (field, value) = match self.below(8) {
                    0 => ("name", json!("n".repeat(257 + self.below(5_000)))),
                    1 => (
                        "notifyHTTPParam.url",
                        json!(format!("http://127.0.0.1:9/{}", "u".repeat(2_048 + self.below(5_000)))),
                    ),
                    2 => ("cron", json!(format!("0 0 3 * * ?{}", " ".repeat(250 + self.below(1_000))))),
                    3 => (
                        "notifyHTTPParam.header",
                        Value::Object((0..33 + self.below(100)).map(|i| (format!("X-H{i}"), json!("v"))).collect()),
                    ),
                    4 => ("notifyHTTPParam.header", json!({"X-Big": "v".repeat(4_097 + self.below(10_000))})),
                    5 => (
                        "notifyHTTPParam.header",
                        json!({"X-".to_string() + &"n".repeat(127 + self.below(1_000)): "v"}),
                    ),
                    6 => (
                        "notifyHTTPParam.header",
                        Value::Object((0..5).map(|i| (format!("X-H{i}"), json!("v".repeat(4_000)))).collect()),
                    ),
                    _ => (
                        "cron",
                        json!(format!(
                            "{} * * * * ?",
                            (0..60).map(|s| s.to_string()).collect::<Vec<_>>().join(",").repeat(3)
                        )),
                    ),
                };
                self.create_with(app, field, value)
            }
        }
    }

    /// Up to 10,000 levels of nested arrays or objects in a field or a body.
    fn deep_nesting(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let depth = self.pick(&[129, 200, 1_000, 5_000, 10_000]);
        let deep = self.deep(depth);
        let wrap = |key: &str| format!("{{\"{key}\":{deep}}}");
        match self.below(9) {
            0..=2 => {
                let field = self.pick(&["name", "runAt", "retry", "notifyHTTPParam", "header", "timezone", "cron"]);
                let mut body = self.valid_timer(app);
                if field == "runAt" {
                    body.as_object_mut().unwrap().remove("cron");
                }
                let text = body.to_string();
                let text = match field {
                    "header" => text.replacen("{\"X-Adv\":\"1\"}", &deep, 1),
                    f => {
                        let key = format!("\"{f}\":");
                        match text.find(&key) {
                            Some(_) => replace_value(&text, &key, &deep),
                            None => text.replacen('{', &format!("{{{key}{deep},"), 1),
                        }
                    }
                };
                let path = format!("{}/createTimer", self.prefix());
                Hostile::timer(POST, path).bearer(app.token).json(text)
            }
            3 => {
                let path = format!("{}/delTimer", self.prefix());
                Hostile::timer(DELETE, path).bearer(app.token).json(wrap("id"))
            }
            4 => {
                let path = format!("{}/admin/issueToken", self.prefix());
                Hostile::timer(POST, path).bearer(ADMIN).json(wrap("app"))
            }
            5 => {
                let body = format!("{{\"task_data\":{{\"task_type\":\"{}\",\"context\":{deep}}}}}", app.task_type);
                Hostile::v1(POST, "/v1/create_task").bearer(app.token).json(body)
            }
            6 => Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(format!("{{\"task_data\":{deep}}}")),
            7 => {
                let body = format!("{{\"task_type\":\"{}\",\"limit\":{deep}}}", app.task_type);
                Hostile::v1(POST, "/v1/hold_tasks").bearer(app.token).json(body)
            }
            _ => {
                let body = format!("{{\"task_config_data\":{{\"task_type\":\"adv_new\",\"schedule_limit\":{deep}}}}}");
                Hostile::v1(POST, "/v1/register_task").bearer(app.token).json(body)
            }
        }
    }

    /// Crons that are malformed, out of range, or never fire.
    fn bad_cron(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let cron = self.cycle("cron", BAD_CRONS).to_string();
        let tz = self.pick(&["UTC", "Asia/Shanghai", "America/New_York", "Pacific/Kiritimati"]);
        let mut body = self.valid_timer(app);
        body["cron"] = json!(cron);
        body["timezone"] = json!(tz);
        self.create(app, &body)
    }

    /// Time zones that do not exist, for cron and one-shot timers.
    fn bad_timezone(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let tz = match self.below(8) {
            0 => "Asia/".to_string() + &"x".repeat(10_000),
            _ => self.cycle("timezone", BAD_TIMEZONES).to_string(),
        };
        let mut body = self.valid_timer(app);
        body["timezone"] = json!(tz);
        if self.chance(25) {
            body.as_object_mut().unwrap().remove("cron");
            body["runAt"] = json!("2099-06-01T00:00:00Z");
        }
        self.create(app, &body)
    }

    /// Callback URLs pointing at metadata, link-local and other denied
    /// addresses (in every spelling), and URLs that are not http(s).
    fn ssrf_url(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let url = match self.below(10) {
            0 => format!("http://127.0.0.1:9/{}", "a".repeat(2_049 + self.below(3_000))),
            _ => self.cycle("ssrf", SSRF_URLS).to_string(),
        };
        let method = self.pick(&["POST", "GET", "PUT"]);
        let mut body = self.valid_timer(app);
        body["notifyHTTPParam"]["url"] = json!(url);
        body["notifyHTTPParam"]["method"] = json!(method);
        if self.chance(30) {
            body["status"] = json!(2);
        }
        self.create(app, &body)
    }

    /// Ids no timer has, and the app's deleted timer for the routes that change one.
    fn unknown_id(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let (method, route) = self.pick(&TIMER_ROUTES);
        let changes = matches!(route, "enableTimer" | "unableTimer" | "delTimer");
        let id = if changes && self.chance(25) { app.deleted } else { self.unknown_timer_id() };
        let prefix = self.prefix();
        if route == "delTimer" && self.chance(40) {
            let body = json!({"id": id, "app": app.name}).to_string();
            let ct = self.pick(&[Some("application/json"), None]);
            return Hostile::timer(method, format!("{prefix}/delTimer")).bearer(app.token).raw(ct, body);
        }
        Hostile::timer(method, format!("{prefix}/{route}?id={id}&app={}", app.name)).bearer(app.token)
    }

    /// Another app's timers, app name and listing with this app's token.
    fn other_apps_id(&mut self) -> Hostile {
        let (me, other) = self.apps();
        let prefix = self.prefix();
        let (method, route) = self.pick(&TIMER_ROUTES);
        let theirs = if self.chance(80) { self.pick(&other.timers) } else { other.deleted };
        let (id, app) = match self.below(5) {
            0 => (theirs, me.name),
            1 => (theirs, other.name),
            2 => (self.pick(&me.timers), other.name),
            3 => {
                let path = format!("{prefix}/getAppTimers?app={}&pageIndex=1&pageSize=20", other.name);
                return Hostile::timer(GET, path).bearer(me.token);
            }
            _ => {
                let body = self.valid_timer(other);
                return self.create(me, &body);
            }
        };
        if route == "delTimer" && self.chance(40) {
            let body = json!({"id": id, "app": app}).to_string();
            return Hostile::timer(method, format!("{prefix}/delTimer")).bearer(me.token).json(body);
        }
        Hostile::timer(method, format!("{prefix}/{route}?id={id}&app={app}")).bearer(me.token)
    }

    /// Valid requests on every route, with a missing, garbage, admin or other app's token.
    fn bad_token(&mut self) -> Hostile {
        let (me, other) = self.apps();
        let h = self.valid_request(me);
        let v1 = h.expect == Expect::Asyncflow;
        let mut h = Hostile { auth: Vec::new(), ..h };
        // A token of another app only fails where an app is named (the timer
        // API); on `/v1` it fails on another app's type (see `v1_other_apps`).
        // `nodes` takes any valid token.
        let kinds = if v1 || h.path.ends_with("/nodes") { 12 } else { 14 };
        match self.below(kinds) {
            0 => {}
            1 => h = h.authorization(HeaderValue::from_static("Bearer")),
            2 => h = h.bearer(&format!("garbage-{}", self.hex(16))),
            3 => h = h.bearer(&me.token[..me.token.len() - 1]),
            4 => h = h.bearer(&format!("{}x", me.token)),
            5 => h = h.authorization(HeaderValue::from_str(&format!("Basic {}", me.token)).unwrap()),
            6 => h = h.authorization(HeaderValue::from_str(&format!("Token {}", me.token)).unwrap()),
            7 => h = h.authorization(HeaderValue::from_str(me.token).unwrap()),
            8 => h = h.authorization(HeaderValue::from_str(&format!("Bearer\t{}", me.token)).unwrap()),
            9 => h = h.authorization(HeaderValue::from_bytes(b"Bearer \xff\xfe\x80adv").unwrap()),
            10 => h = h.bearer(&"t".repeat(4_096 + self.below(4_000))),
            11 => h = h.bearer(&format!("{}, Bearer {}", me.token, me.token)),
            12 => h = h.bearer(other.token),
            _ => h = h.bearer(ADMIN),
        }
        if self.chance(10) {
            // Two headers: the first one counts, and it is garbage.
            h.auth.insert(0, HeaderValue::from_static("Bearer not-a-token"));
        }
        h
    }

    /// A request `app`'s token would be allowed to make (used only without that token).
    fn valid_request(&mut self, app: &App) -> Hostile {
        let prefix = self.prefix();
        let id = self.pick(&app.timers);
        let a = app.name;
        match self.below(16) {
            0 => {
                let body = self.valid_timer(app);
                self.create(app, &body)
            }
            1 => Hostile::timer(GET, format!("{prefix}/enableTimer?id={id}&app={a}")),
            2 => Hostile::timer(GET, format!("{prefix}/unableTimer?id={id}&app={a}")),
            3 => Hostile::timer(DELETE, format!("{prefix}/delTimer?id={id}&app={a}")),
            4 => Hostile::timer(GET, format!("{prefix}/getTimer?id={id}&app={a}")),
            5 => Hostile::timer(GET, format!("{prefix}/getAppTimers?app={a}")),
            6 => Hostile::timer(GET, format!("{prefix}/getTimerTasks?id={id}&app={a}")),
            7 => Hostile::timer(GET, format!("{prefix}/nodes")),
            8 => Hostile::v1(POST, "/v1/create_task").json(self.valid_task(app).to_string()),
            9 => Hostile::v1(POST, format!("/v1/hold_tasks?task_type={}&limit=10", app.task_type)),
            10 => {
                let task = self.pick(&app.tasks);
                Hostile::v1(POST, "/v1/set_task").json(json!({"task_data": {"task_id": task, "status": 3}}).to_string())
            }
            11 => Hostile::v1(GET, format!("/v1/get_task?task_id={}", self.pick(&app.tasks))),
            12 => Hostile::v1(GET, format!("/v1/get_task_list?task_type={}&status=1&limit=10", app.task_type)),
            13 => Hostile::v1(GET, "/v1/get_task_schedule_cfg_list"),
            14 => Hostile::v1(GET, format!("/v1/get_task_counts_by_type?task_type={}", app.task_type)),
            _ => {
                let cfg = Self::valid_cfg(&format!("adv_new_{}", self.hex(6)));
                Hostile::v1(POST, "/v1/register_task").json(json!({ "task_config_data": cfg }).to_string())
            }
        }
    }

    /// issueToken without the admin token, and with it but a bad body.
    fn admin(&mut self) -> Hostile {
        let (me, _) = self.apps();
        let path = format!("{}/admin/issueToken", self.prefix());
        let valid = json!({"app": self.pick(&["alpha", "beta", "gamma"])}).to_string();
        match self.below(3) {
            0 => {
                let h = Hostile::timer(POST, path).json(valid);
                match self.below(7) {
                    0 => h,
                    1 => h.bearer(me.token),
                    2 => h.bearer(&ADMIN[..ADMIN.len() - 1]),
                    3 => h.bearer(&ADMIN.to_uppercase()),
                    4 => h.bearer(&format!("{ADMIN}{ADMIN}")),
                    5 => h.authorization(HeaderValue::from_str(&format!("Basic {ADMIN}")).unwrap()),
                    _ => h.bearer(&format!("adv-{}", self.hex(20))),
                }
            }
            1 => {
                let body = self.pick(&[
                    json!({"app": ""}),
                    json!({"app": "a".repeat(129)}),
                    json!({"app": 5}),
                    json!({"app": null}),
                    json!({}),
                    json!({"app": "alpha", "extra": 1}),
                    json!({"app": ["alpha"]}),
                    json!({"App": "alpha"}),
                    json!({"app": {"name": "alpha"}}),
                    json!({"app": true}),
                ]);
                Hostile::timer(POST, path).bearer(ADMIN).json(body.to_string())
            }
            _ => {
                let ct = self.pick(&[None, Some("text/plain"), Some("application/x-www-form-urlencoded")]);
                let body = self.pick(&[valid.as_str(), "app=alpha", "", "[\"alpha\"]", "\"alpha\""]).to_string();
                Hostile::timer(POST, path).bearer(ADMIN).raw(ct, body)
            }
        }
    }

    /// Wrong methods on every route, and paths no route has. The fallbacks
    /// answer the timer API's envelope (404, 405), under `/v1` too: API.md
    /// has no asyncflow code for a call that does not exist, and a Go
    /// worker reads the envelope's non-zero `code` as an error all the same.
    fn wrong_route(&mut self) -> Hostile {
        let (me, _) = self.apps();
        let prefix = self.prefix();
        let other_methods = ["PUT", "PATCH", "OPTIONS", "TRACE", "FOO", "POST", "DELETE", "GET"];
        let id = self.pick(&me.timers);
        let (path, allowed) = match self.below(3) {
            0 => {
                let (method, route) = self.pick(&TIMER_ROUTES);
                (format!("{prefix}/{route}?id={id}&app={}", me.name), vec![method])
            }
            1 => {
                let (path, method) = self.pick(&[
                    (format!("{prefix}/createTimer"), POST),
                    (format!("{prefix}/getAppTimers?app={}", me.name), GET),
                    (format!("{prefix}/admin/issueToken"), POST),
                    (format!("{prefix}/nodes"), GET),
                    ("/healthz".to_string(), GET),
                ]);
                (path, vec![method])
            }
            _ => {
                let (path, method) = self.pick(&[
                    ("/v1/create_task", POST),
                    ("/v1/hold_tasks", POST),
                    ("/v1/set_task", POST),
                    ("/v1/get_task", GET),
                    ("/v1/get_task_list", GET),
                    ("/v1/get_task_schedule_cfg_list", GET),
                    ("/v1/get_task_counts_by_type", GET),
                    ("/v1/register_task", POST),
                    ("/v1/ping", GET),
                ]);
                (path.to_string(), vec![method])
            }
        };
        if self.chance(30) {
            // A path no route has.
            let path = self.pick(&[
                format!("{prefix}/createTimers"),
                format!("{prefix}/"),
                format!("{prefix}/getTimer/{id}"),
                format!("{prefix}/admin/issueTokens"),
                format!("{prefix}/admin/"),
                "/api/xtimer/v1/create_task".to_string(),
                "/v1/".to_string(),
                "/v1/create_task/".to_string(),
                "/V1/create_task".to_string(),
                "/v2/create_task".to_string(),
                "/v1/drop_table".to_string(),
                "/v1/create_task%00".to_string(),
                "/v1/hold_tasks%2F..%2Fregister_task".to_string(),
                "/api/xtimer/createTimer%20".to_string(),
                "/%2e%2e/etc/passwd".to_string(),
                format!("/{}", "a".repeat(4_000)),
                "/api/XTIMER/createTimer".to_string(),
            ]);
            let method = self.pick(&[GET, POST, DELETE]);
            let body = self.valid_timer(me).to_string();
            return Hostile::timer(method, path).bearer(me.token).json(body);
        }
        let method = loop {
            let m = Method::from_bytes(self.pick(&other_methods).as_bytes()).unwrap();
            // axum answers HEAD on GET routes as GET does; it is not a wrong method.
            if !allowed.contains(&m) {
                break m;
            }
        };
        Hostile::timer(method, path).bearer(me.token).json(self.valid_task(me).to_string())
    }

    // --- the task API, /v1

    /// Bodies of the JSON calls that are not JSON, or not the JSON asked for.
    fn v1_bad_json(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let (path, valid) = match self.below(4) {
            0 => ("/v1/create_task", self.valid_task(app)),
            1 => ("/v1/set_task", json!({"task_data": {"task_id": self.pick(&app.tasks), "status": 3}})),
            2 => ("/v1/register_task", json!({"task_config_data": Self::valid_cfg(app.task_type)})),
            _ => ("/v1/hold_tasks", json!({"task_type": app.task_type, "limit": 5})),
        };
        // Go refuses a JSON array where an object is expected; serde would read it field by field.
        let as_array = match valid.get("task_data") {
            Some(data) => json!([data]),
            None => json!([valid]),
        };
        let valid = valid.to_string().into_bytes();
        let body: Vec<u8> = match self.below(10) {
            9 => as_array.to_string().into(),
            0 => valid[..self.below(valid.len())].to_vec(),
            1 => [valid.clone(), self.pick(&["x", "}", "{}", ",", "\0", "]", "null", "{\"a\":1}"]).into()].concat(),
            2 => {
                let at = self.below(valid.len() - 1) + 1;
                let bad: &[u8] = self.pick(&[&b"\xff"[..], b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf"]);
                // Inside a string: after the first quote at or past `at`.
                let at = valid[at..].iter().position(|b| *b == b'"').map_or(1, |p| at + p + 1);
                [&valid[..at], bad, &valid[at..]].concat()
            }
            3 if path != "/v1/hold_tasks" => self.pick(&["", " ", "\n"]).into(),
            4 => self.pick(&["null", "true", "42", "\"x\"", "1e999", "[]", "[1]", "[\"x\", 1]"]).into(),
            5 => [&b"\xef\xbb\xbf"[..], &valid].concat(),
            6 => {
                let text = String::from_utf8_lossy(&valid).into_owned();
                match self.below(3) {
                    0 => text.replacen('"', "'", 2),
                    1 => format!("{},}}", &text[..text.len() - 1]),
                    _ => format!("/*c*/{text}"),
                }
                .into_bytes()
            }
            7 => {
                let bad = self.pick(&["\\ud800", "\\u00", "\\x41", "\u{1}", "\n"]);
                let text = String::from_utf8_lossy(&valid).into_owned();
                let at = text.find(":\"").map_or(1, |p| p + 2);
                format!("{}{bad}{}", &text[..at], &text[at..]).into_bytes()
            }
            _ => self
                .pick(&[
                    "{\"task_data\":{]}",
                    "{\"task_data\"}",
                    "{\"task_data\":}",
                    "{,}",
                    "{\"task_type\"::1}",
                    "{{}}",
                ])
                .into(),
        };
        let ct = self.pick(&[Some("application/json"), None, Some("text/plain")]);
        Hostile::v1(POST, path).bearer(app.token).raw(ct, body)
    }

    /// Fields of create_task, set_task and register_task with values of the wrong type or range.
    fn v1_wrong_types(&mut self) -> Hostile {
        let (app, _) = self.apps();
        match self.below(3) {
            0 => {
                let mut body = self.valid_task(app);
                let (field, value) = self.mutation("create_task", |m| &m.create_task);
                body["task_data"][field] = value;
                if self.chance(10) {
                    // Not an object; the array one is a valid task, field by field.
                    let fields = json!(["u-adv", "", app.task_type, "", 1, 0, 0, 0, 0, "", "{}"]);
                    body["task_data"] =
                        self.pick(&[json!("x"), json!(5), json!(null), json!(true), json!([[]]), fields]);
                }
                Hostile::v1(POST, "/v1/create_task").bearer(app.token).json(body.to_string())
            }
            1 => {
                let task = self.pick(&app.tasks);
                let mut body = json!({"task_data": {"task_id": task, "status": 1, "task_stage": "adv"}});
                let (field, value) = self.mutation("set_task", |m| &m.set_task);
                body["task_data"][field] = value;
                Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(body.to_string())
            }
            _ => {
                let mut cfg = Self::valid_cfg(&format!("adv_new_{}", self.hex(6)));
                let (field, value) = self.mutation("register_task", |m| &m.register_task);
                cfg[field] = value;
                let body = if self.chance(50) { json!({ "task_config_data": cfg }) } else { cfg };
                Hostile::v1(POST, "/v1/register_task").bearer(app.token).json(body.to_string())
            }
        }
    }

    /// get_task and set_task with task ids that cannot name a task.
    fn v1_broken_task_id(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let real = self.pick(&app.tasks);
        let (uuid, _) = real.split_once('_').unwrap();
        let kind = app.task_type.replace('_', "-");
        let id = match self.below(6) {
            // No underscore, or too few parts.
            0 => self.pick(&[
                "abc".to_string(),
                uuid.to_string(),
                "__".into(),
                "_".into(),
                format!("{uuid}_{kind}"),
                format!("{uuid}-{kind}-1"),
                "a_b".into(),
            ]),
            // A uuid part that is not hex.
            1 => {
                let bad = self.pick(&["zzzz", "", "g0", "0x1", "../..", "' OR 1=1 --", "ü", "1 2"]);
                let long = "a".repeat(65);
                let bad = if self.chance(20) { long.as_str() } else { bad };
                format!("{bad}_{kind}_1")
            }
            // A position that is not a whole number from 1.
            2 => {
                let pos = self.pick(&[
                    "-1",
                    "0",
                    "01",
                    "+1",
                    "1.0",
                    "x",
                    "",
                    "99999999999",
                    "4294967296",
                    "18446744073709551616",
                    " 1",
                    "1 ",
                    "1e3",
                    "0x1",
                    "١",
                    "1;DROP TABLE t",
                ]);
                format!("{uuid}_{kind}_{pos}")
            }
            // A type part that cannot be a table name.
            3 => {
                let kind = self.pick(&INJECTIONS).replace('_', "-");
                let kind = if self.chance(20) { "k".repeat(41) } else { kind };
                format!("{uuid}_{kind}_1")
            }
            // 10 KB ids.
            4 => self.pick(&[
                format!("{}_{kind}_1", "a".repeat(10_000)),
                format!("{uuid}_{}_1", "k".repeat(10_000)),
                format!("{uuid}_{kind}_{}", "1".repeat(10_000)),
                "x".repeat(10_000),
            ]),
            _ => self.pick(&[
                format!("{uuid}_{kind}_1\n"),
                format!("{uuid}_{kind}_1\0"),
                format!("\u{202e}{real}"),
                format!("{real}_1"),
                format!("{uuid}_{}_1", app.task_type),
            ]),
        };
        if self.chance(50) {
            let name = self.pick(&["task_id", "taskId"]);
            // With a repeated key, the last one counts: a real id first does not help.
            let first = if self.chance(20) { format!("{name}={}&", enc(&real)) } else { String::new() };
            return Hostile::v1(GET, format!("/v1/get_task?{first}{name}={}", enc(&id))).bearer(app.token);
        }
        let status = self.pick(&[1, 2, 3, 4]);
        let body = if self.chance(20) {
            json!({"task_id": id, "task_data": {"status": status}})
        } else {
            json!({"task_data": {"task_id": id, "status": status, "task_stage": "adv"}})
        };
        Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(body.to_string())
    }

    /// Well-formed ids of tables that do not exist: positions past the
    /// type's last table, types never registered.
    fn v1_missing_table(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let real = self.pick(&app.tasks);
        let (uuid, _) = real.split_once('_').unwrap();
        let kind = app.task_type.replace('_', "-");
        let random = 2 + self.rng.next() % 1_000_000_000;
        let pos: u64 = self.pick(&[2, 3, 99, 1_000_000, u64::from(u32::MAX), random]);
        let id = match self.below(4) {
            0 | 1 => format!("{uuid}_{kind}_{pos}"),
            2 => format!(
                "{uuid}_{}_1",
                self.pick(&["adv-nosuch", "ADV-ALPHA", "Adv-Beta", "t-schedule-cfg", "sqlite-master", "pg-class"])
            ),
            _ => format!("{}_adv-nosuch_{pos}", self.uuid()),
        };
        if self.chance(50) {
            return Hostile::v1(GET, format!("/v1/get_task?task_id={}", enc(&id))).bearer(app.token);
        }
        let body = json!({"task_data": {"task_id": id, "status": self.pick(&[1, 2, 3, 4]), "task_stage": "adv"}});
        Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(body.to_string())
    }

    /// hold_tasks, get_task_list and get_task_counts_by_type with bad types, limits and statuses.
    fn v1_hold_and_list(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let t = app.task_type;
        let bad_type = match self.below(4) {
            0 => self.pick(&INJECTIONS).to_string(),
            1 => self
                .pick(&["adv_nosuch", "ADV_ALPHA", "adv-alpha", "Adv_Beta", "ü", "t_schedule_cfg", "%", "*"])
                .to_string(),
            2 => "k".repeat(41 + self.below(10_000)),
            _ => String::new(),
        };
        let bad_limit = self.pick(&[
            "-1",
            "-9223372036854775808",
            "abc",
            "1.5",
            "1e3",
            "9223372036854775808",
            "0x10",
            "[]",
            "%00",
            "NaN",
            "-5",
            "1 0",
        ]);
        match self.below(7) {
            0 => Hostile::v1(POST, format!("/v1/hold_tasks?task_type={}&limit=10", enc(&bad_type))).bearer(app.token),
            1 => Hostile::v1(POST, format!("/v1/hold_tasks?task_type={t}&limit={}", enc(bad_limit))).bearer(app.token),
            2 => {
                let body = self.pick(&[
                    json!({"task_type": t, "limit": -5}),
                    json!({"task_type": t, "limit": 1.5}),
                    json!({"task_type": t, "limit": true}),
                    json!({"task_type": t, "limit": {}}),
                    json!({"task_type": t, "limit": []}),
                    json!({"task_type": [t]}),
                    json!({"task_type": {"name": t}}),
                    json!({"task_type": true}),
                    json!({"task_type": null}),
                    json!({"limit": 5}),
                    json!({"task_type": bad_type, "limit": 5}),
                    json!({"task_type": t, "limit": "x"}),
                    json!({"task_type": t, "limit": i64::MIN}),
                    json!([t, 5]),
                    json!({"taskType": t, "limit": -1}),
                ]);
                let ct = self.pick(&[Some("application/json"), None]);
                Hostile::v1(POST, "/v1/hold_tasks").bearer(app.token).raw(ct, body.to_string())
            }
            3 => {
                let q = self.pick(&[
                    format!("task_type={t}&status=5"),
                    format!("task_type={t}&status=-1"),
                    format!("task_type={t}&status=9999999999"),
                    format!("task_type={t}&status=abc"),
                    format!("task_type={t}&limit=-1"),
                    format!("task_type={t}&limit=x"),
                    format!("taskType={t}&status=7"),
                    format!("task_type={}&status=1", enc(&bad_type)),
                    "status=1".to_string(),
                    format!("task_type={t}&status=1.0"),
                    format!("task_type={t}&status=1&limit=9223372036854775808"),
                ]);
                Hostile::v1(GET, format!("/v1/get_task_list?{q}")).bearer(app.token)
            }
            4 => {
                Hostile::v1(GET, format!("/v1/get_task_counts_by_type?task_type={}", enc(&bad_type))).bearer(app.token)
            }
            5 => Hostile::v1(
                GET,
                format!(
                    "/v1/get_task_counts_by_type?{}",
                    self.pick(&["", "type=adv_alpha", "task_type=", "taskType="])
                ),
            )
            .bearer(app.token),
            _ => {
                // Raw bytes in the query string.
                let q = self.pick(&[
                    "task_type=%ff%fe&limit=1",
                    "task_type=%zz",
                    "task_type=adv%00alpha",
                    "task_type=adv_alpha%00&limit=1",
                    "task_type=%E2%80%AEadv",
                ]);
                Hostile::v1(POST, format!("/v1/hold_tasks?{q}")).bearer(app.token)
            }
        }
    }

    /// set_task changing the status of tasks that do not exist (in tables
    /// that do), and of real tasks with a status that does not exist.
    fn v1_set_missing(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let kind = app.task_type.replace('_', "-");
        let real = self.pick(&app.tasks);
        let body = match self.below(3) {
            0 | 1 => {
                let id = format!("{}_{kind}_1", self.uuid());
                let len = 1 + self.below(64);
                let id = if self.chance(20) { format!("{}_{kind}_1", self.hex(len)) } else { id };
                let mut data = json!({"task_id": id, "status": self.pick(&[1, 2, 3, 4])});
                if self.chance(50) {
                    data["task_stage"] = json!("adv");
                    data["order_time"] = json!(4_102_444_800i64);
                    data["schedule_log"] = json!("{\"x\":1}");
                }
                json!({ "task_data": data })
            }
            _ => {
                let status = self.pick(&[5, 6, -1, -4, 99, i32::MAX, i32::MIN]);
                json!({"task_data": {"task_id": real, "status": status}})
            }
        };
        Hostile::v1(POST, "/v1/set_task").bearer(app.token).json(body.to_string())
    }

    /// register_task with cfg values out of range, type names that cannot
    /// be table names or clash with a registered one, and broken wrappers.
    fn v1_register(&mut self) -> Hostile {
        let (app, _) = self.apps();
        let fresh = format!("adv_new_{}", self.hex(8));
        let body = match self.below(4) {
            0 | 1 => {
                let mut cfg = Self::valid_cfg(&fresh);
                let (field, value) = self.pick(&[
                    ("schedule_limit", -1),
                    ("schedule_limit", 2_001),
                    ("schedule_limit", i64::MAX),
                    ("schedule_limit", i64::MIN),
                    ("schedule_interval", -1),
                    ("schedule_interval", 3_601),
                    ("max_processing_time", -5),
                    ("max_processing_time", 604_801),
                    ("max_retry_num", -1),
                    ("max_retry_num", 1_001),
                    ("retry_interval", 86_401),
                    ("retry_interval", -86_401),
                    ("retry_interval", i64::MIN),
                    ("max_retry_interval", -1),
                    ("max_retry_interval", 604_801),
                    ("max_retry_interval", i64::MAX),
                ]);
                cfg[field] = json!(value);
                if self.chance(30) {
                    // Its own registered type: re-configuring with a bad value is refused too.
                    cfg["task_type"] = json!(app.task_type);
                }
                json!({ "task_config_data": cfg })
            }
            2 => {
                let name = match self.below(3) {
                    0 => self.pick(&INJECTIONS).to_string(),
                    1 => self
                        .pick(&[
                            "",
                            "a-b",
                            "a b",
                            "é",
                            "adv.new",
                            "ADV_ALPHA",
                            "Adv_Beta",
                            "adv_alphA",
                            "ADV_BETA",
                            "\u{0}",
                        ])
                        .to_string(),
                    _ => "k".repeat(41 + self.below(100)),
                };
                let cfg = Self::valid_cfg(&name);
                self.pick(&[json!({ "task_config_data": cfg }), json!({ "task_type_data": cfg }), cfg])
            }
            _ => self.pick(&[
                json!({"task_config_data": "adv_new"}),
                json!({"task_type_data": [fresh]}),
                json!({"task_config_data": 5}),
                json!({"task_config_data": null, "task_type": fresh}),
                json!({"task_type_data": true}),
                json!({"task_config_data": {}}),
                json!({}),
                json!({"schedule_limit": 10}),
                json!({"task_type": null}),
            ]),
        };
        Hostile::v1(POST, "/v1/register_task").bearer(app.token).json(body.to_string())
    }

    /// Valid calls on another app's task type and tasks, with this app's
    /// token (or the admin's): 403.
    fn v1_other_apps(&mut self) -> Hostile {
        let (me, other) = self.apps();
        let h = self.valid_v1_request(other);
        if self.chance(15) {
            h.bearer(ADMIN)
        } else {
            h.bearer(me.token)
        }
    }

    /// A `/v1` call on `app`'s type or tasks its own token may make.
    fn valid_v1_request(&mut self, app: &App) -> Hostile {
        let task = self.pick(&app.tasks);
        let t = app.task_type;
        match self.below(8) {
            0 => Hostile::v1(POST, "/v1/create_task").json(self.valid_task(app).to_string()),
            1 => Hostile::v1(POST, format!("/v1/hold_tasks?task_type={t}&limit={}", self.pick(&[0, 1, 10, 2000]))),
            2 => Hostile::v1(POST, "/v1/hold_tasks").json(json!({"task_type": t, "limit": 1}).to_string()),
            3 => {
                let status = self.pick(&[1, 2, 3, 4]);
                let body = json!({"task_data": {"task_id": task, "status": status, "task_stage": "hijacked"}});
                Hostile::v1(POST, "/v1/set_task").json(body.to_string())
            }
            4 => Hostile::v1(GET, format!("/v1/get_task?{}={task}", self.pick(&["task_id", "taskId"]))),
            5 => Hostile::v1(GET, format!("/v1/get_task_list?task_type={t}&status={}&limit=10", self.pick(&[0, 1]))),
            6 => Hostile::v1(GET, format!("/v1/get_task_counts_by_type?task_type={t}")),
            _ => {
                let mut cfg = Self::valid_cfg(t);
                cfg["schedule_limit"] = json!(2_000);
                Hostile::v1(POST, "/v1/register_task").json(json!({ "task_config_data": cfg }).to_string())
            }
        }
    }
}

/// Fields of create_task's `task_data`, and the values (as JSON) it must refuse.
const CREATE_TASK_MUTATIONS: [(&str, &str); 13] = [
    ("task_type", r#"[5, [], {}, null, true]"#),
    ("user_id", "[5]"),
    ("task_stage", r#"[[], {}]"#),
    ("status", r#"["1", 1.5, 9223372036854775807]"#),
    ("priority", r#"["5", 1.5, 18446744073709551615, 9223372036854775807, -9223372036854775808, -100000000000]"#),
    ("crt_retry_num", r#"["x"]"#),
    ("max_retry_num", "[18446744073709551615]"),
    ("order_time", r#"["now", 1.5]"#),
    ("context", r#"[{}, [1], 5]"#),
    ("schedule_log", "[{}]"),
    ("create_time", "[5]"),
    ("modify_time", "[[]]"),
    ("task_id", "[7]"),
];

/// Fields of set_task's `task_data` (on a real task), and the values (as JSON) it must refuse.
const SET_TASK_MUTATIONS: [(&str, &str); 11] = [
    ("task_id", r#"[5, [], null]"#),
    ("status", r#"["3", 5, -1, 9, 9223372036854775807, 2.5]"#),
    ("priority", r#"["x", -9223372036854775808, 100000000000]"#),
    ("crt_retry_num", "[9223372036854775807, -100000000000]"),
    ("max_retry_num", "[-9223372036854775808]"),
    ("max_retry_interval", "[9223372036854775807]"),
    ("user_id", r#"[["u"]]"#),
    ("task_stage", "[7]"),
    ("context", r#"[{"a": 1}]"#),
    ("schedule_log", "[[]]"),
    ("order_time", r#"["later", 18446744073709551615]"#),
];

/// Fields of a task type's cfg, and the values (as JSON) register_task must
/// refuse (strings are the right type for `task_type` and `create_time`).
const REGISTER_TASK_MUTATIONS: [(&str, &str); 8] = [
    ("schedule_limit", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("schedule_interval", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("max_processing_time", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("max_retry_num", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("retry_interval", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("max_retry_interval", r#"["10", 1.5, [], {}, true, null, 18446744073709551615]"#),
    ("task_type", r#"[1.5, [], {}, true, 18446744073709551615]"#),
    ("create_time", r#"[1.5, [], {}, true, 18446744073709551615]"#),
];

/// `(field, value)` pairs from a table of fields and the values (a JSON
/// array) each must refuse.
fn pairs(table: &[(&'static str, &str)]) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for (field, values) in table {
        let values: Vec<Value> = serde_json::from_str(values).unwrap_or_else(|e| panic!("{field}: {e}"));
        out.extend(values.into_iter().map(|v| (*field, v)));
    }
    out
}

/// `(field, value)` pairs, each of which makes a valid createTimer body
/// invalid. A `runAt` replaces `cron`; a `notifyAsyncflowParam` replaces
/// `notifyHTTPParam`, but with `+http` it comes beside it. `$OWN_TYPE` and
/// `$OTHER_TYPE` stand for the caller's and the other app's task types.
fn create_timer_mutations() -> Vec<(&'static str, Value)> {
    // Each field, and the values (as JSON) it must refuse.
    let table = [
        ("app", r#"[5, [], {}, null, true, ["alpha"]]"#),
        ("name", r#"["", 7, [], {}, null, false]"#),
        ("cron", r#"[5, [], {}, true, ["0 0 3 * * ?"]]"#),
        ("timezone", r#"[8, [], {}, true, ["UTC"]]"#),
        (
            "status",
            r#"["2", "1", 0, 3, -1, 2.0, 1.5, true, [],
               9223372036854775807, -9223372036854775808, 18446744073709551615]"#,
        ),
        (
            "notifyHTTPParam",
            r#"[null, "http://127.0.0.1:9/", [], ["http://127.0.0.1:9/adv", "POST"], 5, true, {},
               {"method": "POST"}]"#,
        ),
        ("notifyHTTPParam.url", r#"[5, [], {}, null, true, ""]"#),
        (
            "notifyHTTPParam.method",
            r#"[5, [], {}, true, "CONNECT", "TRACE", "OPTIONS", "HEAD", "GE T", "", "POST\r\nX: y", "ПОСТ"]"#,
        ),
        (
            "notifyHTTPParam.header",
            r#"["X-A: 1", [], [["X-A", "1"]], 5, {"X-A": 5}, {"X-A": null}, {"X-A": []}, {"Bad Header": "v"},
               {"X-A": "line\nbreak"}, {"X-A": "a\rb"}, {"Content-Length": "5"}, {"Transfer-Encoding": "chunked"},
               {"x-a": "1", "X-A": "2"}, {"": "v"}, {"X-A\u0000": "v"}, {"Connection": "close"}, {"Host:": "x"},
               {"X-Ü": "v"}]"#,
        ),
        ("notifyHTTPParam.body", r#"[5, {}, [], true, {"a": 1}]"#),
        ("notifyHTTPParam.timeout", "[5]"),
        ("retry", r#"["3", 5, [], [3, 1000], true, {"attempts": 3}]"#),
        ("retry.maxAttempts", r#"[0, 21, -1, "3", 3.5, 18446744073709551615, -9223372036854775808, [3], true]"#),
        (
            "retry.backoffMs",
            r#"[-1, 600001, "1000", 1e3, -9223372036854775808, 9223372036854775807, 18446744073709551615, {}]"#,
        ),
        ("misfire", r#"[5, "", "never", "fire_twice", "skip ", [], true, "FIRE-ALL"]"#),
        // Every way of not being a future time.
        (
            "runAt",
            r#"[true, [], {}, 1.5, 1.9e12, 18446744073709551615, 9223372036854775807, -9223372036854775808,
               -1, 0, 1700000000, "2020-01-01T00:00:00Z", "2026-13-01T00:00:00Z", "tomorrow",
               "2099-01-01T00:00:00", "2099-01-01", "10000-01-01T00:00:00Z", "+275760-09-13T00:00:00Z", "",
               "2099-02-30T00:00:00Z", "2099-01-01T25:00:00Z", 253402300800000]"#,
        ),
        // The task each fire creates: another app's type, types that do not
        // exist or cannot, fields over their limits, and the wrong shapes.
        (
            "notifyAsyncflowParam",
            r#"[{"taskType": "$OTHER_TYPE"}, {"taskType": "$OTHER_TYPE", "taskStage": "s", "context": {"a": 1}},
               {"taskType": "adv_nosuch"}, {"taskType": "ADV_ALPHA"},
               {"taskType": "x'; DROP TABLE t_schedule_cfg;--"}, {"taskType": ""},
               {"taskType": "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"}, {"taskType": 5},
               {"taskType": ["$OWN_TYPE"]}, {"taskType": "$OWN_TYPE", "taskStage": 5},
               {"taskType": "$OWN_TYPE", "extra": 1}, {"stage": "s"}, ["$OWN_TYPE"], "$OWN_TYPE", null]"#,
        ),
        ("notifyAsyncflowParam+http", r#"[{"taskType": "$OWN_TYPE"}]"#),
        // Fields that do not exist.
        ("id", "[1]"),
        ("Status", "[1]"),
        ("notifyHttpParam", r#"[{"url": "http://127.0.0.1:9/adv"}]"#),
        ("run_at", r#"["2099-06-01T00:00:00Z"]"#),
        ("__proto__", "[{}]"),
        ("createTime", "[1]"),
        ("owner", r#"["beta"]"#),
        ("app ", r#"["alpha"]"#),
    ];
    let mut out = pairs(&table);
    // Over a length limit.
    out.push(("name", json!("x".repeat(257))));
    out.push(("notifyAsyncflowParam", json!({"taskType": "$OWN_TYPE", "taskStage": "s".repeat(257)})));
    out
}

/// Crons that are malformed, out of range, or never fire.
const BAD_CRONS: &[&str] = &[
    "",
    " ",
    "*",
    "* *",
    "* * *",
    "* * * *",
    "* * * * * * * *",
    "0 0 0 1 1 ? 2030 extra",
    "60 * * * *",
    "* 24 * * *",
    "* * 32 * *",
    "* * 0 * *",
    "* * * 13 *",
    "* * * 0 *",
    "* * * * 8",
    "61 * * * * *",
    "* 60 * * * *",
    "*/0 * * * *",
    "0/0 * * * * *",
    "*/-1 * * * *",
    "1-60/0 * * * * ?",
    "L * * * *",
    "W * * * *",
    "# * * * *",
    "* L * * *",
    "* * * * * 8#1",
    "* * * * * 1#0",
    "0 0 0 32W * ?",
    "99999999999999999999 * * * *",
    "4294967296 * * * * *",
    "-1 * * * *",
    "٣ * * * *",
    "* * * * MON-FRII",
    "* * * JANUARY *",
    "* * * * * ? 1969",
    "0 0 0 1 1 ? 1970",
    "0 0 0 1 1 ? 2020",
    "0 0 0 1 1 ? 2020-2024",
    "0 0 0 30 2 ?",
    "0 0 0 31 4 ? *",
    "0 0 0 31 2,4,6,9,11 ?",
    "0 0 0 30 2 ? 2030-2040",
    "* * * * * ? 10000",
    "* * * * * ? 99999",
    "@every 5s",
    "@reboot",
    "@yearly 5",
    "@",
    "@@daily",
    "@ daily",
    "@secondly",
    "*\0 * * * *",
    "* * * * *\n* * * * *",
    "0 0 3 * * ? ; DROP TABLE t_timer",
    "${jndi:ldap://127.0.0.1/a}",
    "1,2,,3 * * * *",
    ",* * * * *",
    "*/ * * * *",
    "1- * * * *",
    "? ? ? ? ? ?",
    "0 0 0 29 2 ? 2100",
    "0 0 0 29 2 ? 2097-2099",
    "0 0 0 L 2 ? 1900-2000",
    "0 0 12 ? * 5#6",
    "0 0 12 ? * 8L",
    "0 0 12 LW-1 * ?",
    "0 0 12 1W-3 * ?",
    "0 0 12 ? * MON#2#3",
    "0 0 12 ? * SUN-",
    "0 0 12 ? * L-3",
    "* * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * *",
    "1 2 3 4 5 6 7 8",
];

/// Time zones that do not exist.
const BAD_TIMEZONES: &[&str] = &[
    "Mars/Olympus_Mons",
    "",
    " ",
    "UTC ",
    " UTC",
    "utc",
    "GMT+8",
    "UTC+25",
    "+08:00",
    "Etc/GMT+13",
    "Etc/GMT-15",
    "Asia/Shanghai\0",
    "../../../etc/passwd",
    "/etc/localtime",
    "America/New York",
    "EST5EDT,M3.2.0,M11.1.0",
    "asia/shanghai",
    "ASIA/SHANGHAI",
    "Ásia/Shanghai",
    "Asia/Shanghai;DROP TABLE t_timer",
    "Asia\\Shanghai",
    "Asia/Shanghai/Extra",
    "Local",
    "localtime",
    "Z",
    "Europe/Kyiv\n",
    "${TZ}",
    "亚洲/上海",
];

/// Callback URLs that must be refused: denied addresses in every
/// spelling, schemes that are not http(s), and URLs that do not parse.
const SSRF_URLS: &[&str] = &[
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://169.254.169.254:80/",
    "https://169.254.169.254/",
    "HTTP://169.254.169.254/",
    "http://169.254.170.2/v2/credentials",
    "http://169.254.0.1/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fe80::1]/",
    "http://[fe80::a9fe:a9fe]:8080/",
    "http://100.100.100.200/latest/meta-data/",
    "http://0.0.0.0/",
    "http://0.0.0.0:9/",
    "http://0/",
    "http://[::]/",
    "http://[::]:9/",
    "http://255.255.255.255/",
    "http://224.0.0.1/",
    "http://239.255.255.250:1900/",
    "http://[ff02::1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[::169.254.169.254]/",
    "http://2852039166/",
    "http://0xa9fea9fe/",
    "http://0251.0376.0251.0376/",
    "http://169.254.43518/",
    "http://user:pass@169.254.169.254/",
    "http://127.0.0.1@169.254.169.254/",
    "http://127.0.0.1:80@169.254.169.254/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "ftp://127.0.0.1/",
    "dict://127.0.0.1:11211/stats",
    "ldap://127.0.0.1/",
    "javascript:alert(1)",
    "data:text/plain,hi",
    "//169.254.169.254/",
    "169.254.169.254/latest",
    "http:/169.254.169.254/",
    "http://",
    "http://:80/",
    "http:// 169.254.169.254/",
    "http://169.254.169.254\\@127.0.0.1/",
    "http://ⓔⓧⓐⓜⓟⓛⓔ.com/",
    "http://169。254。169。254/",
    "http://[fe80::1%25eth0]/",
    "http://[169.254.169.254]/",
];

/// Sets the value at a dotted `path` of `body`.
fn set_path(body: &mut Value, path: &str, value: Value) {
    let mut at = body;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            at[part] = value;
            return;
        }
        at = &mut at[part];
    }
}

/// `text` with the JSON value after `key` (a `"key":` that occurs) replaced by `new`.
fn replace_value(text: &str, key: &str, new: &str) -> String {
    let start = text.find(key).unwrap() + key.len();
    let mut de = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    de.next().unwrap().unwrap();
    let end = start + de.byte_offset();
    format!("{}{new}{}", &text[..start], &text[end..])
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack.windows(needle.len()).position(|w| w == needle).expect("needle")
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
