//! Labels on timers and the selectors that find them (API 1f).
//!
//! A label is `key: value`: at most [`MAX_LABELS`] per timer, a key of 1 to
//! [`MAX_KEY_CHARS`] characters of `a-z 0-9 . _ / -`, a value of at most
//! [`MAX_VALUE_CHARS`] characters. A selector is requirements joined by
//! commas, all of which must hold: `k=v` (also `k==v`), `k!=v`, `k`,
//! `!k`, `k in (a,b)`, `k notin (a,b)`. As in Kubernetes, `k!=v` and
//! `k notin (...)` also match a timer without `k`.

use std::collections::BTreeMap;

/// A timer's labels, by key.
pub type Labels = BTreeMap<String, String>;

/// Most labels on one timer.
pub const MAX_LABELS: usize = 16;
/// Most characters of a label key.
pub const MAX_KEY_CHARS: usize = 63;
/// Most characters of a label value.
pub const MAX_VALUE_CHARS: usize = 128;
/// Most requirements in one selector.
pub const MAX_REQUIREMENTS: usize = 16;

/// Checks `labels`; what is wrong with the first bad one, naming its key.
pub fn check(labels: &Labels) -> Result<(), String> {
    if labels.len() > MAX_LABELS {
        return Err(format!("at most {MAX_LABELS} labels, got {}", labels.len()));
    }
    for (key, value) in labels {
        check_key(key).map_err(|why| format!("key `{key}`: {why}"))?;
        let chars = value.chars().count();
        if chars > MAX_VALUE_CHARS {
            return Err(format!("`{key}`: the value must be at most {MAX_VALUE_CHARS} characters, got {chars}"));
        }
        if value.chars().any(char::is_control) {
            return Err(format!("`{key}`: the value must not hold control characters"));
        }
    }
    Ok(())
}

fn check_key(key: &str) -> Result<(), String> {
    let chars = key.chars().count();
    if chars == 0 || chars > MAX_KEY_CHARS {
        return Err(format!("must be 1 to {MAX_KEY_CHARS} characters, got {chars}"));
    }
    match key.chars().find(|c| !is_key_char(*c)) {
        Some(c) => Err(format!("`{c}` is not one of a-z 0-9 . _ / -")),
        None => Ok(()),
    }
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '/' | '-')
}

/// One requirement of a [`Selector`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// The label is one of these values (`k=v`, `k in (a,b)`).
    In(String, Vec<String>),
    /// The label is none of these values, or absent (`k!=v`, `k notin (a,b)`).
    NotIn(String, Vec<String>),
    /// The label is there (`k`).
    Exists(String),
    /// The label is not there (`!k`).
    Absent(String),
}

/// Requirements that must all hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

/// A selector that does not parse: where (0-based character) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at character {position}: {problem}")]
pub struct SelectorError {
    /// Its 0-based character position.
    pub position: usize,
    /// What was expected there.
    pub problem: String,
}

