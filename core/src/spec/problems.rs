//! The problems a check finds, gathered so that a refusal lists every one
//! ([`Invalid`]): a spec's checks and those of the API's other requests.

use std::fmt::Display;

use super::Invalid;

/// Problems found so far, each `"{field}: {problem}"`.
#[derive(Debug, Default)]
pub struct Problems(pub(crate) Vec<String>);

impl Problems {
    /// Notes `problem` of `field`.
    pub fn push(&mut self, field: &str, problem: impl Display) {
        self.0.push(format!("{field}: {problem}"));
    }

    /// Whether none was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The refusal that lists them.
    pub fn into_error(self) -> Invalid {
        Invalid(self.0)
    }
}

/// Notes a problem of `field` unless its `value` has 1 to `max` characters.
pub fn check_chars(p: &mut Problems, field: &str, value: &str, max: usize) {
    let chars = value.chars().count();
    if chars == 0 {
        p.push(field, "must not be empty");
    } else if chars > max {
        p.push(field, format!("must be at most {max} characters, got {chars}"));
    }
}
