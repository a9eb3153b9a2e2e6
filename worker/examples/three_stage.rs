//! A worker that runs a three-stage task to completion against a running
//! xtimer (or any asyncflow flowSvr):
//!
//! ```text
//! cargo run --release -p xtimer-worker --example three_stage -- [ADDR] [--fail N]
//! ```
//!
//! ADDR defaults to `$XTIMER_ADDR`, then `http://127.0.0.1:8080`. `--fail N`
//! makes the transform stage fail N times with a retryable error first, to
//! show the back-off (N above 3 ends the task failed).
//!
//! It registers the `three_stage_demo` type if the server lacks it, creates
//! one task, runs a worker whose handler goes fetch -> transform -> store ->
//! done ([`xtimer_worker::demo::ThreeStage`]), prints each reported stage,
//! and exits when the task is final.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_worker::demo::{self, DemoContext, ThreeStage};
use xtimer_worker::report::ScheduleLog;
use xtimer_worker::{Client, Event, Outcome, TaskStatus, Worker, WorkerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Only warnings by default, so the stage lines below stand alone;
    // `RUST_LOG=xtimer_worker=info` shows the worker's own log too.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let (addr, fail) = args()?;

    let client = Client::new(&addr)?;
    client
        .ping()
        .await
        .map_err(|e| format!("no server at {addr} ({e}); start one with `cargo run --release -- serve`"))?;
    if client.register_task_if_missing(&demo::cfg()).await? {
        println!("registered task type {}", demo::TASK_TYPE);
    }
    let task_id = client.create_task(&demo::new_task("https://example.com/report.txt", fail)).await?;
    println!("created task {task_id} at stage {:?}", demo::FIRST_STAGE);

    let worker = Worker::new(client.clone(), WorkerConfig::default())
        .with_handler(demo::TASK_TYPE, ThreeStage { work: Duration::from_millis(200) });
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));

    // Print this task's reports until it is final (or Ctrl-C).
    loop {
        let event = tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            event = events.recv() => event?,
        };
        let Event::Reported { task, outcome } = event else { continue };
        if task.task_id != task_id {
            continue; // an older demo task left on the server
        }
        let ran = ScheduleLog::parse(&task.schedule_log).last_data;
        match &outcome {
            Outcome::Next { stage, .. } => {
                println!("  {:<10} ok in {:>6} -> next stage {stage:?}", ran.stage, ran.cost)
            }
            Outcome::Done { .. } => println!("  {:<10} ok in {:>6} -> done", ran.stage, ran.cost),
            Outcome::Retry(err) if task.status == TaskStatus::Failed.code() => {
                println!("  {:<10} failed: {err}; retries spent -> failed", ran.stage)
            }
            Outcome::Retry(err) => println!(
                "  {:<10} failed: {err}; retry {} of {} in {} s",
                ran.stage,
                task.crt_retry_num,
                task.max_retry_num,
                task.max_retry_interval.abs()
            ),
            Outcome::Fatal(err) => println!("  {:<10} fatal: {err} -> failed", ran.stage),
        }
        if TaskStatus::from_code(task.status).is_some_and(TaskStatus::is_final) {
            break;
        }
    }
    shutdown.cancel();
    running.await??;

    let task = client.get_task(&task_id).await?;
    let context: DemoContext = serde_json::from_str(&task.context).unwrap_or_default();
    // In words (`succeeded`), with the wire code `get_task` shows.
    let status = TaskStatus::from_code(task.status).map_or("unknown status", TaskStatus::as_str);
    println!("task {task_id}: {status} (status {}) after {} retries", task.status, task.crt_retry_num);
    println!("final context: {}", serde_json::to_string_pretty(&context)?);
    Ok(())
}

/// `[ADDR] [--fail N]`.
fn args() -> Result<(String, i64), String> {
    let mut addr = std::env::var("XTIMER_ADDR").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let mut fail = 0;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--fail" => fail = it.next().and_then(|n| n.parse().ok()).ok_or("--fail takes a number")?,
            "-h" | "--help" => {
                println!(
                    "usage: three_stage [ADDR] [--fail N]   (ADDR defaults to $XTIMER_ADDR or http://127.0.0.1:8080)"
                );
                std::process::exit(0);
            }
            _ => addr = arg,
        }
    }
    Ok((addr, fail))
}
