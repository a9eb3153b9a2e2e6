//! The one configuration tree.
//!
//! Loaded by [`Config::load`] in this order: defaults, then a TOML file (if
//! given), then `XTIMER_…` environment variables with `__` between a section
//! and its field (`XTIMER_EXECUTOR__CONCURRENCY=500`). Every field has a
//! default, so `xtimer serve` runs with no file at all. Durations are
//! milliseconds and their field names end in `_ms`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub redis: RedisConfig,
    pub shard: ShardConfig,
    pub migrator: MigratorConfig,
    pub scheduler: SchedulerConfig,
    pub trigger: TriggerConfig,
    pub executor: ExecutorConfig,
    pub reconciler: ReconcilerConfig,
    pub retention: RetentionConfig,
    pub asyncflow: AsyncflowConfig,
    pub auth: AuthConfig,
    pub callback: CallbackConfig,
    pub limits: LimitsConfig,
    pub telemetry: TelemetryConfig,
}

/// The HTTP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on. Defaults to `127.0.0.1:8080`.
    pub listen: String,
    /// Largest request body accepted, bytes. Defaults to 65536.
    pub max_body_bytes: usize,
    /// Largest body of a batch call (`createTimers`, up to 1,000 timers),
    /// bytes. Defaults to 2097152.
    pub max_batch_body_bytes: usize,
    /// Grace period for in-flight work at shutdown, ms. Defaults to 10000.
    pub shutdown_grace_ms: u64,
    /// How long a connection may take to send a whole request head
    /// (request line and headers), counted from when it is accepted or its
    /// previous response was sent, ms. Past it the connection is closed
    /// without an answer. Defaults to 10000.
    pub header_read_timeout_ms: u64,
    /// How long a request body may take to arrive in full, counted from the
    /// end of its head, ms. Past it the request is answered 408 and the
    /// connection is closed. Defaults to 10000.
    pub body_read_timeout_ms: u64,
    /// How long a connection may sit with no request in progress and no
    /// byte moving either way, ms; then it is closed. Waiting for the next
    /// request's head also counts against `header_read_timeout_ms`, so an
    /// idle keep-alive connection is closed after the smaller of the two.
    /// Defaults to 10000.
    pub idle_timeout_ms: u64,
    /// Most connections open at once. Further clients wait in the listen
    /// backlog (and past it are refused by the operating system) until a
    /// connection closes; the timeouts above bound how long that takes.
    /// Each connection holds a file descriptor, so keep the process's
    /// descriptor limit above this. Defaults to 4096.
    pub max_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            max_body_bytes: 64 * 1024,
            max_batch_body_bytes: 2 * 1024 * 1024,
            shutdown_grace_ms: 10_000,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 10_000,
            idle_timeout_ms: 10_000,
            max_connections: 4_096,
        }
    }
}

/// The SQL database, the source of truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `sqlite://PATH` (created if missing), `postgres://...` or
    /// `mysql://...`; a server URL may name several hosts
    /// (`postgres://h1:5432,h2:5432/xtimer`): the node uses the one that
    /// takes writes and follows a failover. Defaults to `sqlite://xtimer.db`
    /// in the working directory.
    pub url: String,
    /// Connection pool size. Defaults to 8.
    pub max_connections: u32,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self { url: "sqlite://xtimer.db".into(), max_connections: 8 }
    }
}

/// Redis, the shard index and locks of a cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    /// `redis://HOST:PORT[/DB]`; empty runs the embedded in-process index
    /// and locks (one node only). A Redis Cluster: several comma-separated
    /// `redis://HOST:PORT` URLs of its nodes (or one, with `cluster`).
    /// Under Sentinel: `redis+sentinel://S1:26379,S2:26379/MASTER`.
    /// Defaults to empty.
    pub url: String,
    /// Whether `url` names a node of a Redis Cluster (implied by several
    /// URLs). Defaults to false.
    pub cluster: bool,
}

