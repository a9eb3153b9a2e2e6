//! The log: `XTIMER_LOG` sets the level (default `info`), and
//! `XTIMER_LOG_FORMAT` the format: `text` (the default; colour only at a
//! terminal) or `json` (one JSON object per line, for log shippers).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Lines for people.
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`
    /// (the message and every field), `spans`.
    Json,
}

impl LogFormat {
    /// Reads `XTIMER_LOG_FORMAT` (`text` or `json`, any case; unset: text).
    pub fn from_env() -> Result<Self, String> {
        match std::env::var("XTIMER_LOG_FORMAT") {
            Err(_) => Ok(Self::Text),
            Ok(value) => Self::parse(&value),
        }
    }

    /// Parses a format name.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("XTIMER_LOG_FORMAT is `{other}`; it must be `text` or `json`")),
        }
    }
}

/// Installs the process's log subscriber, writing to stdout.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("XTIMER_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        // Colour only for a person at a terminal, not in files and journals.
        LogFormat::Text => builder.with_ansi(std::io::stdout().is_terminal()).init(),
        LogFormat::Json => builder.json().with_current_span(false).with_ansi(false).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_a_bad_one_is_named() {
        assert_eq!(LogFormat::parse("json"), Ok(LogFormat::Json));
        assert_eq!(LogFormat::parse("JSON"), Ok(LogFormat::Json));
        assert_eq!(LogFormat::parse("text"), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(""), Ok(LogFormat::Text));
        let err = LogFormat::parse("yaml").unwrap_err();
        assert!(err.contains("XTIMER_LOG_FORMAT") && err.contains("`json`"), "{err}");
    }
}
