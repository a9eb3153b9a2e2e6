//! What reading a due page costs once SQLite has made it (BENCHMARKS.md):
//! `cargo test --release -p xtimer-store --lib due_page_parse -- --ignored --nocapture`.

use super::*;
use crate::sql::timers::DUE;
use crate::sqlite::timers::{timers_as_json, timers_from_json};
use xtimer_core::config::DatabaseConfig;
use xtimer_core::timer::*;

/// Parses a page of 500 one-shot timers (as `xtimer bench --scenario
/// burst` makes them) 100 times, 9 rounds; prints ns per timer.
#[tokio::test]
#[ignore = "a benchmark: prints a figure, asserts only that the page parses"]
async fn due_page_parse() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("x.db").display());
    let db = Database::connect(&DatabaseConfig { url, max_connections: 1 }).await.unwrap();
    let timers: Vec<NewTimer> = (0..500)
        .map(|i| {
            let schedule = Schedule::Once { run_at_ms: 1_000_000 + i };
            let notify = Notify::Http(HttpNotify::post("http://127.0.0.1:40000/bench"));
            NewTimer::enabled("bench", format!("burst-{i}"), schedule, notify)
        })
        .collect();
    db.create_timers(&timers, 0).await.unwrap();
    let Database::Sqlite { read, .. } = &db else { unreachable!() };
    let page: String = sqlx::query_scalar(&timers_as_json(DUE))
        .bind(10_i64)
        .bind(10_000_000_i64)
        .bind(1000_i64)
        .fetch_one(read)
        .await
        .unwrap();
    assert_eq!(timers_from_json(&page).unwrap().len(), 500);
    let mut runs = Vec::new();
    for _ in 0..9 {
        let t = std::time::Instant::now();
        for _ in 0..100 {
            std::hint::black_box(timers_from_json(&page).unwrap());
        }
        runs.push(t.elapsed().as_secs_f64() / 50_000.0 * 1e9);
    }
    runs.sort_by(f64::total_cmp);
    println!("due page parse: {:.0} ns per timer (median of 9 rounds; fastest {:.0})", runs[4], runs[0]);
}
