//! What a user sets on a timer, declared once.
//!
//! [`TimerSpec`] is the timer as the API takes it (`createTimer`, each item
//! of `createTimers` and `applyTimers`) and shows it (`getTimer` flattens
//! it into its view); an update is a [`TimerPatch`] over the stored
//! timer's spec ([`TimerSpec::apply`]); the history's diff and the CLI's
//! export read the same fields. [`TimerSpec::validate_with`] turns a spec
//! into the [`NewTimer`] to store, or an [`Invalid`] listing every problem.
//!
//! Adding a field: declare it in `wire.rs` (serde and the schema follow),
//! check it in `check.rs`, show it in `of.rs`, and give it its behaviour.

#[cfg(doc)]
use crate::timer::NewTimer;

mod check;
mod export;
mod items;
mod of;
mod patch;
mod preview;
mod problems;
pub mod schemas;
mod wire;

pub use check::{instant_ms, parse_cron};
pub use items::{listed_problems, read_item, unique_names};
pub use patch::TimerPatch;
pub use preview::{parse_instant, PreviewAsk, PreviewPlan, PreviewQuery, DEFAULT_PREVIEW_COUNT, MAX_PREVIEW_COUNT};
pub use problems::{check_chars, Problems};
pub use wire::*;