/// Sharding of fires, shared by the migrator (which indexes) and the
/// scheduler (which locks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShardConfig {
    /// Buckets per minute. Defaults to 16.
    pub buckets: u32,
    /// Prefix of every shard and lock key. Defaults to `xtimer`.
    pub key_prefix: String,
}

impl Default for ShardConfig {
    fn default() -> Self {
        Self { buckets: 16, key_prefix: "xtimer".into() }
    }
}

/// The migrator: expands enabled timers into fires one step ahead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MigratorConfig {
    /// Length of a step, ms; each step expands up to two steps ahead. Defaults to 60000.
    pub step_ms: u64,
    /// Timers per page when expanding. Defaults to 500.
    pub page_size: u32,
    /// Most fires of one timer per expansion (guards against runaway crons). Defaults to 1000.
    pub max_fires_per_timer: usize,
}

impl Default for MigratorConfig {
    fn default() -> Self {
        Self { step_ms: 60_000, page_size: 500, max_fires_per_timer: 1_000 }
    }
}

/// Retention: fire records past their keep time are deleted, in small
/// batches, by one node at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// How long a fire record is kept after its run time, ms. Defaults to 604800000 (7 days).
    pub keep_fires_ms: u64,
    /// How often expired records are deleted, ms. Defaults to 60000.
    pub period_ms: u64,
    /// Records deleted per statement. Defaults to 5000.
    pub batch_size: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self { keep_fires_ms: 7 * 24 * 3_600_000, period_ms: 60_000, batch_size: 5_000 }
    }
}

/// The scheduler: per-tick shard locking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Tick period, ms. Defaults to 1000.
    pub tick_ms: u64,
    /// Lease of a shard lock, renewed every third of it while the trigger
    /// works, ms: a dead node's shards are taken over within about this
    /// long plus a tick. Defaults to 3000.
    pub lease_ms: u64,
    /// How long a finished shard's lock stays as its done marker, ms. Defaults to 130000.
    pub done_ttl_ms: u64,
    /// How long before a minute starts its shards are taken, ms. Defaults to 5000.
    pub lookahead_ms: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self { tick_ms: 1_000, lease_ms: 3_000, done_ttl_ms: 130_000, lookahead_ms: 5_000 }
    }
}

/// The trigger: the node's timer wheel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TriggerConfig {
    /// How long before its time a fire is claimed, ms, so the callback
    /// leaves on the millisecond; fires due within a tenth of this of each
    /// other are claimed together, up to that much earlier. Defaults to 500.
    pub claim_ahead_ms: u64,
    /// Period of re-reading a held shard for late additions, ms. Defaults to 1000.
    pub repoll_ms: u64,
}

impl Default for TriggerConfig {
    fn default() -> Self {
        Self { claim_ahead_ms: 500, repoll_ms: 1_000 }
    }
}

impl TriggerConfig {
    /// How much earlier than `claim_ahead` a fire may be handed over for
    /// its claim, ms: a tenth of it. Fires due within this of each other
    /// are claimed in one batch after one wake-up of the wheel.
    pub fn handover_window_ms(&self) -> u64 {
        self.claim_ahead_ms / 10
    }
}

