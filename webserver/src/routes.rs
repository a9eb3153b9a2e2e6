//! Handlers, one module per URL tree.
//!
//! - [`timers`]: the timer API, under `/api/xtimer/` and `/xtimer/`.
//! - [`health`]: the `/healthz` probe.
//! - [`nodes`]: the cluster's nodes.
//! - [`tasks`]: the asyncflow task API, under `/v1/`.

pub mod health;
pub mod nodes;
pub mod tasks;
pub mod timers;
