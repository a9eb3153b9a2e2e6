//! Request types of the timer routes that read one timer or a page
//! (`id`, `app`, paging, `status`), and their checks. `status` takes a
//! status's name as well as its code (`status=succeeded`, `status=2`), and
//! a wrong one is answered with both lists.
//!
//! A timer's own fields are declared once, in [`xtimer_core::spec`]:
//! `createTimer` takes a [`TimerSpec`] (named `CreateTimer` here).

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};
use xtimer_core::fire::FireStatus;

use xtimer_core::spec::{check_chars, Invalid, Problems, MAX_APP_CHARS};

use crate::ApiError;

pub use xtimer_core::spec::{
    instant_ms, parse_cron, LateParam, NotifyAsyncflowParam, NotifyHttpParam, RetryParam, TimerSpec as CreateTimer,
    MAX_NAME_CHARS,
};

crate::of_app!(CreateTimer, TimerRef, AppTimersQuery, TimerTasksQuery);

/// Page size when none is given.
pub const DEFAULT_PAGE_SIZE: i64 = 20;
/// Largest page size.
pub const MAX_PAGE_SIZE: i64 = 500;

impl From<Invalid> for ApiError {
    fn from(invalid: Invalid) -> Self {
        ApiError::Invalid(invalid.to_string())
    }
}

/// Fire statuses by code, as `getTimerTasks?status=` takes them.
pub const FIRE_STATUS_NAMES: [(i64, &str); 6] =
    [(0, "pending"), (1, "running"), (2, "succeeded"), (3, "failed"), (4, "skipped"), (5, "missed")];

/// Timer statuses a search may ask for, by code, as `getAppTimers?status=`
/// takes them.
pub const TIMER_STATUS_NAMES: [(i64, &str); 3] = [(1, "disabled"), (2, "enabled"), (4, "completed")];

/// What a status parameter takes, in words: `one of 0-5 or pending, ...`.
fn status_choices(names: &[(i64, &str)]) -> String {
    let codes: Vec<i64> = names.iter().map(|(code, _)| *code).collect();
    let contiguous = codes.windows(2).all(|w| w[1] == w[0] + 1);
    let codes = match (codes.first(), codes.last()) {
        (Some(first), Some(last)) if contiguous => format!("{first}-{last}"),
        _ => codes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
    };
    let words: Vec<&str> = names.iter().map(|(_, name)| *name).collect();
    format!("one of {codes} or {}", words.join(", "))
}

/// A status given by code or by name (any case), as its code; a code out
/// of range is kept for the route's own check to name.
fn status_code<'de, D: Deserializer<'de>>(
    de: D,
    names: &'static [(i64, &'static str)],
) -> Result<Option<i64>, D::Error> {
    struct Status(&'static [(i64, &'static str)]);
    impl<'de> Visitor<'de> for Status {
        type Value = Option<i64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(&status_choices(self.0))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<i64>, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<i64>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Option<i64>, D::Error> {
            de.deserialize_any(self)
        }
        fn visit_i64<E: de::Error>(self, code: i64) -> Result<Option<i64>, E> {
            Ok(Some(code))
        }
        fn visit_u64<E: de::Error>(self, code: u64) -> Result<Option<i64>, E> {
            Ok(Some(i64::try_from(code).unwrap_or(i64::MAX)))
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<Option<i64>, E> {
            let text = text.trim();
            if let Ok(code) = text.parse::<i64>() {
                return Ok(Some(code));
            }
            match self.0.iter().find(|(_, name)| name.eq_ignore_ascii_case(text)) {
                Some((code, _)) => Ok(Some(*code)),
                None => Err(E::custom(format_args!(
                    "must be {}, got `{}`",
                    status_choices(self.0),
                    text.chars().take(64).collect::<String>()
                ))),
            }
        }
    }
    de.deserialize_option(Status(names))
}

/// `status` of `getTimerTasks`: a fire status's code or name.
fn fire_status<'de, D: Deserializer<'de>>(de: D) -> Result<Option<i64>, D::Error> {
    status_code(de, &FIRE_STATUS_NAMES)
}

/// `status` of `getAppTimers`: a timer status's code or name.
fn timer_status<'de, D: Deserializer<'de>>(de: D) -> Result<Option<i64>, D::Error> {
    status_code(de, &TIMER_STATUS_NAMES)
}