/// The executor: claims, callbacks, results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorConfig {
    /// Callbacks in flight at once; as many keep-alive connections per host
    /// are kept, so a busy receiver is not reconnected per call. Size it to
    /// receiver latency × fire rate: more than that only queues work. Defaults to 256.
    pub concurrency: usize,
    /// Timeout of one callback, ms. Defaults to 10000.
    pub timeout_ms: u64,
    /// Lease of a claimed fire past its run time, ms. Defaults to 60000.
    pub lease_ms: u64,
    /// Most fires per claim or result transaction. Defaults to 2000.
    pub batch_size: usize,
    /// Bytes of a response body kept in a fire's output. Defaults to 512.
    pub max_output_bytes: usize,
    /// How long a claim waits for more due fires to join its batch, ms.
    /// Fires are claimed `claim_ahead` early, so this costs no lateness;
    /// it turns many small statements into few large ones (PostgreSQL pays
    /// per statement). Defaults to 20.
    pub claim_linger_ms: u64,
    /// How long a result write waits for more results to join its batch, ms. Defaults to 50.
    pub record_linger_ms: u64,
    /// Callbacks in flight at once to one host (`host:port`): a receiver
    /// that hangs holds at most this many of `concurrency`, and the others
    /// wait their turn without blocking other hosts. Defaults to 64.
    pub per_host_concurrency: usize,
    /// Callbacks in flight at once for one app, all hosts together. Defaults to 128.
    pub per_app_concurrency: usize,
    /// Failed attempts in a row (timeouts, refused or reset connections,
    /// 5xx) after which a host's circuit opens: its fires fail at once
    /// (and retry per their policy) instead of waiting on it. Defaults to 5.
    pub breaker_failures: u32,
    /// How long an open circuit stays open before one probe is let
    /// through, ms; doubles while probes keep failing, up to 16 times. Defaults to 5000.
    pub breaker_open_ms: u64,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            concurrency: 256,
            timeout_ms: 10_000,
            lease_ms: 60_000,
            batch_size: 2_000,
            max_output_bytes: 512,
            claim_linger_ms: 20,
            record_linger_ms: 50,
            per_host_concurrency: 64,
            per_app_concurrency: 128,
            breaker_failures: 5,
            breaker_open_ms: 5_000,
        }
    }
}

/// The reconciler: fires from SQL what the shard index missed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReconcilerConfig {
    /// Period of the sweep, ms. Defaults to 1000.
    pub period_ms: u64,
    /// How long past due a pending fire must be before the sweep takes it, ms. Defaults to 3000.
    pub grace_ms: u64,
    /// A fire late by less than this always fires (a crash, a takeover, an
    /// outage); the timer's `misfire` policy applies only to fires later
    /// than this, ms. Defaults to 60000.
    #[serde(alias = "misfire_window_ms")]
    pub misfire_threshold_ms: u64,
    /// A node whose heartbeat (written every third of this) is older than this is
    /// dead: the fires it had claimed are taken over at once instead of
    /// waiting for their lease, ms. Defaults to 3000.
    pub node_timeout_ms: u64,
    /// Fires per sweep page. Defaults to 1000.
    pub page_size: u32,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        Self {
            period_ms: 1_000,
            grace_ms: 3_000,
            misfire_threshold_ms: 60_000,
            node_timeout_ms: 3_000,
            page_size: 1_000,
        }
    }
}

/// The asyncflow task queue (`/v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AsyncflowConfig {
    /// Rows a task table holds before new tasks go to the next one. Defaults to 5000000.
    pub table_row_limit: u64,
    /// Period of the governance pass (timeouts, rolling, begin_pos), ms. Defaults to 1000.
    pub governor_period_ms: u64,
    /// Most tasks one create batch writes in one transaction. Defaults to 1000.
    pub create_batch_size: usize,
}

impl Default for AsyncflowConfig {
    fn default() -> Self {
        Self { table_row_limit: 5_000_000, governor_period_ms: 1_000, create_batch_size: 1_000 }
    }
}

/// A secret string (token, signing key): `Debug` never prints it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether it is empty (not set).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() { "Secret(\"\")" } else { "Secret(***)" })
    }
}

/// API authentication: per-app bearer tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Whether every timer and task call needs `Authorization: Bearer
    /// <token>` with a token of its app (401 without one, 403 with another
    /// app's). Off, anyone who can reach the port acts on any app, so the
    /// node warns when it listens on a non-loopback address. Defaults to false.
    pub enabled: bool,
    /// Token of the admin endpoints (`POST /api/xtimer/admin/issueToken`);
    /// empty turns them off. Defaults to empty.
    pub admin_token: Secret,
    /// Static credentials per app, in the file:
    /// `[auth.apps.billing]` with `token = "..."` and an optional signing
    /// `secret = "..."`. Defaults to none.
    pub apps: BTreeMap<String, AppCredentials>,
    /// A file of more static credentials, one app per line:
    /// `app token [secret]`; blank lines and `#` comments are skipped.
    /// Keeps tokens out of the config file and the environment
    /// (`XTIMER_AUTH__TOKENS_FILE=/run/secrets/xtimer-tokens`). Defaults to empty (none).
    pub tokens_file: String,
}

