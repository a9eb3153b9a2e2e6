//! Lists of specs (`createTimers`, `applyTimers`): each item read on its
//! own and named by its index; names unique within the list.

use std::collections::HashMap;

use serde_json::Value;

use super::wire::TimerSpec;
use crate::timer::NewTimer;

/// Item `i` of a list read as a spec, or its problem named by its index
/// (`timers[3].name: is required`).
pub fn read_item(i: usize, value: Value) -> Result<TimerSpec, String> {
    if !value.is_object() {
        return Err(format!("timers[{i}]: must be a JSON object (a timer as createTimer takes it)"));
    }
    serde_json::from_value::<TimerSpec>(value).map_err(|err| {
        let said = crate::suggest::unknown_field_in_words(&err.to_string());
        let worded = crate::suggest::missing_in_words(&said);
        if worded == said {
            format!("timers[{i}]: {said}")
        } else {
            format!("timers[{i}].{worded}")
        }
    })
}

/// A problem for each timer whose app and name an earlier one of the
/// list has (`timers[4].name: `x` is also the name of timers[1] ...`).
pub fn unique_names<'a>(timers: impl IntoIterator<Item = &'a NewTimer>) -> Vec<String> {
    let mut first: HashMap<(&str, &str), usize> = HashMap::new();
    let mut problems = Vec::new();
    for (i, t) in timers.into_iter().enumerate() {
        if let Some(j) = first.insert((t.app.as_str(), t.name.as_str()), i) {
            problems.push(format!("timers[{i}].name: `{}` is also the name of timers[{j}] in app `{}`", t.name, t.app));
        }
    }
    problems
}

/// Most item problems one refusal of a list names.
pub const MAX_LISTED_PROBLEMS: usize = 20;

/// A list's problems as one message: the first [`MAX_LISTED_PROBLEMS`]
/// (20) joined by `; `, then `and N more problems` where there are more.
pub fn listed_problems(mut problems: Vec<String>) -> String {
    let more = problems.len().saturating_sub(MAX_LISTED_PROBLEMS);
    problems.truncate(MAX_LISTED_PROBLEMS);
    if more > 0 {
        problems.push(format!("and {more} more problems"));
    }
    problems.join("; ")
}
