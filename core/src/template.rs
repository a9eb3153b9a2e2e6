//! Templated callbacks (`notifyHTTPParam.template: true`): `{{name}}`
//! placeholders in the URL, the header values and the body, filled in per
//! fire with what the fire is (its times, key and attempt), so a receiver
//! that cannot read headers still learns them.
//!
//! Values go in JSON-string-escaped in the body (a body that was valid
//! JSON stays valid whatever the values), percent-encoded in the URL, and
//! as they are (less control characters) in header values. Text without
//! a closing `}}` is left as it is.

use chrono::SecondsFormat;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::timer::{HttpNotify, Timer};

/// Every placeholder a template may hold.
pub const PLACEHOLDERS: [&str; 11] = [
    "timerId",
    "timerName",
    "app",
    "runTimer",
    "runTime",
    "scheduledTimer",
    "scheduledTime",
    "fireKey",
    "attempt",
    "lastRunTimer",
    "lastRunTime",
];

/// What a fire fills the placeholders with.
#[derive(Debug, Clone, Copy)]
pub struct FireFacts<'a> {
    /// The fire's timer.
    pub timer: &'a Timer,
    /// When it is sent, Unix ms (its scheduled time unless spread).
    pub run_ms: i64,
    /// Its scheduled time, Unix ms.
    pub scheduled_ms: i64,
    /// Its `Idempotency-Key`.
    pub fire_key: &'a str,
    /// The attempt, 1 first.
    pub attempt: u32,
}

/// A placeholder's name not in [`PLACEHOLDERS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown placeholder `{{{{{0}}}}}`; known: {known}", known = PLACEHOLDERS.join(", "))]
pub struct UnknownPlaceholder(pub String);

/// Checks that every placeholder in `text` is known; the first that is
/// not, otherwise.
pub fn check(text: &str) -> Result<(), UnknownPlaceholder> {
    for part in parts(text) {
        if let Part::Name(name) = part {
            if !PLACEHOLDERS.contains(&name) {
                return Err(UnknownPlaceholder(name.to_owned()));
            }
        }
    }
    Ok(())
}

/// `text` with every placeholder filled with `0`: a templated URL as far
/// as a check of its form and host can tell.
pub fn sample(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for part in parts(text) {
        match part {
            Part::Text(text) => out.push_str(text),
            Part::Name(_) => out.push('0'),
        }
    }
    out
}

/// Checks a templated notify's URL, header values and body: every
/// placeholder known, none in the URL's scheme or host (its target is
/// checked when the timer is stored). The field (`url`, `header.X`,
/// `body`) and the problem, otherwise.
pub fn check_notify(notify: &HttpNotify) -> Result<(), (String, String)> {
    let named = |field: String| move |err: UnknownPlaceholder| (field, err.to_string());
    check(&notify.url).map_err(named("url".into()))?;
    let authority_end =
        notify.url.find("://").map(|i| i + 3).and_then(|start| {
            notify.url[start..].find(['/', '?', '#']).map(|end| start + end).or(Some(notify.url.len()))
        });
    if notify.url[..authority_end.unwrap_or(0)].contains("{{") {
        return Err(("url".into(), "placeholders may be in the path and query, not the scheme or host".into()));
    }
    for (name, value) in &notify.headers {
        check(value).map_err(named(format!("header.{name}")))?;
    }
    if let Some(body) = &notify.body {
        check(body).map_err(named("body".into()))?;
    }
    Ok(())
}

/// `notify` with its placeholders filled for the fire `facts` names (a
/// notify without `template` comes back as it is).
pub fn render(notify: &HttpNotify, facts: &FireFacts<'_>) -> HttpNotify {
    if !notify.template {
        return notify.clone();
    }
    let values = Values::of(facts);
    HttpNotify {
        url: fill(&notify.url, &values, Escape::Url),
        method: notify.method.clone(),
        headers: notify.headers.iter().map(|(k, v)| (k.clone(), fill(v, &values, Escape::Header))).collect(),
        body: notify.body.as_deref().map(|body| fill(body, &values, Escape::Json)),
        timeout_ms: notify.timeout_ms,
        template: true,
        flow_key: None,
    }
}