/// One app's static credentials.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppCredentials {
    /// Its API token. Defaults to empty (no token: the app cannot call).
    pub token: Secret,
    /// The key its callbacks are signed with; empty uses the app's issued
    /// secret, else the server-wide one. Defaults to empty.
    pub secret: Secret,
}

impl AuthConfig {
    /// Every static credential: `apps`, then the lines of `tokens_file`
    /// (which win). Fails naming the file and line at fault.
    pub fn credentials(&self) -> Result<BTreeMap<String, AppCredentials>> {
        let mut out = self.apps.clone();
        if self.tokens_file.is_empty() {
            return Ok(out);
        }
        let text = std::fs::read_to_string(&self.tokens_file)
            .map_err(|e| Error::Config(vec![format!("auth.tokens_file `{}`: {e}", self.tokens_file)]))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let parts: Vec<&str> = line.split_whitespace().collect();
            let (app, token, secret) = match parts[..] {
                [app, token] => (app, token, ""),
                [app, token, secret] => (app, token, secret),
                _ => {
                    return Err(Error::Config(vec![format!(
                        "auth.tokens_file `{}` line {}: expected `app token [secret]`",
                        self.tokens_file,
                        n + 1
                    )]))
                }
            };
            out.insert(app.to_string(), AppCredentials { token: Secret::new(token), secret: Secret::new(secret) });
        }
        Ok(out)
    }
}

/// Callbacks: where they may go and how they are signed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CallbackConfig {
    /// CIDR ranges callbacks may reach even inside a denied range, e.g.
    /// `["169.254.10.0/24"]`; from the environment, comma-separated.
    /// Defaults to none.
    #[serde(deserialize_with = "string_list")]
    pub allow_cidrs: Vec<String>,
    /// CIDR ranges callbacks may never reach, on top of link-local and
    /// cloud metadata addresses (see `target_policy`), e.g.
    /// `["127.0.0.0/8", "::1/128"]`; from the environment, comma-separated.
    /// Defaults to none.
    #[serde(deserialize_with = "string_list")]
    pub deny_cidrs: Vec<String>,
    /// Key of the `X-Xtimer-Signature` of apps without a secret of their
    /// own. Empty: one is generated at first start and kept in the
    /// database, so every node of a cluster signs alike. Defaults to empty.
    pub signing_secret: Secret,
    /// Whether `createTimer` resolves a callback's host name and refuses it
    /// when it resolves to a denied address (a name that does not resolve
    /// yet is accepted; fires are checked again after resolution anyway). Defaults to true.
    pub resolve_at_create: bool,
}

impl CallbackConfig {
    /// The callback target policy these settings name.
    pub fn target_policy(&self) -> crate::Result<crate::target_policy::TargetPolicy> {
        crate::target_policy::TargetPolicy::new(&self.allow_cidrs, &self.deny_cidrs)
    }
}

impl Default for CallbackConfig {
    fn default() -> Self {
        Self {
            allow_cidrs: Vec::new(),
            deny_cidrs: Vec::new(),
            signing_secret: Secret::default(),
            resolve_at_create: true,
        }
    }
}

/// A list given as a TOML array, or as one string of comma- or
/// space-separated entries (how it comes from the environment).
fn string_list<'de, D: serde::Deserializer<'de>>(de: D) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum List {
        One(String),
        Many(Vec<String>),
    }
    Ok(match List::deserialize(de)? {
        List::One(s) => s.split([',', ' ']).filter(|p| !p.is_empty()).map(str::to_string).collect(),
        List::Many(v) => v,
    })
}