impl Selector {
    /// Parses `text`; an empty text selects everything.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser { chars: text.chars().collect(), at: 0 };
        let mut requirements = Vec::new();
        parser.skip_spaces();
        if parser.done() {
            return Ok(Self(requirements));
        }
        loop {
            requirements.push(parser.requirement()?);
            parser.skip_spaces();
            if parser.done() {
                break;
            }
            parser.expect(',')?;
        }
        if requirements.len() > MAX_REQUIREMENTS {
            return Err(SelectorError {
                position: 0,
                problem: format!("at most {MAX_REQUIREMENTS} requirements, got {}", requirements.len()),
            });
        }
        Ok(Self(requirements))
    }

    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        })
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn done(&self) -> bool {
        self.at >= self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn fail<T>(&self, problem: impl Into<String>) -> Result<T, SelectorError> {
        Err(SelectorError { position: self.at, problem: problem.into() })
    }

    fn expect(&mut self, c: char) -> Result<(), SelectorError> {
        self.skip_spaces();
        match self.peek() {
            Some(found) if found == c => {
                self.at += 1;
                Ok(())
            }
            Some(found) => self.fail(format!("expected `{c}`, found `{found}`")),
            None => self.fail(format!("expected `{c}`, found the end")),
        }
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        self.skip_spaces();
        let start = self.at;
        while self.peek().is_some_and(is_key_char) {
            self.at += 1;
        }
        let key: String = self.chars[start..self.at].iter().collect();
        if key.is_empty() {
            return match self.peek() {
                Some(c) => self.fail(format!("expected a label key (a-z 0-9 . _ / -), found `{c}`")),
                None => self.fail("expected a label key, found the end"),
            };
        }
        if key.chars().count() > MAX_KEY_CHARS {
            return Err(SelectorError {
                position: start,
                problem: format!("a key is at most {MAX_KEY_CHARS} characters"),
            });
        }
        Ok(key)
    }

    /// A value: anything up to a separator (`,` `)` `(` `=` `!` or a space).
    fn value(&mut self) -> Result<String, SelectorError> {
        self.skip_spaces();
        let start = self.at;
        while self.peek().is_some_and(|c| !matches!(c, ',' | '(' | ')' | '=' | '!') && !c.is_whitespace()) {
            self.at += 1;
        }
        let value: String = self.chars[start..self.at].iter().collect();
        if value.chars().count() > MAX_VALUE_CHARS {
            return Err(SelectorError {
                position: start,
                problem: format!("a value is at most {MAX_VALUE_CHARS} characters"),
            });
        }
        Ok(value)
    }

    fn word(&mut self, word: &str) -> bool {
        let end = self.at + word.len();
        let matches = end <= self.chars.len()
            && self.chars[self.at..end].iter().copied().eq(word.chars())
            && self.chars.get(end).is_none_or(|c| c.is_whitespace() || *c == '(');
        if matches {
            self.at = end;
        }
        matches
    }

    fn set(&mut self) -> Result<Vec<String>, SelectorError> {
        self.expect('(')?;
        let mut values = vec![self.value()?];
        loop {
            self.skip_spaces();
            match self.peek() {
                Some(',') => {
                    self.at += 1;
                    values.push(self.value()?);
                }
                Some(')') => {
                    self.at += 1;
                    return Ok(values);
                }
                Some(c) => return self.fail(format!("expected `,` or `)`, found `{c}`")),
                None => return self.fail("expected `)`, found the end"),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        self.skip_spaces();
        if self.peek() == Some('!') {
            self.at += 1;
            return Ok(Requirement::Absent(self.key()?));
        }
        let key = self.key()?;
        self.skip_spaces();
        match self.peek() {
            None | Some(',') => Ok(Requirement::Exists(key)),
            Some('=') => {
                self.at += 1;
                if self.peek() == Some('=') {
                    self.at += 1;
                }
                Ok(Requirement::In(key, vec![self.value()?]))
            }
            Some('!') => {
                self.at += 1;
                if self.peek() != Some('=') {
                    return self.fail("expected `=` after `!`");
                }
                self.at += 1;
                Ok(Requirement::NotIn(key, vec![self.value()?]))
            }
            Some(_) if self.word("notin") => Ok(Requirement::NotIn(key, self.set()?)),
            Some(_) if self.word("in") => Ok(Requirement::In(key, self.set()?)),
            Some(c) => {
                self.fail(format!("expected `=`, `!=`, `in`, `notin`, `,` or the end after `{key}`, found `{c}`"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_form_parses_and_matches_as_documented() {
        let s = Selector::parse("team=a, tier != gold ,env,!legacy, region in (eu, us), zone notin (z1)").unwrap();
        assert_eq!(s.0.len(), 6);
        assert_eq!(s.0[0], Requirement::In("team".into(), vec!["a".into()]));
        assert_eq!(s.0[4], Requirement::In("region".into(), vec!["eu".into(), "us".into()]));
        let good = labels(&[("team", "a"), ("env", "prod"), ("region", "us")]);
        assert!(s.matches(&good), "tier and zone absent: != and notin hold");
        assert!(!s.matches(&labels(&[("team", "a"), ("env", "x"), ("region", "us"), ("tier", "gold")])));
        assert!(!s.matches(&labels(&[("team", "a"), ("env", "x"), ("region", "us"), ("legacy", "")])));
        assert!(!s.matches(&labels(&[("team", "a"), ("env", "x"), ("region", "ap")])));
        assert!(Selector::parse("").unwrap().matches(&Labels::new()));
        assert_eq!(Selector::parse("team==a").unwrap(), Selector::parse("team=a").unwrap());
        assert_eq!(Selector::parse("k=").unwrap().0[0], Requirement::In("k".into(), vec![String::new()]));
    }

    #[test]
    fn a_selector_that_does_not_parse_says_where() {
        let cases = [
            ("team=a,", 7),
            ("Team=a", 0),
            ("team=a tier=b", 7),
            ("team in (a", 10),
            ("team in a", 8),
            ("team !x", 6),
            ("!", 1),
        ];
        for (text, position) in cases {
            let err = Selector::parse(text).unwrap_err();
            assert_eq!(err.position, position, "{text}: {err}");
        }
    }

    #[test]
    fn labels_are_checked_against_their_limits() {
        assert_eq!(check(&labels(&[("team", "a"), ("app.kubernetes.io/name", "x")])), Ok(()));
        assert!(check(&labels(&[("Team", "a")])).unwrap_err().contains("`T` is not one of"));
        assert!(check(&labels(&[("", "a")])).unwrap_err().contains("1 to 63"));
        assert!(check(&labels(&[("k", &"v".repeat(129))])).unwrap_err().contains("at most 128"));
        let many: Labels = (0..17).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(check(&many).unwrap_err().contains("at most 16 labels"));
    }
}
