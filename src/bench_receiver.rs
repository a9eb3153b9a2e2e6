//! The benchmark's callback receiver in a process of its own, so that the
//! node's figures are the ones a user with a separate receiver sees: the
//! node's process does only the node's work, and its CPU per fire can be
//! read from `/proc`.
//!
//! - [`serve`]: the hidden `xtimer bench-receiver` command. It answers every
//!   request `200` and records when it arrived, with its `Idempotency-Key`
//!   and `X-Xtimer-Run-Time`; the benchmark reads them back over two
//!   control routes ([`COUNT_PATH`], [`ARRIVALS_PATH`]). It prints where it
//!   listens on its first line of stdout and exits when its stdin closes,
//!   so it never outlives the benchmark that started it.
//! - [`ReceiverProcess`]: starts that command as a child, queries it and
//!   stops it.
//! - [`BenchReceiver`]: the benchmark's receiver, that process or (with
//!   `--receiver inproc`) a [`Receiver`] in the benchmark's own process.
//! - [`Arrival`]: one recorded request.
//! - [`process_cpu`]: a process's CPU time so far, from `/proc/PID/stat`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::TcpListener;

use crate::receiver::Receiver;

/// Arrivals whose run time is in `[from, to)`: `GET COUNT_PATH?from=MS&to=MS`, a number.
pub const COUNT_PATH: &str = "/_bench/count";
/// Every arrival so far, one `KEY RUN_MS ARRIVAL_US` line each.
pub const ARRIVALS_PATH: &str = "/_bench/arrivals";

/// Ticks of `utime` and `stime` in `/proc/PID/stat` per second (Linux's
/// `USER_HZ`, 100 on every architecture it runs on).
const CLOCK_TICKS_PER_SEC: u64 = 100;

/// One callback the receiver got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// `Idempotency-Key` header.
    pub key: String,
    /// `X-Xtimer-Run-Time` header, ms.
    pub run_ms: i64,
    /// When it arrived, Unix microseconds.
    pub arrival_us: i64,
}

impl Arrival {
    /// Arrival minus scheduled time, milliseconds.
    pub fn lateness_ms(&self) -> f64 {
        (self.arrival_us - self.run_ms * 1000) as f64 / 1000.0
    }
}

type Arrivals = Arc<Mutex<Vec<Arrival>>>;

/// Answers `200` on `listener`, recording every request, until `stdin`
/// closes (the benchmark ended or died). Plain hyper, one task per
/// connection: it should cost as little of the shared cores as it can.
pub async fn serve(listener: TcpListener) -> std::io::Result<()> {
    let arrivals: Arrivals = Arc::default();
    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    tokio::pin!(stdin_closed);
    loop {
        let (tcp, _) = tokio::select! {
            _ = &mut stdin_closed => return Ok(()),
            accepted = listener.accept() => accepted?,
        };
        let _ = tcp.set_nodelay(true);
        let arrivals = arrivals.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let arrivals = arrivals.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(&arrivals, request)) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), service).await;
        });
    }
}

fn answer(arrivals: &Arrivals, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let arrival_us = chrono::Utc::now().timestamp_micros();
    let text = match request.uri().path() {
        COUNT_PATH => count(arrivals, request.uri().query().unwrap_or_default()),
        ARRIVALS_PATH => list(arrivals),
        _ => {
            let headers = request.headers();
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let key = header("idempotency-key").to_owned();
            let run_ms = header("x-xtimer-run-time").parse().unwrap_or_default();
            arrivals.lock().expect("arrivals").push(Arrival { key, run_ms, arrival_us });
            String::new()
        }
    };
    Response::new(Full::new(Bytes::from(text)))
}

/// `from=MS&to=MS`: the arrivals whose run time is in `[from, to)`.
fn count(arrivals: &Arrivals, query: &str) -> String {
    let bound =
        |name: &str| query.split('&').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse::<i64>().ok());
    let (from, to) = (bound("from").unwrap_or(i64::MIN), bound("to").unwrap_or(i64::MAX));
    let arrivals = arrivals.lock().expect("arrivals");
    arrivals.iter().filter(|a| a.run_ms >= from && a.run_ms < to).count().to_string()
}

fn list(arrivals: &Arrivals) -> String {
    let arrivals = arrivals.lock().expect("arrivals").clone();
    let mut text = String::with_capacity(arrivals.len() * 48);
    for a in arrivals {
        text.push_str(&format!("{} {} {}\n", a.key, a.run_ms, a.arrival_us));
    }
    text
}

/// `xtimer bench-receiver` running as a child of this process; killed when dropped.
pub struct ReceiverProcess {
    /// Where it listens.
    pub addr: SocketAddr,
    child: tokio::process::Child,
    client: reqwest::Client,
}

