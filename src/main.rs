//! `xtimer`: the distributed timer service.

mod bench;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio::signal::unix::{signal, Signal, SignalKind};
use xtimer::logging::LogFormat;
use xtimer::node::Node;
use xtimer_core::config::Config;

/// mimalloc: the glibc allocator spent a fifth of the CPU at 10,000 fires/s
/// (per-fire request and response buffers); see BENCHMARKS.md. Only Rust's
/// allocations go through it: without mimalloc's `override` feature the C
/// `malloc`/`free` stay glibc's, so the binary runs under `LD_PRELOAD` tools
/// that allocate before `main` (libfaketime crashed it in `mi_free`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "xtimer", version, about = "A distributed cron/timer service.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node: HTTP API, migrator, scheduler, trigger, executor, reconciler.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "XTIMER_LISTEN")]
        listen: Option<String>,
        /// Database URL (`sqlite://PATH`). Defaults to `sqlite://xtimer.db`.
        #[arg(long, env = "XTIMER_DATABASE_URL")]
        database_url: Option<String>,
        /// TOML configuration file.
        #[arg(long, env = "XTIMER_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Apply the schema to the database (and check Redis) and exit; `serve`
    /// does this too at start.
    Migrate {
        /// Database URL (`sqlite://PATH`, `postgres://...` or `mysql://...`).
        #[arg(long, env = "XTIMER_DATABASE_URL")]
        database_url: Option<String>,
        /// TOML configuration file.
        #[arg(long, env = "XTIMER_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Copy the SQLite database to a new file, while a node may be running
    /// on it (`VACUUM INTO`: a consistent snapshot). PostgreSQL: use pg_dump;
    /// MySQL: mysqldump.
    Backup {
        /// The new file to write; an existing file is never overwritten.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Database URL (`sqlite://PATH`). Defaults to the configuration's.
        #[arg(long, env = "XTIMER_DATABASE_URL")]
        database_url: Option<String>,
        /// TOML configuration file.
        #[arg(long, env = "XTIMER_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Measure fires per second and lateness against a local receiver.
    Bench(bench::BenchArgs),
    /// The benchmark's receiver, run by `bench` as a process of its own:
    /// records every callback, prints where it listens, exits when its
    /// stdin closes.
    #[command(hide = true)]
    BenchReceiver {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        /// Runtime threads (1: a single-threaded event loop).
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
    /// Create, list, inspect and act on timers of a running server.
    Timer {
        #[command(flatten)]
        remote: xtimer::cli::Remote,
        #[command(subcommand)]
        command: xtimer::cli::timer::TimerCommand,
    },
    /// Schedules: `preview` the next fire times of a cron expression or an
    /// interval, with their notes (daylight saving, excluded by a calendar).
    Cron {
        #[command(flatten)]
        remote: xtimer::cli::Remote,
        #[command(subcommand)]
        command: xtimer::cli::CronCommand,
    },
    /// Timers as code: `apply` YAML or JSON files to a server, `export` an
    /// app's timers as such a file.
    #[command(flatten)]
    Code(xtimer::cli::apply::CodeCommand),
    /// A callback receiver for trying timers out: answers every request
    /// 200 and prints it (method, path, fire, lateness, body).
    Echo {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:9000")]
        listen: String,
    },
}

/// No transparent huge pages for this process. Where the host leaves them
/// on (`always`, or `madvise` with mimalloc asking), every first touch of
/// fresh heap zeroes 2 MiB: with them, storing and planning 50,000
/// one-shots cost ~11% more CPU and the node's RSS was ~20% higher (see
/// BENCHMARKS.md), for no gain on the fire path. Redis and most databases
/// advise the same. The flag is the process's (its memory map's), not the
/// calling thread's; a failure (an old kernel) changes nothing.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

fn main() -> std::process::ExitCode {
    no_huge_pages();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("Error: {}", said_once(err.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    // The client commands print their own lines (no log), and their exit
    // code says what went wrong; the others log and fail with an error.
    let done = match cli.command {
        Command::Timer { remote, command } => {
            return Ok(client_runtime()?.block_on(xtimer::cli::timer::run(&remote, command)).into())
        }
        Command::Cron { remote, command } => {
            return Ok(client_runtime()?.block_on(xtimer::cli::cron(&remote, command)).into())
        }
        Command::Code(command) => return Ok(client_runtime()?.block_on(xtimer::cli::apply::run(command)).into()),
        Command::Serve { listen, database_url, config } => {
            server_runtime()?.block_on(serve(listen, database_url, config))
        }
        Command::Migrate { database_url, config } => server_runtime()?.block_on(migrate(database_url, config)),
        Command::Backup { to, database_url, config } => server_runtime()?.block_on(backup(to, database_url, config)),
        Command::Bench(args) => server_runtime()?.block_on(bench::run(args)),
        Command::Echo { listen } => server_runtime()?.block_on(echo(listen)),
        Command::BenchReceiver { listen, threads } => receiver_runtime(threads)?.block_on(bench_receiver(listen)),
    };
    done.map(|()| std::process::ExitCode::SUCCESS)
}

/// `err` and its causes on one line, each said once. An error's text often
/// says its cause already (thiserror's `{0}` beside `#[source]`, a message
/// that embeds its whole cause chain), so a cause is added only when the
/// text above it does not end with it; a cause stated twice in a row
/// (`"x: y: y"`) is kept once.
fn said_once(err: &(dyn std::error::Error + 'static)) -> String {
    let text = err.to_string();
    let Some(source) = err.source() else { return text };
    let below = said_once(source);
    for said in [xtimer_core::error::error_chain(source), source.to_string(), below.clone()] {
        if let Some(own) = text.strip_suffix(said.as_str()) {
            let own = own.trim_end().trim_end_matches(':').trim_end();
            return if own.is_empty() { below } else { format!("{own}: {below}") };
        }
    }
    if text.contains(&below) {
        text
    } else {
        format!("{text}: {below}")
    }
}

/// A one-thread runtime for a client command.
fn client_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// The log, then a runtime on every core, for the commands that run parts
/// of the service.
fn server_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    let format = LogFormat::from_env().map_err(anyhow::Error::msg)?;
    xtimer::logging::init(format);
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// The bench receiver's runtime: one thread runs it on the calling thread.
fn receiver_runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    let runtime = match threads {
        0 | 1 => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build()?,
    };
    Ok(runtime)
}

async fn bench_receiver(listen: String) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {addr}")?;
        out.flush()?;
    }
    xtimer::bench_receiver::serve(listener).await?;
    Ok(())
}

async fn echo(listen: String) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(addr = %listener.local_addr()?, "xtimer echo is listening; every request is answered 200 and printed.");
    let stop = tokio_util::sync::CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        s.cancel();
    });
    xtimer::echo::serve(listener, stop).await?;
    Ok(())
}

