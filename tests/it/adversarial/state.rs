//! Seeding the node, the database snapshot taken before and after the
//! run, and the count of panics in product code.

use super::*;

/// Timers, task types and tasks for both apps, made with the generator's
/// own base bodies, which proves those bodies valid.
pub(super) async fn seed_state(node: &TestNode, apps: &mut [App; 2], seed: u64) {
    let mut gen = Gen::new(seed ^ 0xa5a5, apps, usize::MAX);
    let mut bodies = Vec::new();
    for (i, app) in apps.iter().enumerate() {
        let mut timers = vec![gen.valid_timer(app), gen.valid_timer(app), gen.valid_timer(app)];
        // A one-shot far ahead, disabled too: nothing fires during the run.
        timers[1].as_object_mut().unwrap().remove("cron");
        timers[1]["runAt"] = json!("2099-06-01T00:00:00+08:00");
        bodies.push((i, timers, Gen::valid_cfg(app.task_type), gen.valid_task(app)));
    }
    for (i, timers, cfg, task) in bodies {
        let app = &mut apps[i];
        for body in timers {
            let reply = post(node, "/api/xtimer/createTimer", app.token, &body).await;
            assert_eq!(reply["code"], 0, "seeding {}: {reply}", app.name);
            app.timers.push(reply["result"]["id"].as_i64().unwrap());
        }
        app.deleted = app.timers.pop().unwrap();
        let url = format!("{}/api/xtimer/delTimer?id={}&app={}", node.base, app.deleted, app.name);
        let reply: Value = node.http.delete(url).bearer_auth(app.token).send().await.unwrap().json().await.unwrap();
        assert_eq!(reply["code"], 0, "{reply}");

        let reply = post(node, "/v1/register_task", app.token, &json!({ "task_config_data": cfg })).await;
        assert_eq!(reply["code"], 0, "register {}: {reply}", app.task_type);
        for _ in 0..3 {
            let reply = post(node, "/v1/create_task", app.token, &task).await;
            assert_eq!(reply["code"], 0, "create task: {reply}");
            app.tasks.push(reply["task_id"].as_str().unwrap().to_string());
        }
        let set = json!({"task_data": {"task_id": app.tasks[0], "task_stage": "seeded", "status": 1}});
        let reply = post(node, "/v1/set_task", app.token, &set).await;
        assert_eq!(reply["code"], 0, "set task: {reply}");
    }
}

pub(super) async fn post(node: &TestNode, path: &str, token: &str, body: &Value) -> Value {
    let resp = node.http.post(format!("{}{path}", node.base)).bearer_auth(token).json(body).send().await.unwrap();
    resp.json().await.unwrap()
}

/// Every table's rows, as text, sorted; plus the list of tables (and, on
/// SQLite, every schema object). Keys: table names; `"(schema)"` for the list.
pub(super) type Snapshot = BTreeMap<String, Vec<String>>;

/// Columns that change with no request: the heartbeat loop rewrites this
/// node's `t_node` row every 2 s (its time and the shards it holds). The
/// row itself, and every other column, is compared.
pub(super) const LIVE_COLUMNS: [(&str, &str); 2] = [("t_node", "heartbeat_at"), ("t_node", "shards")];

pub(super) fn is_live(table: &str, column: &str) -> bool {
    LIVE_COLUMNS.iter().any(|(t, c)| *t == table && *c == column)
}

pub(super) async fn snapshot(url: &str) -> Snapshot {
    if url.starts_with("postgres") {
        snapshot_postgres(url).await
    } else if url.starts_with("mysql") {
        snapshot_mysql(url).await
    } else {
        snapshot_sqlite(url).await
    }
}

pub(super) async fn snapshot_sqlite(url: &str) -> Snapshot {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).unwrap().read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await.expect("open the SQLite file read-only");
    let mut out = Snapshot::new();
    let schema: Vec<(String, String, Option<String>)> =
        sqlx::query_as("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    out.insert("(schema)".into(), schema.iter().map(|s| format!("{s:?}")).collect());
    for (_, table, _) in schema.iter().filter(|(kind, _, _)| kind == "table") {
        let columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info($1) ORDER BY cid")
            .bind(table)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        let row = columns
            .iter()
            .filter(|c| !is_live(table, c))
            .map(|c| format!("quote(\"{c}\")"))
            .collect::<Vec<_>>()
            .join(" || '|' || ");
        let sql = format!("SELECT {row} AS r FROM \"{table}\" ORDER BY r");
        out.insert(table.clone(), sqlx::query_scalar(&sql).fetch_all(&mut conn).await.unwrap());
    }
    conn.close().await.unwrap();
    out
}

