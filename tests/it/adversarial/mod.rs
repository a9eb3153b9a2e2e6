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
//!
//! # Layout
//!
//! - this module: the run itself, the apps, and the generator ([`Gen`]):
//!   its seeded choices, the valid base bodies it mutates, and the
//!   categories it goes round-robin over;
//! - the generator's categories, one module per family: [`inputs`]
//!   (malformed input on the timer API), [`access`] (ids, tokens, admin),
//!   [`routes`] (wrong methods and paths), [`v1`] (the task API);
//! - [`judge`]: sending the requests and judging each reply;
//! - [`state`]: seeding, the database snapshot, the panic count;
//! - [`limits`]: the rate limiter's 429, a test of its own.

mod access;
mod inputs;
mod judge;
mod limits;
mod routes;
mod state;
mod v1;

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

use inputs::create_timer_mutations;
use judge::{send_all, Expect, Hostile, Report};
use state::{
    assert_snapshots_equal, count_product_panics, seed_state, snapshot, wait_for_heartbeat_row, PRODUCT_PANICS,
};
use v1::{pairs, CREATE_TASK_MUTATIONS, REGISTER_TASK_MUTATIONS, SET_TASK_MUTATIONS};

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
}

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
