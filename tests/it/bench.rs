//! `xtimer bench` as users run it: small loads, so they check what the
//! benchmark counts and reports, not how fast this machine is.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use xtimer::bench_receiver::ReceiverProcess;
use xtimer_core::fire::FireKey;
use xtimer_core::timer::HttpNotify;

/// Runs `xtimer bench ARGS` to its end; returns the figures of its one run
/// by column name.
async fn bench(args: &[&str]) -> BTreeMap<String, String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_xtimer"))
            .arg("bench")
            .args(&args)
            .env("XTIMER_LOG", "warn")
            .output()
            .expect("xtimer runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines.iter().position(|l| l.trim_start().starts_with("run ")).expect("a header line");
    let names = lines[header].split_whitespace().collect::<Vec<_>>();
    let row = lines[header + 1].split_whitespace().collect::<Vec<_>>();
    // Column names are one or two words ("p50 ms", "sent p99"); values are one each.
    let names: Vec<String> = names.iter().fold(Vec::new(), |mut acc: Vec<String>, w| {
        match (*w, acc.last_mut()) {
            ("ms" | "us" | "MB", Some(last)) => *last = format!("{last} {w}"),
            ("p99", Some(last)) if last == "sent" => *last = format!("{last} {w}"),
            _ => acc.push(w.to_string()),
        }
        acc
    });
    assert_eq!(names.len(), row.len(), "{stdout}");
    names.into_iter().zip(row.into_iter().map(str::to_owned)).collect()
}

fn num(figures: &BTreeMap<String, String>, name: &str) -> f64 {
    figures.get(name).unwrap_or_else(|| panic!("no column {name}: {figures:?}")).parse().expect("a number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_with_its_receiver_in_a_process_of_its_own_counts_every_fire_and_the_node_cpu() {
    let f = bench(&["--scenario", "steady", "--rate", "500", "--seconds", "2", "--lead", "2"]).await;
    assert_eq!(num(&f, "expected"), 1000.0, "{f:?}");
    assert_eq!(num(&f, "received"), 1000.0, "{f:?}");
    assert_eq!((num(&f, "dups"), num(&f, "misses")), (0.0, 0.0), "{f:?}");
    assert!(num(&f, "cpu us") > 0.0, "the node's CPU per fire is measured: {f:?}");
    assert!(num(&f, "rx us") > 0.0, "and the receiver's, apart: {f:?}");
    assert!(num(&f, "sent p99") <= num(&f, "max ms"), "callbacks leave before they arrive: {f:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_with_the_receiver_in_process_still_counts_every_fire() {
    let f =
        bench(&["--scenario", "cron", "--timers", "20", "--seconds", "2", "--lead", "2", "--receiver", "inproc"]).await;
    assert_eq!(num(&f, "expected"), 40.0, "{f:?}");
    assert_eq!(num(&f, "received"), 40.0, "{f:?}");
    assert_eq!((num(&f, "dups"), num(&f, "misses")), (0.0, 0.0), "{f:?}");
    assert_eq!(num(&f, "rx us"), 0.0, "no receiver process to measure: {f:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_alone_at_a_rate_each_leave_on_their_millisecond_and_are_counted_with_their_cpu() {
    let f = bench(&["--scenario", "http-steady", "--rate", "500", "--seconds", "1"]).await;
    assert_eq!((num(&f, "expected"), num(&f, "received"), num(&f, "misses")), (500.0, 500.0, 0.0), "{f:?}");
    // Each is sent no earlier than its millisecond (its key's run time).
    assert!(num(&f, "p50 ms") >= 0.0, "{f:?}");
    assert!(num(&f, "cpu us") > 0.0 && num(&f, "rx us") > 0.0, "both processes' CPU per callback: {f:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_herd_of_aligned_crons_spreads_its_fires_each_once_inside_its_window() {
    // Up to a minute: the fires are those of the next whole minute.
    let f = bench(&["--scenario", "herd", "--timers", "100", "--spread-ms", "5000", "--lead", "2"]).await;
    assert_eq!((num(&f, "expected"), num(&f, "received")), (100.0, 100.0), "{f:?}");
    assert_eq!((num(&f, "lost"), num(&f, "dups"), num(&f, "outside")), (0.0, 0.0, 0.0), "{f:?}");
    // Five seconds of 20 each; an arrival late into the next second at most doubles one.
    assert!(num(&f, "peak/s") <= 40.0, "spread over the window: {f:?}");
    assert!(num(&f, "plan us") > 0.0 && num(&f, "expand ms") > 0.0, "planning is timed: {f:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receiver_process_counts_callbacks_by_run_time_and_ends_with_its_owner() {
    let rx = ReceiverProcess::start(Path::new(env!("CARGO_BIN_EXE_xtimer")), 1).await.unwrap();
    let client = xtimer_executor::callback::client(5_000, 4).unwrap();
    let notify = HttpNotify::post(rx.url("/hook"));
    for (timer_id, run_ms) in [(1, 1_000), (2, 1_000), (1, 2_000)] {
        let answer = xtimer_executor::callback::call(&client, &notify, FireKey { timer_id, run_ms }, 64).await;
        assert!(answer.delivery.delivered(), "{answer:?}");
    }
    assert_eq!(rx.count(i64::MIN, i64::MAX).await.unwrap(), 3);
    assert_eq!(rx.count(1_000, 2_000).await.unwrap(), 2, "by run time, [from, to)");
    let keys: Vec<String> = rx.arrivals().await.unwrap().into_iter().map(|a| a.key).collect();
    assert_eq!(keys, ["1_1000", "2_1000", "1_2000"]);
    assert!(rx.cpu().is_some(), "its CPU reads from /proc");

    let addr = rx.addr;
    drop(rx);
    let mut gone = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the receiver stops with the handle that started it");
}