impl ReceiverProcess {
    /// Starts `exe bench-receiver` (`exe` is this program) on a free
    /// loopback port with `threads` runtime threads, and waits until it
    /// listens.
    pub async fn start(exe: &Path, threads: usize) -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new(exe)
            .args(["bench-receiver", "--listen", "127.0.0.1:0", "--threads", &threads.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} bench-receiver", exe.display()))?;
        let stdout = child.stdout.take().context("the receiver's stdout")?;
        let mut first = String::new();
        tokio::time::timeout(Duration::from_secs(10), BufReader::new(stdout).read_line(&mut first))
            .await
            .context("the receiver did not say where it listens within 10 s")??;
        let addr = first
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .with_context(|| format!("unexpected first line from the receiver: {first:?}"))?;
        Ok(Self { addr, child, client: reqwest::Client::new() })
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Arrivals whose run time is in `[from_ms, to_ms)`.
    pub async fn count(&self, from_ms: i64, to_ms: i64) -> anyhow::Result<u64> {
        let url = format!("{}?from={from_ms}&to={to_ms}", self.url(COUNT_PATH));
        Ok(self.client.get(url).send().await?.error_for_status()?.text().await?.trim().parse()?)
    }

    /// Every arrival so far, in arrival order.
    pub async fn arrivals(&self) -> anyhow::Result<Vec<Arrival>> {
        let text = self.client.get(self.url(ARRIVALS_PATH)).send().await?.error_for_status()?.text().await?;
        text.lines().map(parse_arrival).collect()
    }

    /// The receiver's CPU time so far.
    pub fn cpu(&self) -> Option<Duration> {
        process_cpu(&self.child.id()?.to_string())
    }
}

/// Where the benchmark's callbacks go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReceiverMode {
    /// `xtimer bench-receiver`, a process of its own, as users run receivers.
    Process,
    /// A receiver in the benchmark's process, sharing the node's runtime.
    Inproc,
}

/// The benchmark's receiver.
pub enum BenchReceiver {
    /// In a process of its own.
    Process(ReceiverProcess),
    /// In this process.
    InProcess(Receiver),
}

impl BenchReceiver {
    /// Starts a receiver as `mode` says (`threads`: the process's runtime threads).
    pub async fn start(mode: ReceiverMode, threads: usize) -> anyhow::Result<Self> {
        Ok(match mode {
            ReceiverMode::Process => {
                let exe = std::env::current_exe().context("finding this program to start the receiver")?;
                Self::Process(ReceiverProcess::start(&exe, threads).await?)
            }
            ReceiverMode::Inproc => Self::InProcess(Receiver::start(false).await?),
        })
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        match self {
            Self::Process(p) => p.url(path),
            Self::InProcess(r) => r.url(path),
        }
    }

    /// Arrivals whose run time is in `[from_ms, to_ms)`.
    pub async fn count(&self, from_ms: i64, to_ms: i64) -> anyhow::Result<u64> {
        match self {
            Self::Process(p) => p.count(from_ms, to_ms).await,
            Self::InProcess(r) => {
                Ok(r.hits().iter().filter(|h| h.run_ms >= from_ms && h.run_ms < to_ms).count() as u64)
            }
        }
    }

    /// Waits until `total` arrivals have a run time in `[from_ms, to_ms)`,
    /// or `timeout` passes, telling `progress` the count as it grows.
    pub async fn wait_for(
        &self,
        from_ms: i64,
        to_ms: i64,
        total: u64,
        timeout: Duration,
        progress: impl Fn(u64),
    ) -> anyhow::Result<()> {
        let in_window = |run_ms: i64| run_ms >= from_ms && run_ms < to_ms;
        match self {
            Self::InProcess(r) => {
                r.wait_until(timeout, |hits| {
                    let got = hits.iter().filter(|h| in_window(h.run_ms)).count() as u64;
                    progress(got);
                    got >= total
                })
                .await;
            }
            Self::Process(p) => {
                let deadline = tokio::time::Instant::now() + timeout;
                while tokio::time::Instant::now() < deadline {
                    let got = p.count(from_ms, to_ms).await?;
                    progress(got);
                    if got >= total {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        Ok(())
    }

    /// Every arrival so far, in arrival order.
    pub async fn arrivals(&self) -> anyhow::Result<Vec<Arrival>> {
        match self {
            Self::Process(p) => p.arrivals().await,
            Self::InProcess(r) => Ok(r
                .hits()
                .into_iter()
                .map(|h| Arrival { key: h.key, run_ms: h.run_ms, arrival_us: h.arrival_us })
                .collect()),
        }
    }

    /// The receiver's own CPU time so far; none when it shares this process.
    pub fn cpu(&self) -> Option<Duration> {
        match self {
            Self::Process(p) => p.cpu(),
            Self::InProcess(_) => None,
        }
    }
}

fn parse_arrival(line: &str) -> anyhow::Result<Arrival> {
    let mut parts = line.split(' ');
    let mut next = || parts.next().with_context(|| format!("a short arrival line: {line:?}"));
    let key = next()?.to_owned();
    let run_ms = next()?.parse()?;
    let arrival_us = next()?.parse()?;
    Ok(Arrival { key, run_ms, arrival_us })
}

/// CPU time (user + system, every thread) process `pid` (or `self`) has
/// used so far, at `/proc`'s resolution of 10 ms.
pub fn process_cpu(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it do not.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    // After the name: state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / CLOCK_TICKS_PER_SEC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrival_line_reads_back_and_a_short_one_is_an_error() {
        let a = parse_arrival("7_1000 1000 1000250").unwrap();
        assert_eq!(a, Arrival { key: "7_1000".into(), run_ms: 1000, arrival_us: 1_000_250 });
        assert_eq!(a.lateness_ms(), 0.25);
        assert!(parse_arrival("7_1000 1000").is_err());
    }

    #[test]
    fn this_process_has_used_some_cpu_and_it_only_grows() {
        let before = process_cpu("self").expect("/proc/self/stat reads");
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let after = process_cpu("self").unwrap();
        assert!(after >= before, "{before:?} then {after:?}");
        assert!(process_cpu("0").is_none(), "no process 0 in /proc");
    }
}
