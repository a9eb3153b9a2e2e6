//! xtimer's application layer: the timer use cases, each a method of
//! [`TimerService`] with a typed result and a typed [`ServiceError`].
//!
//! A use case that spans crates (store a timer, then plan its fires through
//! the migrator's [`Expander`]) and its undo live here, not in a handler:
//! the HTTP API extracts, authorizes, calls one method and maps its result;
//! any other entry point calls the same method.
//!
//! # Layout
//!
//! - this file: [`TimerService`], how it is built ([`Parts`],
//!   [`ServiceConfig`]), [`TimerKey`], and the reads (`get`, `list`, `fires`).
//! - [`create`] holds [`TimerService::create`] (group-committed, undone
//!   when expansion fails) and [`TimerService::create_timers`] (a batch,
//!   all or none).
//! - [`dedupe`] holds what a create of a held `dedupeKey` does ([`Created`]:
//!   `reject`, `keep`, `replace` through the update path).
//! - [`lifecycle`] holds `enable`, `disable`, `delete`, `update`, `trigger`
//!   and `backfill`.
//! - `steering` implements [`xtimer_core::steering::Steering`] for the
//!   executor: what a receiver's answer asks of its timer (a one-shot's
//!   next run, a pause), carried out as any other change.
//! - [`history`] holds [`Actor`] and the change history every use case
//!   that changes a timer notes (`getTimerHistory`).
//! - [`many`] holds what operates many timers: `search`, `bulk`, `apps`,
//!   `pause_app` and `resume_app` (API 1f).
//! - [`apply`] holds [`TimerService::apply`]: an app's timers made to match
//!   a list (timers as code), with its diff, prune and dry run.
//! - [`explain`] holds what shows inside one timer (API 1h): `explain`
//!   (`explainFire`: why a scheduled time fired as it did, or not) and
//!   `stats` (its figures over the last day).
//! - [`flows`] holds flow control per key: `set_flow_limit`, `flows`,
//!   `delete_flow_limit` (API 1g).
//! - [`reads`] holds what a caller reads in one call: a timer with its
//!   next fire, run limit and figures (`detail`), a page of a search with
//!   each timer's next fire (`page`).
//! - [`checks`] holds [`Targets`] (callback target policy and task types, given
//!   by the server), the limits the store refuses by, the app locks;
//!   [`targets`] holds [`PolicyTargets`], the server's own.
//! - [`tokens`] holds [`Tokens`]: API tokens issued per app and looked up.
//! - [`nodes`] holds [`Nodes`]: the cluster's nodes and which are alive.
//! - [`error`] holds the one error type, [`ServiceError`].
//!
//! A deleted timer is gone from every use case: the store keeps its row
//! and still returns it, and the rule is kept here ([`TimerService::get`]).

pub mod apply;
pub mod checks;
pub mod create;
pub mod dedupe;
pub mod error;
pub mod explain;
pub mod flows;
pub mod history;
pub mod key;
pub mod lifecycle;
pub mod many;
pub mod nodes;
pub mod reads;
mod replaces;
pub mod replay;
mod steering;
pub mod targets;
mod timer_service;
pub mod tokens;
pub mod when;

pub use checks::{OpenTargets, Targets, TaskTypeError, MAX_APP_CHARS};
pub use dedupe::Created;
pub use error::{Result, ServiceError};
pub use explain::{Attempt, Claim, Explanation, Moment, TimerStats};
pub use key::{Actor, Page, TimerKey};
pub use lifecycle::Backfill;
pub use nodes::{LiveNode, Nodes};
pub use reads::{TimerDetail, TimerPage};
pub use targets::PolicyTargets;
pub use timer_service::{Parts, ServiceConfig, TimerService};
pub use tokens::{IssuedToken, Tokens};
pub use when::Forecast;
