//! Rust SDK for asyncflow workers: register a [`Handler`] per task type,
//! and a [`Worker`] holds tasks with hold_tasks, runs one stage at a time
//! and reports each outcome with set_task, exactly as Go asyncflow workers
//! do (API.md section 2), against xtimer or any asyncflow flowSvr.
//!
//! ```no_run
//! use xtimer_worker::{Client, Outcome, Task, Worker, WorkerConfig};
//! # async fn demo() -> xtimer_worker::Result<()> {
//! let client = Client::new("http://127.0.0.1:8080")?;
//! let worker = Worker::new(client, WorkerConfig::default()).with_handler("resize", |task: Task| async move {
//!     match task.stage() {
//!         "download" => Outcome::next("resize", &task.context()),
//!         "resize" => Outcome::done(),
//!         other => Outcome::fatal(format!("unknown stage {other}")),
//!     }
//! });
//! worker.run(tokio_util::sync::CancellationToken::new()).await
//! # }
//! ```
//!
//! # Layout
//!
//! - [`client`]: [`Client`], the `/v1` calls (create, hold, set, get, list,
//!   cfg list, counts, register).
//! - [`handler`]: [`Handler`], the [`Task`] it gets and the [`Outcome`] it returns.
//! - [`report`]: outcome -> set_task body (status, order_time, retries,
//!   schedule_log), pure; the retry rule is `xtimer_asyncflow::retry`'s.
//! - [`worker`]: [`Worker`], the loop: cfg reload, jittered polls, backlog
//!   cap, bounded concurrency, panics as retries, graceful shutdown.
//! - [`config`]: [`WorkerConfig`], the loop's pace, and the jitter.
//! - [`backlog`]: [`Backlog`], tasks held and not yet reported.
//! - [`demo`]: a three-stage task type (`examples/three_stage.rs`).
//! - [`error`]: [`Error`], the one error type.

pub mod backlog;
pub mod client;
pub mod config;
pub mod demo;
pub mod error;
pub mod handler;
pub mod report;
pub mod worker;

/// The attribute that makes `async fn handle` work in a [`Handler`] impl,
/// re-exported so workers need no dependency of their own:
/// `#[xtimer_worker::async_trait]`.
pub use async_trait::async_trait;
pub use backlog::Backlog;
pub use client::Client;
pub use config::WorkerConfig;
pub use error::{Error, Result};
pub use handler::{Handler, Outcome, Task};
pub use worker::{Event, SkipReason, Worker};
pub use xtimer_asyncflow::wire::{TaskData, TaskScheduleCfg, TaskStatus};