/// Explicit limits; exceeding one answers 400, 413 or 429 naming it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// API requests per second per app, a token bucket: the app of the
    /// caller's token, else the `app` in the query string, else the
    /// caller's address; 0 turns the limit off. Over it: 429. Defaults to 5000.
    pub requests_per_second: u32,
    /// Requests an idle app may send at once before `requests_per_second`
    /// applies. Defaults to 10000.
    pub request_burst: u32,
    /// Timers per app that are not deleted; `createTimer` over it: 429. Defaults to 100000.
    pub timers_per_app: u64,
    /// Fires per minute per app: a timer that would push the app's busiest
    /// minute (over the next hour) past it is refused at create and at
    /// enable with a 400. Defaults to 60000.
    pub fires_per_minute_per_app: u64,
    /// Headers one callback may set. Defaults to 32.
    pub callback_max_headers: usize,
    /// Bytes of a callback's header names and values together. Defaults to 16384.
    pub callback_max_header_bytes: usize,
    /// Bytes of a callback's body. Defaults to 65536.
    pub callback_max_body_bytes: usize,
    /// Fires one `backfillTimer` call may make (the most it may ask for,
    /// and its default). Defaults to 10000.
    pub backfill_max_fires: u32,
    /// Pace at which a backfill's fires are sent, per second. Defaults to 10.
    pub backfill_fires_per_second: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            requests_per_second: 5_000,
            request_burst: 10_000,
            timers_per_app: 100_000,
            fires_per_minute_per_app: 60_000,
            callback_max_headers: 32,
            callback_max_header_bytes: 16 * 1024,
            callback_max_body_bytes: 64 * 1024,
            backfill_max_fires: 10_000,
            backfill_fires_per_second: 10,
        }
    }
}

/// OpenTelemetry traces (API 1h).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Where traces go over OTLP/HTTP (protobuf): the collector's base URL,
    /// `http://127.0.0.1:4318` (spans are posted to its `/v1/traces`), or
    /// a URL whose path is its own. Empty (the default): no traces, and
    /// nothing spent on them.
    pub otlp_endpoint: String,
}

impl TelemetryConfig {
    /// The URL spans are posted to, or `None` when traces are off; an
    /// endpoint that is not an `http(s)` URL is an error naming the key.
    pub fn traces_url(&self) -> std::result::Result<Option<String>, String> {
        let endpoint = self.otlp_endpoint.trim();
        if endpoint.is_empty() {
            return Ok(None);
        }
        let bad = || {
            format!("telemetry.otlp_endpoint must be an http(s) URL such as http://127.0.0.1:4318, not `{endpoint}`")
        };
        let rest = endpoint.strip_prefix("http://").or_else(|| endpoint.strip_prefix("https://")).ok_or_else(bad)?;
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if host.is_empty() || host.starts_with(':') || endpoint.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad());
        }
        Ok(Some(if path.trim_end_matches('/').is_empty() {
            format!("{}/v1/traces", endpoint.trim_end_matches('/'))
        } else {
            endpoint.to_string()
        }))
    }
}

