//! The asyncflow task engine: a durable multi-stage task queue that speaks
//! the asyncflow flowSvr `/v1` wire contract (API.md section 2).
//!
//! # Layout
//!
//! Always (the wire contract, which the worker SDK shares):
//! - [`wire`]: TaskData, TaskScheduleCfg, the replies and their codes.
//! - [`task_id`]: `{uuid}_{type}_{pos}` ids and the tables they name.
//! - [`retry`]: order_time and the retry rule.
//!
//! With the `server` feature (default), the engine itself:
//! - [`repo`]: the [`TaskRepo`] trait: register, create, hold, set, get,
//!   list, count, and the governance steps.
//! - [`sqlite`], [`postgres`]: that trait over each database.
//! - [`governor`]: the loop that takes timed-out tasks back, rolls full
//!   tables and advances begin_pos, on one node at a time.
//! - [`error`]: this crate's error type, with the wire code of each case.

pub mod retry;
pub mod task_id;
pub mod wire;

#[cfg(feature = "server")]
pub mod error;
#[cfg(feature = "server")]
pub mod governor;
#[cfg(feature = "server")]
pub mod postgres;
#[cfg(feature = "server")]
pub mod repo;
#[cfg(feature = "server")]
pub mod sqlite;

#[cfg(feature = "server")]
pub use error::{Error, Result};
#[cfg(feature = "server")]
// pub use governor::Governor;
#[cfg(feature = "server")]
// pub use repo::TaskRepo;
pub use task_id::TaskId;
pub use wire::{TaskData, TaskScheduleCfg, TaskStatus};
