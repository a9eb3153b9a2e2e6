//! A search of one app's timers (API 1f): status, name, ids and label
//! selectors, as a `WHERE` with its values bound.

use xtimer_core::labels::Requirement;

use crate::repo::TimerQuery;
use crate::sql::code;

/// The `WHERE` of a search of one app's timers that are not deleted, its
/// values bound in order (`$1`, `$2`, ...; the status and ids, numbers,
/// are written in).
pub(super) struct Search {
    pub(super) sql: String,
    pub(super) binds: Vec<String>,
}

impl Search {
    pub(super) fn new(app: &str, query: &TimerQuery) -> Self {
        let mut search = Self { sql: String::new(), binds: Vec::new() };
        let app_value = search.bind(app.to_owned());
        search.sql = format!("app = {app_value} AND status <> {}", code::TIMER_DELETED);
        if let Some(status) = query.status {
            search.sql.push_str(&format!(" AND status = {}", status.code()));
        }
        if let Some(q) = query.q.as_deref().filter(|q| !q.is_empty()) {
            let escaped: String = q
                .to_lowercase()
                .chars()
                .flat_map(|c| match c {
                    '%' | '_' | '!' => vec!['!', c],
                    c => vec![c],
                })
                .collect();
            let pattern = search.bind(format!("%{escaped}%"));
            // The description is the last key of the timing JSON: what
            // follows `"description":"` there is its text.
            let described = search.bind(format!("%\"description\":\"%{escaped}%"));
            search.sql.push_str(&format!(
                " AND (LOWER(name) LIKE {pattern} ESCAPE '!' OR LOWER(timing) LIKE {described} ESCAPE '!')"
            ));
        }
        if let Some(ids) = &query.ids {
            let list: Vec<String> = ids.iter().map(i64::to_string).collect();
            let list = if list.is_empty() { "NULL".to_owned() } else { list.join(",") };
            search.sql.push_str(&format!(" AND timer_id IN ({list})"));
        }
        for requirement in &query.selector.0 {
            let (negated, key, values) = match requirement {
                Requirement::In(key, values) => (false, key, Some(values)),
                Requirement::NotIn(key, values) => (true, key, Some(values)),
                Requirement::Exists(key) => (false, key, None),
                Requirement::Absent(key) => (true, key, None),
            };
            // A label the timers must have is looked up in the label index
            // (app, key, value), which drives the search; one they must not
            // have is probed per timer by its key ((timer_id, key)).
            let mut label = if negated {
                let key = search.bind(key.clone());
                format!(" AND NOT EXISTS (SELECT 1 FROM t_timer_label l WHERE l.timer_id = t_timer.timer_id AND l.lkey = {key}")
            } else {
                let app = search.bind(app.to_owned());
                let key = search.bind(key.clone());
                format!(
                    " AND timer_id IN (SELECT l.timer_id FROM t_timer_label l WHERE l.app = {app} AND l.lkey = {key}"
                )
            };
            if let Some(values) = values {
                let values: Vec<String> = values.iter().map(|v| search.bind(v.clone())).collect();
                label.push_str(&format!(" AND l.lvalue IN ({})", values.join(", ")));
            }
            label.push(')');
            search.sql.push_str(&label);
        }
        search
    }

    /// Adds a value; its placeholder.
    fn bind(&mut self, value: String) -> String {
        self.binds.push(value);
        format!("${}", self.binds.len())
    }
}