/// Query `id`, `app` of the routes acting on one timer (also the JSON body
/// of `delTimer`).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TimerRef {
    /// Timer id.
    pub id: i64,
    /// The app the timer must belong to.
    pub app: String,
}

/// Query of `getAppTimers`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppTimersQuery {
    /// The app whose timers to list.
    pub app: String,
    /// 1-based page number; defaults to 1.
    #[serde(default)]
    pub page_index: Option<i64>,
    /// Timers per page, 1..=500; defaults to 20.
    #[serde(default)]
    pub page_size: Option<i64>,
    /// Only timers whose name contains this, any case.
    #[serde(default)]
    pub q: Option<String>,
    /// Only timers in this status: 1, 2 or 4, or its name (disabled,
    /// enabled, completed).
    #[serde(default, deserialize_with = "timer_status")]
    #[param(value_type = Option<String>)]
    #[schema(value_type = Option<String>)]
    pub status: Option<i64>,
    /// Only timers whose labels meet this selector.
    #[serde(default)]
    pub selector: Option<String>,
}

/// Query of `getTimerTasks`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TimerTasksQuery {
    /// Timer id.
    pub id: i64,
    /// The app the timer must belong to.
    pub app: String,
    /// Only fires with this status: 0..=5, or its name (pending, running,
    /// succeeded, failed, skipped, missed).
    #[serde(default, deserialize_with = "fire_status")]
    #[param(value_type = Option<String>)]
    #[schema(value_type = Option<String>)]
    pub status: Option<i64>,
    /// `true`: the planned fires (pending, not yet due), soonest first;
    /// otherwise the fires already due, newest first.
    #[serde(default)]
    pub upcoming: Option<bool>,
    /// 1-based page number; defaults to 1.
    #[serde(default)]
    pub page_index: Option<i64>,
    /// Fires per page, 1..=500; defaults to 20.
    #[serde(default)]
    pub page_size: Option<i64>,
}

/// A validated page: rows to skip and to return.
pub use xtimer_service::Page;

impl AppTimersQuery {
    /// Checks `app` and the paging.
    pub fn validate(&self) -> Result<Page, ApiError> {
        let mut p = Problems::default();
        check_chars(&mut p, "app", &self.app, MAX_APP_CHARS);
        let page = page(&mut p, self.page_index, self.page_size);
        match page {
            Some(page) if p.is_empty() => Ok(page),
            _ => Err(p.into_error().into()),
        }
    }
}

impl TimerTasksQuery {
    /// Checks `app`, `status` and the paging.
    pub fn validate(&self) -> Result<(Option<FireStatus>, Page), ApiError> {
        let mut p = Problems::default();
        check_chars(&mut p, "app", &self.app, MAX_APP_CHARS);
        let status = match self.status {
            None => None,
            Some(code) => {
                let status = FireStatus::from_code(code);
                if status.is_none() {
                    p.push(
                        "status",
                        format!(
                            "must be 0 (pending), 1 (running), 2 (succeeded), 3 (failed), 4 (skipped) or \
                             5 (missed), got {code}"
                        ),
                    );
                }
                status
            }
        };
        let page = page(&mut p, self.page_index, self.page_size);
        match page {
            Some(page) if p.is_empty() => Ok((status, page)),
            _ => Err(p.into_error().into()),
        }
    }
}

fn page(p: &mut Problems, index: Option<i64>, size: Option<i64>) -> Option<Page> {
    let index = index.unwrap_or(1);
    let size = size.unwrap_or(DEFAULT_PAGE_SIZE);
    let mut ok = true;
    if index < 1 {
        p.push("pageIndex", format!("must be at least 1, got {index}"));
        ok = false;
    }
    if !(1..=MAX_PAGE_SIZE).contains(&size) {
        p.push("pageSize", format!("must be 1 to {MAX_PAGE_SIZE}, got {size}"));
        ok = false;
    }
    if !ok {
        return None;
    }
    // SQLite takes the offset as an i64.
    match (index - 1).checked_mul(size) {
        Some(offset) => Some(Page { offset: offset as u64, limit: size as u64 }),
        None => {
            p.push("pageIndex", format!("{index} is too large"));
            None
        }
    }
}