pub(super) async fn snapshot_postgres(url: &str) -> Snapshot {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect to the test database");
    let mut out = Snapshot::new();
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.table_name::text, c.column_name::text, c.data_type::text FROM information_schema.columns c \
         JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
         WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' ORDER BY 1, c.ordinal_position",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    out.insert("(schema)".into(), columns.iter().map(|c| format!("{c:?}")).collect());
    let mut tables: Vec<&String> = columns.iter().map(|(t, _, _)| t).collect();
    tables.dedup();
    for table in tables {
        let live: String = LIVE_COLUMNS.iter().filter(|(t, _)| t == table).map(|(_, c)| format!(" - '{c}'")).collect();
        let sql = format!("SELECT (to_jsonb(t){live})::text AS r FROM \"{table}\" t ORDER BY r");
        out.insert(table.clone(), sqlx::query_scalar(&sql).fetch_all(&mut conn).await.unwrap());
    }
    conn.close().await.unwrap();
    out
}

pub(super) async fn snapshot_mysql(url: &str) -> Snapshot {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::MySqlConnection::connect(url).await.expect("connect to the test database");
    let mut out = Snapshot::new();
    // Unchecked text: MySQL reports byte-compared (`_bin`) text as binary.
    let columns: Vec<(String, String, String)> = sqlx::query(
        "SELECT table_name, column_name, data_type FROM information_schema.columns \
         WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap()
    .iter()
    .map(|r| (r.try_get_unchecked(0).unwrap(), r.try_get_unchecked(1).unwrap(), r.try_get_unchecked(2).unwrap()))
    .collect();
    out.insert("(schema)".into(), columns.iter().map(|c| format!("{c:?}")).collect());
    let mut tables: Vec<&String> = columns.iter().map(|(t, _, _)| t).collect();
    tables.dedup();
    for table in tables {
        let fields: Vec<String> = columns
            .iter()
            .filter(|(t, c, _)| t == table && !is_live(t, c))
            .map(|(_, c, _)| format!("'{c}', `{c}`"))
            .collect();
        let sql = format!("SELECT CAST(JSON_OBJECT({}) AS CHAR) AS r FROM `{table}` ORDER BY r", fields.join(", "));
        let rows = sqlx::query(&sql).fetch_all(&mut conn).await.unwrap();
        out.insert(table.clone(), rows.iter().map(|r| r.try_get_unchecked(0).unwrap()).collect());
    }
    conn.close().await.unwrap();
    out
}

/// The heartbeat inserts this node's row shortly after start; wait for it,
/// so that the insert is not mistaken for a change made by the run.
pub(super) async fn wait_for_heartbeat_row(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while snapshot(url).await.get("t_node").is_none_or(Vec::is_empty) {
        assert!(Instant::now() < deadline, "the node's heartbeat row never appeared");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(super) fn assert_snapshots_equal(before: &Snapshot, after: &Snapshot) {
    if before == after {
        return;
    }
    let tables: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for table in tables {
        let (b, a) = (before.get(table), after.get(table));
        if b != a {
            let show = |rows: Option<&Vec<String>>| match rows {
                None => "(no such table)".to_string(),
                Some(rows) => rows.iter().take(20).map(|r| format!("  {r}")).collect::<Vec<_>>().join("\n"),
            };
            let gone: Vec<&String> = b.into_iter().flatten().filter(|r| !a.is_some_and(|a| a.contains(r))).collect();
            let new: Vec<&String> = a.into_iter().flatten().filter(|r| !b.is_some_and(|b| b.contains(r))).collect();
            panic!(
                "the database changed during the hostile run; first differing table `{table}`:\n\
                 rows gone: {gone:#?}\nrows new: {new:#?}\nbefore:\n{}\nafter:\n{}",
                show(b),
                show(a)
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Panics.

pub(super) static PRODUCT_PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics raised outside the tests' own code (a test failing, or a
/// test's handler panicking on purpose, is not counted).
pub(super) fn count_product_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.location().is_some_and(|l| l.file().starts_with("tests/")) {
                PRODUCT_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}
