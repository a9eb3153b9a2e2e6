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
