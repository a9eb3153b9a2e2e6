//! Plain-text tables for people: a header row and left-aligned columns.

use serde_json::Value;

/// A JSON value as a table cell: strings bare, null as `-`.
pub fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Renders `rows` under `header`, each column as wide as its widest cell
/// (cells are cut at 60 characters, with `…`).
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    const MAX: usize = 60;
    let cut = |cell: &str| -> String {
        let one_line = cell.replace(['\n', '\r'], " ");
        if one_line.chars().count() > MAX {
            one_line.chars().take(MAX - 1).chain(['…']).collect()
        } else {
            one_line
        }
    };
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| cut(c)).collect()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn columns_line_up_and_long_cells_are_cut() {
        let long = "x".repeat(100);
        let text = render(&["ID", "NAME"], &[vec!["1".into(), "a".into()], vec!["22".into(), long]]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ID  NAME");
        assert_eq!(lines[1], "1   a");
        assert!(lines[2].starts_with("22  xxx") && lines[2].ends_with('…'), "{}", lines[2]);
        assert_eq!(lines[2].chars().count(), 4 + 60);
    }
}
