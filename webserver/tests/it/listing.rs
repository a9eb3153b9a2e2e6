//! getAppTimers and getTimerTasks: pages and totals.

use serde_json::Value;
use xtimer_core::fire::FireKey;
use xtimer_store::{FireRepo, NewFire};

use crate::helpers::{cron_timer, spawn_app, NOW_MS};

fn ids(page: &Value) -> Vec<i64> {
    page["list"].as_array().unwrap().iter().map(|t| t["id"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn app_timers_are_paged_by_id_without_deleted_or_other_apps() {
    let app = spawn_app().await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(app.create_ok(&cron_timer("paging", &format!("t{i}"))).await);
    }
    app.create_ok(&cron_timer("other", "t0")).await;
    let deleted = app.create_ok(&cron_timer("paging", "gone")).await;
    app.delete(deleted, "paging").await.ok();

    let mut seen = Vec::new();
    for (index, len) in [(1, 2), (2, 2), (3, 1), (4, 0)] {
        let page = app.get(&format!("/api/xtimer/getAppTimers?app=paging&pageIndex={index}&pageSize=2")).await;
        let page = page.ok();
        assert_eq!(page["total"], 5, "page {index}: {page}");
        assert_eq!(ids(page).len(), len, "page {index}: {page}");
        seen.extend(ids(page));
    }
    assert_eq!(seen, created);

    // Defaults: first page of 20.
    let page = app.get("/api/xtimer/getAppTimers?app=paging").await;
    assert_eq!(ids(page.ok()), created);
    assert_eq!(page.ok()["list"][0]["name"], "t0");
    assert_eq!(page.ok()["list"][0]["app"], "paging");

    let empty = app.get("/api/xtimer/getAppTimers?app=nobody").await;
    assert_eq!(empty.ok(), &serde_json::json!({"list": [], "total": 0}));
}

#[tokio::test]
async fn timer_tasks_are_paged_newest_first_and_filtered_by_status() {
    let app = spawn_app().await;
    let id = app.create_ok(&cron_timer("a", "t")).await;
    let other = app.create_ok(&cron_timer("a", "u")).await;
    let fires: Vec<NewFire> = (0..25)
        .map(|i| NewFire { key: FireKey { timer_id: id, run_ms: NOW_MS + i * 1_000 }, app: "a".into() })
        .chain([NewFire { key: FireKey { timer_id: other, run_ms: NOW_MS }, app: "a".into() }])
        .collect();
    app.repo.insert_fires(&fires, NOW_MS).await.unwrap();

    // By default the fires already due, newest first; `upcoming=true`: the
    // planned ones, soonest first.
    let due = app.tasks(id, "a", "").await;
    assert_eq!((due["total"].as_i64(), due["list"][0]["runTimer"].as_i64()), (Some(1), Some(NOW_MS)), "{due}");
    let upcoming = app.tasks(id, "a", "&upcoming=true&pageSize=3").await;
    let soonest: Vec<i64> =
        upcoming["list"].as_array().unwrap().iter().map(|f| f["runTimer"].as_i64().unwrap()).collect();
    assert_eq!((upcoming["total"].as_i64(), soonest), (Some(24), vec![NOW_MS + 1_000, NOW_MS + 2_000, NOW_MS + 3_000]));

    // Once every fire is due, paging walks them newest first.
    app.clock.advance(30_000);
    let mut runs = Vec::new();
    for (index, len) in [(1, 10), (2, 10), (3, 5), (4, 0)] {
        let page = app.tasks(id, "a", &format!("&pageIndex={index}&pageSize=10")).await;
        assert_eq!(page["total"], 25, "{page}");
        let list = page["list"].as_array().unwrap();
        assert_eq!(list.len(), len, "page {index}");
        assert!(list.iter().all(|f| f["timerId"] == id));
        runs.extend(list.iter().map(|f| f["runTimer"].as_i64().unwrap()));
    }
    let expected: Vec<i64> = (0..25).rev().map(|i| NOW_MS + i * 1_000).collect();
    assert_eq!(runs, expected);
    // Default page size is 20.
    assert_eq!(app.tasks(id, "a", "").await["list"].as_array().unwrap().len(), 20);

    // Mark the five earliest missed; filter on each status.
    let earliest = app.tasks(id, "a", "&pageIndex=5&pageSize=5").await;
    let task_ids: Vec<i64> =
        earliest["list"].as_array().unwrap().iter().map(|f| f["taskId"].as_i64().unwrap()).collect();
    assert_eq!(task_ids.len(), 5, "{earliest}");
    assert_eq!(app.repo.mark_missed(&task_ids, "missed: test", NOW_MS).await.unwrap(), 5);
    let missed = app.tasks(id, "a", "&status=5").await;
    assert_eq!(missed["total"], 5, "{missed}");
    assert!(missed["list"].as_array().unwrap().iter().all(|f| f["status"] == 5
        && f["output"] == "missed: test"
        && f["runTimer"].as_i64().unwrap() < NOW_MS + 5_000));
    assert_eq!(app.tasks(id, "a", "&status=0").await["total"], 20);
    assert_eq!(app.tasks(id, "a", "&status=2").await["total"], 0);
}