impl Config {
    /// Loads defaults, then `file` (TOML text) if any, then the `XTIMER_`
    /// variables of `env`. Reports every problem at once, not just the
    /// first: each unknown key and each value of the wrong type with its
    /// key path (`server.lisn: unknown field ...`), then every value that
    /// parses but makes no sense (see `problems`), checked on the settings
    /// that did parse.
    pub fn load(file: Option<&str>, env: &BTreeMap<String, String>) -> Result<Self> {
        let mut errors = Vec::new();
        let defaults = toml::Value::try_from(Config::default()).expect("defaults serialize");
        let mut tree = defaults.clone();
        if let Some(text) = file {
            match text.parse::<toml::Table>() {
                Ok(mut table) => {
                    rename_aliases(&mut table, &mut errors);
                    merge(&mut tree, toml::Value::Table(table));
                }
                Err(err) => errors.push(format!("config file: {}", err.to_string().trim())),
            }
        }
        for (name, raw) in env {
            let Some(path) = name.strip_prefix("XTIMER_") else { continue };
            let Some((section, field)) = path.split_once("__") else {
                if !NOT_SETTINGS.contains(&path) && !HARNESS_PREFIXES.iter().any(|p| path.starts_with(p)) {
                    errors.push(unknown_variable(name, &defaults));
                }
                continue;
            };
            let (section, mut field) = (section.to_ascii_lowercase(), field.to_ascii_lowercase());
            if let Some((_, _, to)) = ALIASES.iter().find(|(s, from, _)| *s == section && *from == field) {
                field = (*to).to_string();
            }
            let Some(toml::Value::Table(sec)) = tree.get_mut(&section) else {
                errors.push(format!("{name}: unknown section `{section}`"));
                continue;
            };
            let value = match sec.get(&field) {
                Some(toml::Value::Integer(_)) => match raw.parse::<i64>() {
                    Ok(v) => toml::Value::Integer(v),
                    Err(_) => {
                        errors.push(format!("{name}: `{raw}` is not a whole number"));
                        continue;
                    }
                },
                Some(toml::Value::Boolean(_)) => match raw.parse::<bool>() {
                    Ok(v) => toml::Value::Boolean(v),
                    Err(_) => {
                        errors.push(format!("{name}: `{raw}` is not true or false"));
                        continue;
                    }
                },
                Some(_) => toml::Value::String(raw.clone()),
                None => {
                    errors.push(format!("{name}: unknown field `{field}` in [{section}]"));
                    continue;
                }
            };
            sec.insert(field, value);
        }
        let config = match tree.clone().try_into::<Config>() {
            Ok(config) => Some(config),
            Err(_) => {
                // serde stops at the first bad key: find each one by trying
                // every key alone on the defaults, then go on without them.
                let mut bad = Vec::new();
                let toml::Value::Table(table) = &tree else { unreachable!("the tree is a table") };
                find_bad_keys(&defaults, &mut Vec::new(), table, &mut bad);
                for (path, _) in &bad {
                    remove_path(&mut tree, path);
                }
                errors.extend(bad.into_iter().map(|(path, msg)| format!("{}: {msg}", path.join("."))));
                tree.try_into::<Config>().ok()
            }
        };
        if let Some(config) = &config {
            errors.extend(config.problems());
        }
        match config {
            Some(config) if errors.is_empty() => Ok(config),
            Some(_) => Err(Error::Config(errors)),
            None => {
                errors.push("(the settings above could not be read; nothing else was checked)".into());
                Err(Error::Config(errors))
            }
        }
    }

