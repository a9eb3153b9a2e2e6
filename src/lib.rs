//! The xtimer binary's library: wiring every part into one node.
//!
//! # Layout
//!
//! - [`node`]: builds the stores and loops from a [`Config`](xtimer_core::config::Config),
//!   serves HTTP, and shuts down in order.
//! - [`heartbeat`]: the node's report of itself, for the nodes endpoint.
//! - [`bench_receiver`]: the benchmark's receiver in a process of its own
//!   (`xtimer bench-receiver`); the benchmark itself, `xtimer bench`, is a
//!   module of the binary (`src/bench/`), not of this library.
//! - [`timer_tasks`]: timer fires that create asyncflow tasks.
//! - [`telemetry`]: OpenTelemetry traces over OTLP/HTTP (`telemetry.otlp_endpoint`).
//! - [`logging`]: the log's level and format (`XTIMER_LOG`, `XTIMER_LOG_FORMAT`).
//! - [`progress`]: progress bars for long command-line work.
//! - [`cli`]: the client commands, `xtimer timer ...` and `xtimer cron preview`.
//! - [`echo`]: `xtimer echo`, a receiver that answers 200 and prints what it gets.
//! - [`receiver`]: a callback receiver that records what it got and when
//!   (used by the benchmark and the end-to-end tests).

pub mod bench_receiver;
pub mod cli;
pub mod echo;
pub mod heartbeat;
pub mod logging;
pub mod node;
pub mod progress;
pub mod receiver;
pub mod telemetry;
pub mod timer_tasks;