/// A piece of a template.
#[derive(Debug, PartialEq, Eq)]
enum Part<'a> {
    Text(&'a str),
    /// `{{name}}`, the name trimmed.
    Name(&'a str),
}

/// The pieces of `text`: literal text and placeholders.
fn parts(text: &str) -> impl Iterator<Item = Part<'_>> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(open) = rest.find("{{") else {
            return Some(Part::Text(std::mem::take(&mut rest)));
        };
        if open > 0 {
            let (text, after) = rest.split_at(open);
            rest = after;
            return Some(Part::Text(text));
        }
        match rest[2..].find("}}") {
            Some(close) => {
                let name = rest[2..2 + close].trim();
                rest = &rest[2 + close + 2..];
                Some(Part::Name(name))
            }
            None => Some(Part::Text(std::mem::take(&mut rest))),
        }
    })
}

#[derive(Debug, Clone, Copy)]
enum Escape {
    Url,
    Header,
    Json,
}

/// Characters a value keeps in a URL: RFC 3986's unreserved ones.
const URL_VALUE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

fn fill(text: &str, values: &Values, escape: Escape) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    for part in parts(text) {
        match part {
            Part::Text(text) => out.push_str(text),
            Part::Name(name) => match values.get(name) {
                Some(value) => match escape {
                    Escape::Url => out.extend(utf8_percent_encode(value, URL_VALUE)),
                    Escape::Header => out.extend(value.chars().filter(|c| !c.is_control())),
                    Escape::Json => {
                        let quoted = serde_json::to_string(value).expect("a string serializes");
                        out.push_str(&quoted[1..quoted.len() - 1]);
                    }
                },
                // Checked at create and update; anything else is left as written.
                None => {
                    out.push_str("{{");
                    out.push_str(name);
                    out.push_str("}}");
                }
            },
        }
    }
    out
}

/// Each placeholder's value for one fire, in [`PLACEHOLDERS`] order.
struct Values([String; 11]);