    /// Values that parse but make no sense.
    fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let mut check = |ok: bool, msg: &str| {
            if !ok {
                p.push(msg.to_string());
            }
        };
        check(self.server.header_read_timeout_ms >= 1, "server.header_read_timeout_ms must be at least 1");
        check(self.server.body_read_timeout_ms >= 1, "server.body_read_timeout_ms must be at least 1");
        check(self.server.idle_timeout_ms >= 1, "server.idle_timeout_ms must be at least 1");
        check(self.server.max_connections >= 1, "server.max_connections must be at least 1");
        check(self.shard.buckets >= 1 && self.shard.buckets <= 4096, "shard.buckets must be 1 to 4096");
        check(!self.shard.key_prefix.is_empty(), "shard.key_prefix must not be empty");
        check(self.migrator.step_ms >= 1_000, "migrator.step_ms must be at least 1000");
        check(self.retention.keep_fires_ms >= 60_000, "retention.keep_fires_ms must be at least 60000 (one minute)");
        check(self.retention.period_ms >= 1_000, "retention.period_ms must be at least 1000");
        check(self.retention.batch_size >= 1, "retention.batch_size must be at least 1");
        check(self.migrator.page_size >= 1, "migrator.page_size must be at least 1");
        check(self.scheduler.tick_ms >= 10, "scheduler.tick_ms must be at least 10");
        check(self.scheduler.lease_ms >= 3 * self.scheduler.tick_ms, "scheduler.lease_ms must be at least 3 ticks");
        check(
            self.scheduler.done_ttl_ms > 2 * crate::shard::MINUTE_MS as u64,
            "scheduler.done_ttl_ms must exceed two minutes (120000) so the previous-minute pass skips finished shards",
        );
        check(self.executor.concurrency >= 1, "executor.concurrency must be at least 1");
        check(
            self.executor.batch_size >= 1 && self.executor.batch_size <= 5_000,
            "executor.batch_size must be 1 to 5000",
        );
        check(self.executor.timeout_ms >= 1, "executor.timeout_ms must be at least 1");
        check(
            self.executor.claim_linger_ms < self.trigger.claim_ahead_ms,
            "executor.claim_linger_ms must be less than trigger.claim_ahead_ms",
        );
        check(
            self.executor.lease_ms > self.executor.timeout_ms + self.trigger.claim_ahead_ms,
            "executor.lease_ms must exceed executor.timeout_ms + trigger.claim_ahead_ms",
        );
        check(self.reconciler.period_ms >= 100, "reconciler.period_ms must be at least 100");
        check(self.reconciler.node_timeout_ms >= 300, "reconciler.node_timeout_ms must be at least 300");
        check(self.executor.per_host_concurrency >= 1, "executor.per_host_concurrency must be at least 1");
        check(self.executor.per_app_concurrency >= 1, "executor.per_app_concurrency must be at least 1");
        check(self.executor.breaker_failures >= 1, "executor.breaker_failures must be at least 1");
        check(self.executor.breaker_open_ms >= 10, "executor.breaker_open_ms must be at least 10");
        check(self.asyncflow.table_row_limit >= 1, "asyncflow.table_row_limit must be at least 1");
        check(self.asyncflow.governor_period_ms >= 10, "asyncflow.governor_period_ms must be at least 10");
        check(
            self.asyncflow.create_batch_size >= 1 && self.asyncflow.create_batch_size <= 5_000,
            "asyncflow.create_batch_size must be 1 to 5000",
        );
        check(self.database.max_connections >= 2, "database.max_connections must be at least 2");
        check(self.limits.timers_per_app >= 1, "limits.timers_per_app must be at least 1");
        check(self.limits.fires_per_minute_per_app >= 1, "limits.fires_per_minute_per_app must be at least 1");
        check(
            self.limits.requests_per_second == 0 || self.limits.request_burst >= 1,
            "limits.request_burst must be at least 1",
        );
        check(self.limits.callback_max_body_bytes >= 1, "limits.callback_max_body_bytes must be at least 1");
        check(self.limits.backfill_max_fires >= 1, "limits.backfill_max_fires must be at least 1");
        check(
            (1..=10_000).contains(&self.limits.backfill_fires_per_second),
            "limits.backfill_fires_per_second must be 1 to 10000",
        );
        if let Err(problem) = self.telemetry.traces_url() {
            p.push(problem);
        }
        match self.callback.target_policy() {
            Err(crate::Error::Config(problems)) => p.extend(problems),
            Err(other) => p.push(other.to_string()),
            Ok(_) => {}
        }
        p
    }
}

/// Old key names still read: (section, old name, name).
/// `XTIMER_` variables that are not settings: the command line's own
/// (`--listen`, `--database-url`, `--config`, and the client commands'
/// `--server` and `--token`), the log level and format, the worker
/// example's server address and the binary the scripts run.
const NOT_SETTINGS: &[&str] =
    &["LISTEN", "DATABASE_URL", "CONFIG", "LOG", "LOG_FORMAT", "SERVER", "TOKEN", "ADDR", "BIN"];

/// Prefixes (after `XTIMER_`) of the test, chaos and adversarial harnesses'
/// own variables, which the nodes they start inherit.
const HARNESS_PREFIXES: &[&str] = &["TEST_", "CHAOS_", "ADVERSARIAL_"];