/// Defaults, then the file, then `XTIMER_…` variables, then the flags.
fn load_config(file: Option<PathBuf>, listen: Option<String>, database_url: Option<String>) -> anyhow::Result<Config> {
    let text = match &file {
        Some(path) => Some(std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?),
        None => None,
    };
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut config = Config::load(text.as_deref(), &env)?;
    if let Some(listen) = listen {
        config.server.listen = listen;
    }
    if let Some(url) = database_url {
        config.database.url = url;
    }
    Ok(config)
}

async fn migrate(database_url: Option<String>, file: Option<PathBuf>) -> anyhow::Result<()> {
    let config = load_config(file, None, database_url)?;
    let clock: xtimer_core::SharedClock = std::sync::Arc::new(xtimer_core::SystemClock);
    let stores = xtimer_store::Stores::connect(&config.database, &config.redis, &config.shard, clock).await?;
    tracing::info!(storage = %stores.description, "Schema is up to date.");
    Ok(())
}

async fn backup(to: PathBuf, database_url: Option<String>, file: Option<PathBuf>) -> anyhow::Result<()> {
    let config = load_config(file, None, database_url)?;
    let bytes = xtimer_store::backup::backup(&config.database.url, &to).await?;
    tracing::info!(database = %config.database.url, to = %to.display(), bytes, "Backup written.");
    Ok(())
}

async fn serve(listen: Option<String>, database_url: Option<String>, file: Option<PathBuf>) -> anyhow::Result<()> {
    let config = load_config(file, listen, database_url)?;
    let mut signals = StopSignals::new();
    let mut node = Node::start(config).await?;
    let failed = tokio::select! {
        _ = signals.next() => {
            tracing::info!("Shutting down: finishing in-flight callbacks.");
            None
        }
        why = node.exited() => {
            tracing::error!(reason = why, "A loop exited; shutting down.");
            Some(why)
        }
    };
    // A second signal quits at once.
    tokio::spawn(async move {
        signals.next().await;
        tracing::warn!("Second signal: exiting now.");
        std::process::exit(130);
    });
    node.shutdown().await;
    // A non-zero exit, so a supervisor (systemd `Restart=on-failure`) restarts it.
    match failed {
        Some(why) => anyhow::bail!("the node stopped because a loop exited: {why}"),
        None => Ok(()),
    }
}

async fn shutdown_signal() {
    StopSignals::new().next().await;
}

/// SIGINT and SIGTERM, caught from the moment this is made: one that
/// arrives while the node is still starting is kept for [`Self::next`]
/// instead of killing the process.
struct StopSignals {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl StopSignals {
    fn new() -> Self {
        Self { interrupt: signal(SignalKind::interrupt()).ok(), terminate: signal(SignalKind::terminate()).ok() }
    }

    /// The next SIGINT or SIGTERM.
    async fn next(&mut self) {
        async fn recv(s: &mut Option<Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! { _ = recv(&mut self.interrupt) => {}, _ = recv(&mut self.terminate) => {} }
    }
}
