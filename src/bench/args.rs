//! What `xtimer bench` is asked: the scenario and its settings, and the
//! node configuration they name.

use std::collections::BTreeMap;

use xtimer::bench_receiver::ReceiverMode;
use xtimer_core::config::Config;

/// What to measure.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Scenario {
    /// `--rate` one-shot fires per second, spread evenly over `--seconds`.
    Steady,
    /// `--count` one-shot fires all due within the same second.
    Burst,
    /// `--timers` per-second cron timers, measured over `--seconds`.
    Cron,
    /// No timers: `--count` callbacks straight from the executor's HTTP
    /// client to the receiver, 256 at a time; the ceiling of this machine.
    Http,
    /// No timers: `--rate` callbacks a second for `--seconds`, each sent on
    /// its millisecond from the executor's HTTP client, grouped and handed
    /// over as the executor sends fires: what the callbacks alone cost at
    /// that rate (compare `steady` at the same rate).
    HttpSteady,
    /// `/v1/create_task` from `--clients` connections for `--seconds`.
    CreateTask,
    /// `/v1/hold_tasks?limit=100` from `--clients` connections over `--count` queued tasks.
    HoldTasks,
    /// `--timers` daily timers not due within the hour, registered through
    /// `createTimers`: create rate, migrator step, idle CPU, database size;
    /// then `--due` per-second timers' lateness over `--seconds`.
    Registered,
    /// `--timers` per-second timers for `--seconds`, printing the
    /// database's size every minute (retention at work).
    History,
    /// `--timers` timers of the cron `0 * * * * ?`, each spread over
    /// `--spread-ms` (0: the classic stampede), created before a minute
    /// starts and run for that minute: peak fires per second at the
    /// receiver, lateness against the send time, planning cost per fire.
    Herd,
}

/// Arguments of `xtimer bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Which load to run.
    #[arg(long, value_enum, default_value = "steady")]
    pub scenario: Scenario,
    /// Fires per second (steady, http-steady).
    #[arg(long, default_value_t = 2_000)]
    pub rate: u64,
    /// Length of the measured window, seconds (steady, cron).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Fires due in one second (burst).
    #[arg(long, default_value_t = 50_000)]
    pub count: u64,
    /// Per-second cron timers (cron).
    #[arg(long, default_value_t = 1_000)]
    pub timers: u64,
    /// Runs; figures are reported per run and as medians.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Seconds between the end of set-up and the first fire.
    #[arg(long, default_value_t = 5)]
    pub lead: u64,
    /// PostgreSQL or MySQL server (`postgres://USER@HOST:PORT/DB`,
    /// `mysql://USER@HOST:PORT/DB`); each run gets a fresh database on it.
    /// Default: a SQLite file in a temporary folder.
    #[arg(long)]
    pub database_url: Option<String>,
    /// Redis server; each run gets a fresh key prefix. Default: embedded.
    #[arg(long)]
    pub redis_url: Option<String>,
    /// Nodes sharing the stores, all in this process (needs a database server and Redis when > 1);
    /// the task scenarios spread their clients over them.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Concurrent HTTP clients (create-task, hold-tasks).
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Extra per-second cron timers whose receiver accepts connections and
    /// never answers (a hung host), beside the measured ones (steady,
    /// burst, cron): the figures are the healthy timers' alone.
    #[arg(long, default_value_t = 0)]
    pub hung: u64,
    /// Per-second timers added after the registered ones (registered).
    #[arg(long, default_value_t = 1_000)]
    pub due: u64,
    /// Seconds over which idle CPU is measured (registered).
    #[arg(long, default_value_t = 60)]
    pub idle_seconds: u64,
    /// Where the callback receiver runs: a process of its own, or this one.
    #[arg(long, value_enum, default_value = "process")]
    pub receiver: ReceiverMode,
    /// Runtime threads of the receiver's process (1: one event loop).
    #[arg(long, default_value_t = 1)]
    pub receiver_threads: usize,
    /// Each timer's spread, ms (herd): its fire is sent at the least
    /// loaded second of `[scheduled, scheduled + spread)`.
    #[arg(long, default_value_t = 0)]
    pub spread_ms: u64,
    /// Limited flows the timers are dealt over (steady, burst, cron; API
    /// 1g), each with `--flow-rate`: every fire then takes its turn at
    /// its flow. 0: no flow has limits.
    #[arg(long, default_value_t = 0)]
    pub flows: u64,
    /// Each limited flow's `ratePerSec`.
    #[arg(long, default_value_t = 100_000.0)]
    pub flow_rate: f64,
    /// Export OpenTelemetry traces (a span per callback attempt and per API
    /// request) to a collector in a process of its own (steady, burst,
    /// cron): the node's CPU then includes tracing and exporting.
    #[arg(long)]
    pub otlp: bool,
}

/// The configuration of a benchmark node: the environment's `XTIMER_…`
/// settings, a free port, and fresh storage (a SQLite file in `dir`, or a
/// new database and key prefix on `--database-url` and `--redis-url`).
pub async fn fresh_config(args: &BenchArgs, dir: &std::path::Path) -> anyhow::Result<Config> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut config = Config::load(None, &env)?;
    config.server.listen = "127.0.0.1:0".into();
    let suffix = format!("{:08x}", rand::random::<u32>());
    config.database.url = match &args.database_url {
        Some(url) => xtimer_store::db::create_database(url, &format!("xtbench_{suffix}")).await?,
        None => format!("sqlite://{}", dir.join("bench.db").display()),
    };
    if let Some(url) = &args.redis_url {
        config.redis.url = url.clone();
        config.shard.key_prefix = format!("xtbench{suffix}");
    }
    Ok(config)
}

/// Drops the database [`fresh_config`] made on a server for a run whose
/// database URL is `url` (a SQLite file goes with the run's temp folder),
/// so runs leave nothing behind; a failure is only told.
pub async fn drop_fresh_database(args: &BenchArgs, url: &str) {
    let (Some(admin), Some((_, name))) = (&args.database_url, url.rsplit_once('/')) else { return };
    if let Err(err) = xtimer_store::db::drop_database(admin, name).await {
        eprintln!("warning: the run's database {name} was not dropped: {err}");
    }
}