/// The error of an `XTIMER_` variable that names no setting, with the
/// setting it most likely meant (`XTIMER_REDIS_URL`: `XTIMER_REDIS__URL`).
fn unknown_variable(name: &str, defaults: &toml::Value) -> String {
    let mut settings = Vec::new();
    if let toml::Value::Table(sections) = defaults {
        for (section, fields) in sections {
            if let toml::Value::Table(fields) = fields {
                for field in fields.keys() {
                    settings.push(format!("XTIMER_{}__{}", section.to_uppercase(), field.to_uppercase()));
                }
            }
        }
    }
    match crate::suggest::nearest(name, settings.iter().map(String::as_str), 4) {
        Some(setting) => format!(
            "{name} names no setting (a setting is XTIMER_<SECTION>__<FIELD>, two underscores): did you mean {setting}?"
        ),
        None => format!("{name} names no setting (a setting is XTIMER_<SECTION>__<FIELD>, two underscores)"),
    }
}

const ALIASES: &[(&str, &str, &str)] = &[("reconciler", "misfire_window_ms", "misfire_threshold_ms")];

/// Renames the old key names of a file's `table` to their names (both at
/// once is a problem: which one is meant?).
fn rename_aliases(table: &mut toml::Table, errors: &mut Vec<String>) {
    for (section, from, to) in ALIASES {
        let Some(toml::Value::Table(sec)) = table.get_mut(*section) else { continue };
        let Some(value) = sec.remove(*from) else { continue };
        if sec.contains_key(*to) {
            errors.push(format!("{section}.{from}: an old name of {section}.{to}, which is set too; keep one"));
        } else {
            sec.insert((*to).to_string(), value);
        }
    }
}

/// Pushes to `bad` the path and problem of every key under `node` (at
/// `path`) that does not deserialize when set alone on `defaults`: an
/// unknown key, or a value of the wrong type. A table that fails as a
/// whole is searched key by key; if no key of it fails alone, the table
/// is reported.
fn find_bad_keys(
    defaults: &toml::Value,
    path: &mut Vec<String>,
    node: &toml::Table,
    bad: &mut Vec<(Vec<String>, String)>,
) {
    for (key, value) in node {
        path.push(key.clone());
        let mut alone = defaults.clone();
        set_path(&mut alone, path, value.clone());
        if let Err(err) = alone.try_into::<Config>() {
            let msg = plain_serde_message(&err.to_string());
            let unknown_here = msg.starts_with(&format!("unknown field `{key}`"));
            match value {
                toml::Value::Table(children) if !unknown_here && !children.is_empty() => {
                    let before = bad.len();
                    find_bad_keys(defaults, path, children, bad);
                    if bad.len() == before {
                        bad.push((path.clone(), msg));
                    }
                }
                _ => bad.push((path.clone(), msg)),
            }
        }
        path.pop();
    }
}

/// serde's message without toml's trailing "in `section`" (the caller
/// names the whole key path) and with Rust type names in words.
fn plain_serde_message(msg: &str) -> String {
    let first = msg.trim().lines().next().unwrap_or_default().to_string();
    ["usize", "u64", "u32", "u16", "u8", "i64", "i32"]
        .iter()
        .fold(first, |m, t| m.replace(&format!("expected {t}"), "expected a whole number"))
}

/// Sets `value` at `path` in `tree`, making the tables on the way.
fn set_path(tree: &mut toml::Value, path: &[String], value: toml::Value) {
    let (last, parents) = path.split_last().expect("a path has a key");
    let mut node = tree;
    for key in parents {
        let toml::Value::Table(table) = node else { return };
        node = table.entry(key.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    }
    if let toml::Value::Table(table) = node {
        table.insert(last.clone(), value);
    }
}

/// Removes the key at `path` from `tree`, if it is there.
fn remove_path(tree: &mut toml::Value, path: &[String]) {
    let (last, parents) = path.split_last().expect("a path has a key");
    let mut node = tree;
    for key in parents {
        match node.get_mut(key.as_str()) {
            Some(next) => node = next,
            None => return,
        }
    }
    if let toml::Value::Table(table) = node {
        table.remove(last);
    }
}

/// Deep-merges `overlay` into `base`: tables merge, anything else replaces.
fn merge(base: &mut toml::Value, overlay: toml::Value) {
    match (base, overlay) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

#[cfg(test)]
mod tests;
