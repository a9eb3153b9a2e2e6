//! The client commands of the binary: `xtimer timer ...`, calls to a
//! running server's timer API, and `xtimer cron preview`, worked out here
//! as the server's `previewCron` does (a server is called only for an
//! app's calendars). They print tables for people or the reply's JSON for
//! scripts (`--json`), and exit with a code per kind of failure
//! ([`client::exit`]).
//!
//! - [`apply`]: `apply` and `export`, timers as code (YAML or JSON files).
//! - [`client`]: the HTTP call, its envelope and exit codes.
//! - [`timer`]: the `timer` subcommands.
//! - [`describe`]: a timer in words: its schedule, whatever its kind, every
//!   field, and the status codes as words.
//! - [`preview`]: `cron preview`: its arguments, and the preview without a server.
//! - [`table`]: plain-text tables.

pub mod apply;
pub mod client;
pub mod describe;
pub mod preview;
pub mod table;
pub mod timer;

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::Value;

use self::client::{Client, Failure};
use self::preview::PreviewArgs;

/// Where the server is and who is calling; shared by every client command.
#[derive(Debug, Clone, Args)]
pub struct Remote {
    /// The server's base URL.
    #[arg(long, env = "XTIMER_SERVER", default_value = "http://127.0.0.1:8080", global = true)]
    pub server: String,
    /// Bearer token (an app's or the admin's) when the server has auth on.
    #[arg(long, env = "XTIMER_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print the reply's `result` as JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

impl Remote {
    fn client(&self) -> Result<Client, Failure> {
        Client::new(&self.server, self.token.clone())
    }
}

/// `xtimer cron ...`.
#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// The next fire times of a cron expression (or of an interval,
    /// `--every-ms`), with daylight-saving and calendar notes. Needs no
    /// server, but for `--exclude-calendars` (the app's calendars).
    Preview(PreviewArgs),
}

/// Runs `xtimer cron ...`; returns the exit code. A preview is worked out
/// here, with no server; one with `--exclude-calendars` asks the server's
/// `previewCron`, which has the app's calendars.
pub async fn cron(remote: &Remote, command: CronCommand) -> u8 {
    let CronCommand::Preview(args) = command;
    let run = async {
        let result = if preview::is_local(&args) {
            let now_ms = chrono::Utc::now().timestamp_millis();
            let preview = preview::compute(&args, now_ms)
                .map_err(|err| Failure { msg: err.to_string(), code: client::exit_code(err.status()) })?;
            serde_json::to_value(preview).expect("a preview serializes")
        } else {
            let query = preview::query(&args);
            let query: Vec<(&str, String)> = query.iter().map(|(name, value)| (name.as_str(), value.clone())).collect();
            remote.client()?.call(Method::GET, "previewCron", &query, None).await.map_err(|f| match f.code {
                client::exit::UNREACHABLE => Failure {
                    msg: format!(
                        "{}; --exclude-calendars reads the app's calendars from a running server (--server), \
                         a preview without it needs none",
                        f.msg
                    ),
                    code: f.code,
                },
                _ => f,
            })?
        };
        let rows: Vec<Vec<String>> = list_of(&result)
            .iter()
            .map(|f| vec![text(&f["runTime"]), text(&f["runTimer"]), text(&f["note"])])
            .collect();
        Ok::<_, Failure>((result, table::render(&["RUN TIME", "UNIX MS", "NOTE"], &rows)))
    };
    finish(remote, run.await)
}

/// Prints the outcome of a command: the table (or the JSON with `--json`)
/// on stdout, a failure on stderr; returns the exit code.
pub fn finish(remote: &Remote, outcome: Result<(Value, String), Failure>) -> u8 {
    match outcome {
        Ok((result, table)) => {
            use std::io::Write;
            let text = if remote.json {
                format!("{}\n", serde_json::to_string_pretty(&result).unwrap_or_default())
            } else {
                table
            };
            // A reader that stops early (`| head`) is not an error of ours.
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            client::exit::OK
        }
        Err(failure) => {
            eprintln!("error: {}", failure.msg);
            failure.code
        }
    }
}

/// The `list` of a list reply.
pub fn list_of(result: &Value) -> Vec<Value> {
    result["list"].as_array().cloned().unwrap_or_default()
}

pub use table::text;

/// `msg` with each `timers[N]` of a server's message rewritten: `item(N)`
/// replaces its `N]` (left as it is where `item` gives `None`).
pub(crate) fn each_item(msg: &str, item: impl Fn(usize) -> Option<String>) -> String {
    const ITEM: &str = "timers[";
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find(ITEM) {
        let (before, after) = rest.split_at(at + ITEM.len());
        out.push_str(before);
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let tail = after[digits..].strip_prefix(']');
        match (after[..digits].parse::<usize>().ok().and_then(&item), tail) {
            (Some(text), Some(tail)) => {
                out.push_str(&text);
                rest = tail;
            }
            _ => {
                out.push_str(&after[..digits]);
                rest = &after[digits..];
            }
        }
    }
    out.push_str(rest);
    out
}
