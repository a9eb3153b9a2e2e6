//! "Did you mean ...?": the known name nearest to a mistyped one, for every
//! message that refuses a name (a setting, a JSON field, a route).

/// Levenshtein distance between two short names, byte by byte.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The candidate `name` most likely meant: one that differs only in case,
/// else the nearest by edit distance (case ignored) if at most
/// `max_distance` away; ties go to the first.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>, max_distance: usize) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        let distance = edit_distance(&lower, &candidate.to_ascii_lowercase());
        if best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.filter(|(d, _)| *d <= max_distance).map(|(_, c)| c)
}

/// How far a mistyped field or route name may be from the one meant: a
/// third of its length, at least 1 and at most 3.
pub fn typo_distance(name: &str) -> usize {
    (name.len() / 3).clamp(1, 3)
}

/// serde's refusal of an unknown field (`notifyHttpParam: unknown field
/// `notifyHttpParam`, expected one of `app`, `name`, ... at line 1 column
/// 20`) said with the field most likely meant, when one is near (a case
/// slip or a typo): `notifyHttpParam: unknown field `notifyHttpParam`:
/// did you mean `notifyHTTPParam`?`. Without a near one, the list of
/// fields is kept. Any other message is kept.
pub fn unknown_field_in_words(message: &str) -> String {
    const UNKNOWN: &str = "unknown field `";
    let Some(at) = message.find(UNKNOWN) else { return message.to_owned() };
    let rest = &message[at + UNKNOWN.len()..];
    let Some((field, after)) = rest.split_once('`') else { return message.to_owned() };
    let Some(expected) = after.strip_prefix(", expected ") else { return message.to_owned() };
    let expected = expected.split(" at line ").next().unwrap_or_default();
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    match nearest(field, known.iter().copied(), typo_distance(field)) {
        Some(meant) => format!("{}{UNKNOWN}{field}`: did you mean `{meant}`?", &message[..at]),
        None => message.to_owned(),
    }
}

/// serde's missing field, after the path of the object that lacks it and
/// before serde_json's position (`notifyHTTPParam: missing field `url` at
/// line 1 column 40`), said as the API says a field's problem: the field's
/// path, then what to do (`notifyHTTPParam.url: is required`). Any other
/// message is kept.
pub fn missing_in_words(message: &str) -> String {
    const MISSING: &str = "missing field `";
    let Some(at) = message.find(MISSING) else { return message.to_owned() };
    let parent = match &message[..at] {
        "" => "",
        path => match path.strip_suffix(": ") {
            Some(parent) => parent,
            None => return message.to_owned(),
        },
    };
    let rest = &message[at + MISSING.len()..];
    let Some((field, after)) = rest.split_once('`') else { return message.to_owned() };
    if !(after.is_empty() || after.starts_with(" at line ")) {
        return message.to_owned();
    }
    match parent {
        "" => format!("{field}: is required"),
        parent => format!("{parent}.{field}: is required"),
    }
}

/// serde's Rust type names in a type mismatch, said in words: `expected
/// i64` becomes `expected a whole number`.
pub fn in_words(message: &str) -> String {
    const TYPES: [(&str, &str); 8] = [
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected u64", "expected a whole number that is not negative"),
        ("expected u32", "expected a whole number that is not negative"),
        ("expected u16", "expected a whole number that is not negative"),
        ("expected f64", "expected a number"),
        ("expected a string", "expected a string (in double quotes)"),
        ("expected a boolean", "expected true or false"),
    ];
    let mut out = message.to_string();
    for (from, to) in TYPES {
        if let Some(at) = out.find(from) {
            // Only a whole word: `expected i64` but not `expected i640`.
            let end = at + from.len();
            if !out[end..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
                out.replace_range(at..end, to);
            }
        }
    }
    out
}

/// serde's refusal said as the API says a field's problem: a missing
/// field as `{field}: is required`, Rust type names in words, an unknown
/// field with the name most likely meant.
pub fn serde_in_words(message: &str) -> String {
    unknown_field_in_words(&in_words(&missing_in_words(message)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_name_case_first_then_by_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let fields = ["notifyHTTPParam", "notifyAsyncflowParam", "name", "app"];
        assert_eq!(nearest("notifyHttpParam", fields, 3), Some("notifyHTTPParam"));
        assert_eq!(nearest("nmae", fields, 2), Some("name"));
        assert_eq!(nearest("schedule", fields, 2), None);
        assert_eq!(typo_distance("ab"), 1);
        assert_eq!(typo_distance("notifyHttpParam"), 3);
    }
}
