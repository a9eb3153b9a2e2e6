//! `xtimer bench`, in the binary and not its library: the load scenarios
//! and what they report (BENCHMARKS.md has every command and its figures).
//!
//! - [`args`]: the scenario and its settings ([`BenchArgs`]), and the node
//!   configuration they name.
//! - [`fires`]: fires per second, lateness and CPU per fire (steady, burst,
//!   cron, http), and the herd of aligned crons.
//! - [`registered`]: what registered timers cost (registered) and old
//!   history (history).
//! - [`tasks`]: the `/v1` task API (create-task, hold-tasks).
//! - [`measure`]: percentiles, medians, peak memory.
//!
//! The receiver it fires at, in a process of its own, is
//! [`xtimer::bench_receiver`].

mod args;
mod fires;
mod measure;
mod registered;
mod tasks;

pub use args::BenchArgs;
use args::Scenario;

/// Runs the benchmark `args` names and prints its figures.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.scenario {
        Scenario::CreateTask | Scenario::HoldTasks => tasks::run(&args).await,
        Scenario::Registered => registered::run(&args).await,
        Scenario::History => registered::history(&args).await,
        Scenario::Herd => fires::herd(&args).await,
        Scenario::Steady | Scenario::Burst | Scenario::Cron | Scenario::Http | Scenario::HttpSteady => {
            fires::run(args).await
        }
    }
}
