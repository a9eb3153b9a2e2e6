//! Domain types shared by every xtimer crate.
//!
//! # Layout
//!
//! - [`spec`]: what a user sets on a timer, declared once: the API's timer, its update patch, its checks.
//! - [`timer`]: a timer as the user defined it (schedule, callback, policies).
//! - [`schedule`]: when a timer fires (cron, once, every), and its times.
//! - [`labels`]: labels on timers and the selectors that find them.
//! - [`when`]: bounds, run limit, spread, calendars and catch-up window beside the schedule, and the times they leave.
//! - [`task`]: the asyncflow task data model (tasks, task type configuration).
//! - [`fire`]: one fire of a timer (`t_timer_task` row), its status and key.
//! - [`node`]: a node's identity and liveness as it reports itself.
//! - [`shard`]: the (minute, bucket) shard a fire belongs to, key formats.
//! - [`cron`]: cron parsing and fire-time expansion in a time zone.
//! - [`signature`]: the HMAC signature of callbacks (`X-Xtimer-Signature`), signing and verifying.
//! - [`template`]: templated callbacks, `{{placeholders}}` filled per fire.
//! - [`steering`]: what a receiver's answer may ask of its timer (next run, pause).
//! - [`target_policy`]: which addresses callbacks may reach (SSRF defence).
//! - [`clock`]: the injected wall clock, and [`clock::OffsetClock`], a node's clock set to the database's.
//! - [`pause`]: the node's own stalls (a `SIGSTOP`, a frozen VM), so claims held across one are checked again.
//! - [`cache`]: [`TtlCache`], the bounded cache with expiry on the injected clock.
//! - [`handover`]: one-shot timers' definitions passed from their expansion to their fire.
//! - [`suggest`]: "did you mean ...?": the known name nearest to a mistyped one.
//! - [`config`]: the one configuration tree, loaded from defaults, a file and the environment.
//! - [`error`]: the domain error type.
//! - [`metrics`]: the names (and lateness buckets) of the exported metrics.

pub mod batch;
pub mod cache;
pub mod calendar;
pub mod clock;
pub mod config;
pub mod cron;
pub mod error;
pub mod fire;
pub mod handover;
pub mod labels;
pub mod load;
pub mod metrics;
pub mod node;
pub mod pause;
pub mod period;
pub mod schedule;
pub mod shard;
pub mod signature;
pub mod spec;
pub mod steering;
pub mod suggest;
pub mod target_policy;
pub mod task;
pub mod template;
pub mod timer;
pub mod when;

pub use cache::TtlCache;
pub use clock::{Clock, SharedClock, SystemClock};
pub use error::{Error, Result};