impl Values {
    fn of(facts: &FireFacts<'_>) -> Self {
        let timer = facts.timer;
        let zone = crate::cron::parse_timezone(timer.schedule.timezone()).unwrap_or(chrono_tz::UTC);
        let time = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .map(|t| t.with_timezone(&zone).to_rfc3339_opts(SecondsFormat::Millis, true))
                .unwrap_or_default()
        };
        let last = timer.previous_fire(facts.scheduled_ms);
        Self([
            timer.id.to_string(),
            timer.name.clone(),
            timer.app.clone(),
            facts.run_ms.to_string(),
            time(facts.run_ms),
            facts.scheduled_ms.to_string(),
            time(facts.scheduled_ms),
            facts.fire_key.to_owned(),
            facts.attempt.to_string(),
            last.map(|ms| ms.to_string()).unwrap_or_default(),
            last.map(time).unwrap_or_default(),
        ])
    }

    fn get(&self, name: &str) -> Option<&str> {
        PLACEHOLDERS.iter().position(|known| *known == name).map(|i| self.0[i].as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::timer::{NewTimer, Notify, Schedule};

    fn timer(template: bool, url: &str, body: &str) -> Timer {
        let notify = HttpNotify {
            url: url.into(),
            method: "POST".into(),
            headers: BTreeMap::from([("X-Run".to_owned(), "{{runTime}}".to_owned())]),
            body: Some(body.into()),
            timeout_ms: None,
            template,
            flow_key: None,
        };
        let schedule = Schedule::Cron { expr: "* * * * * *".into(), timezone: "Asia/Shanghai".into() };
        let mut timer = NewTimer::enabled("billing", "say \"hi\"\n & go", schedule, Notify::Http(notify)).stored(42, 0);
        (timer.create_time, timer.modify_time) = (1_767_225_600_000, 1_767_225_600_000);
        timer
    }

    fn rendered(t: &Timer, scheduled_ms: i64, attempt: u32) -> HttpNotify {
        let Notify::Http(notify) = &t.notify else { unreachable!() };
        let key = format!("{}_{scheduled_ms}", t.id);
        render(notify, &FireFacts { timer: t, run_ms: scheduled_ms, scheduled_ms, fire_key: &key, attempt })
    }

    #[test]
    fn a_body_stays_json_and_a_url_stays_a_url_whatever_the_values() {
        let t = timer(
            true,
            "http://h/x?name={{timerName}}&at={{ runTime }}&key={{fireKey}}",
            r#"{"name":"{{timerName}}","at":"{{runTime}}","n":{{attempt}},"last":"{{lastRunTimer}}","app":"{{app}}"}"#,
        );
        let out = rendered(&t, 1_767_225_605_000, 2);
        let body: serde_json::Value = serde_json::from_str(out.body.as_deref().unwrap()).expect("still JSON");
        assert_eq!(body["name"], "say \"hi\"\n & go");
        assert_eq!(body["at"], "2026-01-01T08:00:05.000+08:00", "in the timer's zone");
        assert_eq!(body["n"], 2);
        assert_eq!(body["last"], "1767225604000");
        assert_eq!(body["app"], "billing");
        assert_eq!(
            out.url,
            "http://h/x?name=say%20%22hi%22%0A%20%26%20go&at=2026-01-01T08%3A00%3A05.000%2B08%3A00&key=42_1767225605000"
        );
        assert_eq!(out.headers["X-Run"], "2026-01-01T08:00:05.000+08:00");
    }

    #[test]
    fn the_first_fire_has_no_last_run_and_a_plain_notify_is_sent_as_stored() {
        let t = timer(true, "http://h/{{lastRunTime}}", "[{{lastRunTimer}}]");
        // The first fire after its creation at ...600_000.
        let out = rendered(&t, 1_767_225_600_000, 1);
        assert_eq!(out.url, "http://h/");
        assert_eq!(out.body.as_deref(), Some("[]"));
        let plain = timer(false, "http://h/{{runTimer}}", "{{runTimer}}");
        let out = rendered(&plain, 1_767_225_605_000, 1);
        assert_eq!(out.url, "http://h/{{runTimer}}");
        assert_eq!(out.body.as_deref(), Some("{{runTimer}}"));
    }

    #[test]
    fn unknown_placeholders_are_named_and_loose_braces_are_text() {
        assert_eq!(check("a {{runTimer}} b {{ fireKey }}"), Ok(()));
        assert_eq!(check("{{nope}}"), Err(UnknownPlaceholder("nope".into())));
        assert!(check("{{nope}}").unwrap_err().to_string().contains("`{{nope}}`"));
        assert_eq!(check("{\"a\":{\"b\":1}}"), Ok(()), "JSON's own braces hold no placeholder name");
        assert_eq!(check("x {{ unclosed"), Ok(()));
        let parts: Vec<_> = parts("a{{b}}c{{").collect();
        assert_eq!(parts, vec![Part::Text("a"), Part::Name("b"), Part::Text("c"), Part::Text("{{")]);
    }

    #[test]
    fn a_templated_notify_is_checked_field_by_field() {
        let Notify::Http(mut notify) = timer(true, "http://h:8080/p/{{timerId}}?at={{runTimer}}", "{}").def.notify
        else {
            unreachable!()
        };
        assert_eq!(check_notify(&notify), Ok(()));
        assert_eq!(sample(&notify.url), "http://h:8080/p/0?at=0");
        notify.headers.insert("X-Bad".into(), "{{when}}".into());
        assert_eq!(check_notify(&notify).unwrap_err().0, "header.X-Bad");
        notify.headers.clear();
        notify.body = Some("{{at}}".into());
        assert_eq!(check_notify(&notify).unwrap_err().0, "body");
        notify.url = "http://{{app}}.example.com/x".into();
        assert!(check_notify(&notify).unwrap_err().1.contains("not the scheme or host"));
    }
}
