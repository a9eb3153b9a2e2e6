//! Stopping a node and starting another on the same database.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use xtimer::receiver::Receiver;

use crate::helpers::{every_second, now_ms, Stack, Storage, TestNode, PATIENCE};

pub async fn a_restart_on_the_same_database_neither_loses_nor_repeats_a_fire(stack: Stack) {
    let storage = Storage::new(stack).await;
    let rx = Receiver::start(false).await.unwrap();

    let first = TestNode::spawn_with(storage.config.clone()).await;
    // The default misfire policy: a restart's gap is late, not missed.
    let id = first.create_ok(every_second("steady", &rx, json!({}))).await;
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 3).await);
    first.stop().await;
    let stopped_at = now_ms();
    // Down for a while: the fires of these seconds are due while no node runs.
    tokio::time::sleep(Duration::from_millis(2_500)).await;

    let second = TestNode::spawn_with(storage.config.clone()).await;
    let restarted_at = now_ms();
    assert!(rx.wait_until(PATIENCE, |h| h.iter().any(|h| h.run_ms >= restarted_at + 3_000)).await, "fires resume");
    second.stop().await;

    let mut seen: HashMap<i64, usize> = HashMap::new();
    for hit in rx.hits() {
        *seen.entry(hit.run_ms).or_default() += 1;
    }
    let repeats: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).collect();
    assert!(repeats.is_empty(), "repeated fires: {repeats:?}");
    let first_run = *seen.keys().min().unwrap();
    let last_run = *seen.keys().max().unwrap();
    let missing: Vec<i64> =
        (0..).map(|i| first_run + i * 1_000).take_while(|&t| t <= last_run).filter(|t| !seen.contains_key(t)).collect();
    assert!(missing.is_empty(), "lost fires (stopped at {stopped_at}): {missing:?}");
    assert!(last_run - first_run >= 6_000, "the run spans the downtime");

    // Every fire up to the last one is recorded as succeeded, once.
    let check = TestNode::spawn_with(storage.config.clone()).await;
    check.act("unableTimer", id, "it").await;
    let fires = check.fires(id, "it").await;
    for f in fires.iter().filter(|f| f["runTimer"].as_i64().unwrap() <= last_run) {
        assert_eq!(f["status"], 2, "{f}");
        assert_eq!(f["attempt"], 1, "{f}");
    }
    check.stop().await;
}

crate::on_both_stacks!(a_restart_on_the_same_database_neither_loses_nor_repeats_a_fire);
