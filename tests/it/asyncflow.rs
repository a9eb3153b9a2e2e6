//! The asyncflow `/v1` API end to end: the exact bytes Go workers send,
//! replies decoded the way Go decodes them, atomic holds, fairness,
//! timeouts and table rolling.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Mutex;
use xtimer_asyncflow::retry::apply_failure;
use xtimer_asyncflow::wire::{TaskData, TaskScheduleCfg};

use xtimer::timer_tasks::{fire_uuid, TimerTasks};
use xtimer_core::config::{AppCredentials, Secret};
use xtimer_core::fire::FireKey;
use xtimer_core::timer::{AsyncflowNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};
use xtimer_executor::TaskCreator;

use crate::helpers::{now_ms, wait_for, Stack, Storage, TestNode, PATIENCE};
use crate::on_both_stacks;

/// A Go worker's view of the server: raw requests, JSON replies.
struct GoWorker {
    base: String,
    http: reqwest::Client,
}

impl GoWorker {
    fn new(node: &TestNode) -> Self {
        Self { base: node.base.clone(), http: node.http.clone() }
    }

    /// POST raw bytes with a JSON Content-Type, as Go's `http.NewRequest` + header does.
    async fn post_json(&self, path: &str, body: &str) -> Value {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        resp.json().await.unwrap()
    }

    async fn get(&self, path_and_query: &str) -> Value {
        let resp = self.http.get(format!("{}{path_and_query}", self.base)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path_and_query}");
        resp.json().await.unwrap()
    }

    /// hold_tasks exactly as Go workers send it: POST, query string, no body, no Content-Type.
    async fn hold(&self, task_type: &str, limit: u32) -> Vec<TaskData> {
        let resp = self
            .http
            .post(format!("{}/v1/hold_tasks?task_type={task_type}&limit={limit}", self.base))
            .send()
            .await
            .unwrap();
        let reply: Value = resp.json().await.unwrap();
        assert_eq!(reply["code"], 0, "{reply}");
        match &reply["task_list"] {
            Value::Null => Vec::new(),
            list => serde_json::from_value(list.clone()).unwrap(),
        }
    }

    async fn register(&self, cfg: Value) {
        let reply = self.post_json("/v1/register_task", &json!({ "task_config_data": cfg }).to_string()).await;
        assert_eq!(reply["code"], 0, "{reply}");
    }

    /// The type's entry in get_task_schedule_cfg_list.
    async fn cfg(&self, task_type: &str) -> Value {
        let list = self.get("/v1/get_task_schedule_cfg_list").await;
        let list = list["task_schedule_cfg_list"].as_array().cloned().unwrap_or_default();
        list.into_iter().find(|c| c["task_type"] == task_type).unwrap_or_else(|| panic!("{task_type} not listed"))
    }

    async fn create(&self, task_type: &str, context: &str) -> String {
        let body = json!({"task_data": {"task_type": task_type, "context": context, "user_id": "u1"}});
        let reply = self.post_json("/v1/create_task", &body.to_string()).await;
        assert_eq!(reply["code"], 0, "{reply}");
        reply["task_id"].as_str().unwrap().to_string()
    }

    async fn set(&self, task: &TaskData) {
        let reply = self.post_json("/v1/set_task", &json!({ "task_data": task }).to_string()).await;
        assert_eq!(reply["code"], 0, "{reply}");
    }

    async fn get_task(&self, task_id: &str) -> TaskData {
        let reply = self.get(&format!("/v1/get_task?task_id={task_id}")).await;
        assert_eq!(reply["code"], 0, "{reply}");
        serde_json::from_value(reply["task_data"].clone()).unwrap()
    }

    async fn counts(&self, task_type: &str) -> i64 {
        let reply = self.get(&format!("/v1/get_task_counts_by_type?task_type={task_type}")).await;
        assert_eq!(reply["code"], 0, "{reply}");
        reply["counts"].as_i64().unwrap()
    }
}

const TASK_KEYS: [&str; 14] = [
    "user_id",
    "task_id",
    "task_type",
    "task_stage",
    "status",
    "priority",
    "crt_retry_num",
    "max_retry_num",
    "max_retry_interval",
    "schedule_log",
    "context",
    "order_time",
    "create_time",
    "modify_time",
];

fn assert_go_decodable(task: &Value) {
    for key in TASK_KEYS {
        assert!(task.get(key).is_some(), "key {key} missing in {task}");
    }
    for key in ["create_time", "modify_time"] {
        let text = task[key].as_str().unwrap_or_else(|| panic!("{key} is not a string: {task}"));
        chrono::DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("{key} {text:?}: {e}"));
    }
}

async fn go_worker_wire(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let go = GoWorker::new(&node);

    assert_eq!(go.get("/v1/ping").await, json!({"message": "pong"}));
    // An empty cfg list is `null`, as Go encodes a nil slice.
    let cfgs = go.get("/v1/get_task_schedule_cfg_list").await;
    assert_eq!(cfgs, json!({"code": 0, "msg": "ok", "task_schedule_cfg_list": null}));

    // register_task: nested, then flat.
    go.register(json!({"task_type": "lark", "schedule_limit": 50, "max_retry_num": 2, "retry_interval": 5})).await;
    let flat = go.post_json("/v1/register_task", r#"{"task_type":"video_clip"}"#).await;
    assert_eq!(flat, json!({"code": 0, "msg": "ok"}));
    let cfgs = go.get("/v1/get_task_schedule_cfg_list").await;
    let list = cfgs["task_schedule_cfg_list"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["task_type"], "lark");
    assert_eq!(list[0]["schedule_limit"], 50);
    for key in ["schedule_interval", "max_processing_time", "retry_interval", "max_retry_interval"] {
        assert!(list[1][key].as_i64().unwrap() > 0, "{key} default in {}", list[1]);
    }

    // create_task exactly as a Go worker marshals model.TaskData: zero times, null priority.
    let go_body = r#"{"task_data":{"user_id":"niuniu","task_id":"","task_type":"lark","task_stage":"","status":0,"priority":null,"crt_retry_num":0,"max_retry_num":0,"max_retry_interval":0,"schedule_log":"","context":"{\"ReqBody\":{\"Msg\":\"hi\"},\"UserId\":\"niuniu\"}","order_time":0,"create_time":"0001-01-01T00:00:00Z","modify_time":"0001-01-01T00:00:00Z"}}"#;
    let created = go.post_json("/v1/create_task", go_body).await;
    assert_eq!(created["code"], 0, "{created}");
    assert_eq!(created["msg"], "ok");
    let task_id = created["task_id"].as_str().unwrap().to_string();
    assert!(task_id.ends_with("_lark_1"), "{task_id}");

    // get_task, both spellings of the id.
    for name in ["task_id", "taskId"] {
        let reply = go.get(&format!("/v1/get_task?{name}={task_id}")).await;
        assert_eq!(reply["code"], 0, "{reply}");
        let task = &reply["task_data"];
        assert_go_decodable(task);
        assert_eq!(task["status"], 1);
        assert_eq!(task["max_retry_num"], 2, "from the cfg");
        assert_eq!(task["max_retry_interval"], 5, "the cfg's retry_interval");
        assert_eq!(task["user_id"], "niuniu");
        assert_eq!(task["context"], "{\"ReqBody\":{\"Msg\":\"hi\"},\"UserId\":\"niuniu\"}");
    }

    // hold_tasks: query string, no Content-Type, no body.
    let resp = node.http.post(format!("{}/v1/hold_tasks?task_type=lark&limit=10", node.base)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let held: Value = resp.json().await.unwrap();
    assert_eq!(held["code"], 0, "{held}");
    let list = held["task_list"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_go_decodable(&list[0]);
    assert_eq!(list[0]["status"], 2, "returned as claimed");
    // Nothing left: `task_list` is null, and the key is there.
    let empty = go.post_json("/v1/hold_tasks?task_type=lark&limit=10", "").await;
    assert_eq!(empty, json!({"code": 0, "msg": "ok", "task_list": null}));
    // The JSON-body form of hold is accepted too.
    let by_body = go.post_json("/v1/hold_tasks", r#"{"task_type":"lark","limit":5}"#).await;
    assert_eq!(by_body["code"], 0, "{by_body}");

    // set_task as a Go worker's SetTask marshals it: next stage, priority null.
    let set = format!(
        r#"{{"task_data":{{"user_id":"niuniu","task_id":"{task_id}","task_type":"lark","task_stage":"stage2","status":1,"priority":null,"crt_retry_num":0,"max_retry_num":2,"max_retry_interval":5,"schedule_log":"{{\"last_data\":{{}}}}","context":"{{\"step\":2}}","order_time":1700000000,"create_time":"0001-01-01T00:00:00Z","modify_time":"0001-01-01T00:00:00Z"}}}}"#
    );
    let reply = go.post_json("/v1/set_task", &set).await;
    assert_eq!(reply, json!({"code": 0, "msg": "ok"}));
    let task = go.get_task(&task_id).await;
    assert_eq!((task.status, task.task_stage.as_str(), task.order_time), (1, "stage2", 1_700_000_000));
    assert_eq!(task.context, "{\"step\":2}");
    assert_eq!(task.priority, Some(0), "null priority leaves it unchanged");
    // Finish it; a later set on a final task is ignored with code 0.
    go.set(&TaskData { task_id: task_id.clone(), status: 3, ..Default::default() }).await;
    go.set(&TaskData { task_id: task_id.clone(), status: 1, task_stage: "again".into(), ..Default::default() }).await;
    let task = go.get_task(&task_id).await;
    assert_eq!((task.status, task.task_stage.as_str()), (3, "stage2"));

    // get_task_list and counts.
    let list = go.get("/v1/get_task_list?task_type=lark&status=3&limit=10").await;
    assert_eq!(list["task_list"].as_array().unwrap().len(), 1, "{list}");
    let none = go.get("/v1/get_task_list?taskType=lark&status=1&limit=10").await;
    assert_eq!(none, json!({"code": 0, "msg": "ok", "task_list": null}));
    assert_eq!(go.counts("lark").await, 1);
    assert_eq!(go.counts("video_clip").await, 0);

    // Error codes, all with HTTP 200.
    let cases: Vec<(&str, Value)> = vec![
        ("8039 unknown type", go.post_json("/v1/create_task", r#"{"task_data":{"task_type":"nope"}}"#).await),
        ("8020 no type", go.post_json("/v1/create_task", r#"{"task_data":{}}"#).await),
        ("8021 bad json", go.post_json("/v1/create_task", r#"{"task_data":"#).await),
        ("8021 wrong type", go.post_json("/v1/create_task", r#"{"task_data":{"task_type":7}}"#).await),
        ("8020 bad id", go.get("/v1/get_task?task_id=not-an-id").await),
        ("8035 no such table", go.get("/v1/get_task?task_id=0a1b_lark_99").await),
        ("8035 no such task", go.get("/v1/get_task?task_id=0a1b_lark_1").await),
        (
            "8041 set missing",
            go.post_json("/v1/set_task", r#"{"task_data":{"task_id":"0a1b_lark_1","status":3}}"#).await,
        ),
        (
            "8020 set bad status",
            go.post_json("/v1/set_task", &format!(r#"{{"task_data":{{"task_id":"{task_id}","status":9}}}}"#)).await,
        ),
        ("8039 hold unknown", go.post_json("/v1/hold_tasks?task_type=nope", "").await),
        ("8020 hold no type", go.post_json("/v1/hold_tasks", "").await),
        ("8021 hold bad limit", go.post_json("/v1/hold_tasks?task_type=lark&limit=x", "").await),
        ("8039 counts unknown", go.get("/v1/get_task_counts_by_type?task_type=nope").await),
        ("8020 register bad type", go.post_json("/v1/register_task", r#"{"task_type":"a;drop"}"#).await),
    ];
    for (what, reply) in cases {
        let want: i64 = what[..4].parse().unwrap();
        assert_eq!(reply["code"], want, "{what}: {reply}");
        assert!(!reply["msg"].as_str().unwrap().is_empty(), "{what}: {reply}");
    }
    node.stop().await;
}

/// Four workers hold from one type of 5,000 tasks at once: no task twice, all finish.
async fn concurrent_holds_never_share_a_task(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let go = Arc::new(GoWorker::new(&node));
    go.register(json!({"task_type": "bulk", "schedule_limit": 100})).await;
    let mut creates = tokio::task::JoinSet::new();
    for w in 0..8 {
        let go = go.clone();
        creates.spawn(async move {
            for i in 0..625 {
                go.create("bulk", &format!("{w}-{i}")).await;
            }
        });
    }
    while let Some(r) = creates.join_next().await {
        r.unwrap();
    }
    assert_eq!(go.counts("bulk").await, 5_000);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (go, seen) = (go.clone(), seen.clone());
        workers.spawn(async move {
            let mut idle = 0;
            while idle < 3 {
                let held = go.hold("bulk", 100).await;
                if held.is_empty() {
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                idle = 0;
                for mut t in held {
                    seen.lock().await.push(t.task_id.clone());
                    t.status = 3;
                    go.set(&t).await;
                }
            }
        });
    }
    while let Some(r) = workers.join_next().await {
        r.unwrap();
    }
    let seen = seen.lock().await;
    let unique: HashSet<_> = seen.iter().collect();
    assert_eq!(seen.len(), 5_000, "every task held once");
    assert_eq!(unique.len(), 5_000, "no task held twice");
    let pending = go.get("/v1/get_task_list?task_type=bulk&status=1&limit=10").await;
    assert_eq!(pending["task_list"], Value::Null, "nothing left pending");
    node.stop().await;
}

/// One task that always fails among 1,000 delays none of the others; it is
/// retried with growing delay and ends failed after max_retry_num.
async fn a_failing_task_delays_no_other(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let go = GoWorker::new(&node);
    go.register(json!({"task_type": "fair", "schedule_limit": 200, "max_retry_num": 3, "retry_interval": 1, "max_retry_interval": 2})).await;
    let bad = go.create("fair", "fail").await;
    for i in 0..999 {
        go.create("fair", &format!("ok-{i}")).await;
    }
    let started = std::time::Instant::now();
    let mut done = 0;
    let mut failures = Vec::new();
    let mut failures_when_others_done = None;
    while started.elapsed() < PATIENCE {
        let held = go.hold("fair", 200).await;
        if held.is_empty() {
            if done == 999 && !failures.is_empty() && go.get_task(&bad).await.status == 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        for mut t in held {
            if t.context == "fail" {
                failures.push((started.elapsed(), t.order_time));
                apply_failure(&mut t, 2, chrono::Utc::now().timestamp());
                go.set(&t).await;
            } else {
                t.status = 3;
                go.set(&t).await;
                done += 1;
            }
        }
        if done == 999 && failures_when_others_done.is_none() {
            failures_when_others_done = Some(failures.len());
        }
    }
    assert_eq!(done, 999);
    let last = go.get_task(&bad).await;
    assert_eq!((last.status, last.crt_retry_num), (4, 3), "{last:?}");
    assert_eq!(failures.len(), 4, "first try and three retries: {failures:?}");
    // The 999 others finished long before the failing task ran out of retries.
    assert!(failures_when_others_done.is_some_and(|n| n < 4), "{failures_when_others_done:?}");
    // Each retry waited its back-off: the gaps grow (2 s, 2 s capped) and are never under a second.
    let gaps: Vec<Duration> = failures.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(gaps.iter().all(|g| *g >= Duration::from_millis(900)), "{gaps:?}");
    node.stop().await;
}

/// A task held by a worker that crashed comes back after max_processing_time.
async fn a_crashed_workers_task_comes_back(stack: Stack) {
    let mut storage = Storage::new(stack).await;
    storage.config.asyncflow.governor_period_ms = 200;
    let node = TestNode::spawn_with(storage.config.clone()).await;
    let go = GoWorker::new(&node);
    go.register(json!({"task_type": "crashy", "max_processing_time": 1, "retry_interval": 1, "max_retry_num": 5}))
        .await;
    let id = go.create("crashy", "c").await;
    assert_eq!(go.hold("crashy", 10).await.len(), 1);
    // The worker dies here. The task is processing, then taken back.
    let back = tokio::time::timeout(PATIENCE, async {
        loop {
            let t = go.get_task(&id).await;
            if t.status == 1 {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the task comes back");
    assert_eq!(back.crt_retry_num, 1, "{back:?}");
    // The take-back is the log's latest entry, in the shape Go workers decode:
    // {"LastData": {"TraceId", "ErrMsg", "Cost", ...}, "HistoryDatas": [...]}.
    let log: Value = serde_json::from_str(&back.schedule_log).unwrap();
    let last = &log["LastData"];
    assert!(last["ErrMsg"].as_str().unwrap().contains("max_processing_time"), "{log}");
    assert_eq!(
        (last["TraceId"].as_str(), last["Cost"].as_str(), last["Outcome"].as_str()),
        (Some(""), Some(""), Some("retry"))
    );
    assert!(log["HistoryDatas"].is_array(), "{log}");
    // And another worker gets it once its retry delay has passed.
    let again = tokio::time::timeout(PATIENCE, async {
        loop {
            let held = go.hold("crashy", 10).await;
            if !held.is_empty() {
                return held;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("held again");
    assert_eq!(again[0].task_id, id);
    node.stop().await;
}

/// With a row limit of 40, tasks flow across tables; get_task finds each;
/// counts are right; finished tables let begin_pos move on.
async fn tables_roll_and_tasks_keep_flowing(stack: Stack) {
    let mut storage = Storage::new(stack).await;
    storage.config.asyncflow.governor_period_ms = 100;
    storage.config.asyncflow.table_row_limit = 40;
    let node = TestNode::spawn_with(storage.config.clone()).await;
    let go = GoWorker::new(&node);
    go.register(json!({"task_type": "rolling"})).await;
    let mut ids = Vec::new();
    let mut tables = HashSet::new();
    let started = std::time::Instant::now();
    while (ids.len() < 200 || tables.len() < 3) && started.elapsed() < PATIENCE {
        for _ in 0..20 {
            let id = go.create("rolling", "r").await;
            tables.insert(id.rsplit_once('_').unwrap().1.to_string());
            ids.push(id);
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert!(tables.len() >= 3, "tasks spread over tables: {tables:?}");
    assert_eq!(go.counts("rolling").await, ids.len() as i64);
    for id in &ids {
        assert_eq!(&go.get_task(id).await.task_id, id);
    }
    // Every task, from every table, can be held and finished.
    let mut finished = HashSet::new();
    while finished.len() < ids.len() {
        let held = go.hold("rolling", 64).await;
        assert!(!held.is_empty(), "{} of {} finished", finished.len(), ids.len());
        for mut t in held {
            t.status = 3;
            go.set(&t).await;
            assert!(finished.insert(t.task_id.clone()));
        }
    }
    // All final: begin_pos advances up to the newest table.
    let store = node.node.tasks.store().clone();
    let advanced = tokio::time::timeout(PATIENCE, async {
        loop {
            let pos = store.positions("rolling").await.unwrap().unwrap();
            if pos.begin == pos.end {
                return pos;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("begin_pos catches up");
    assert!(advanced.end >= 3, "{advanced:?}");
    // A task created now still flows.
    let late = go.create("rolling", "late").await;
    assert_eq!(go.hold("rolling", 10).await[0].task_id, late);
    node.stop().await;
}

async fn a_cron_timer_with_an_asyncflow_notify_creates_one_task_per_fire(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let go = GoWorker::new(&node);
    go.register(json!({"task_type": "tick"})).await;
    let timer = json!({
        "app": "it",
        "name": "ticker",
        "cron": "* * * * * *",
        "status": 2,
        "notifyAsyncflowParam": {"taskType": "tick", "taskStage": "start", "context": {"from": "cron"}},
    });
    let id = node.create_ok(timer).await;
    let shown = node.act("getTimer", id, "it").await;
    assert_eq!(shown["result"]["notifyAsyncflowParam"]["taskType"], "tick", "{shown}");
    assert!(shown["result"].get("notifyHTTPParam").is_none(), "{shown}");

    let fired = tokio::time::timeout(PATIENCE, async {
        loop {
            let fires = node.fires(id, "it").await;
            if fires.iter().filter(|f| f["status"] == 2).count() >= 3 {
                return fires;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("three fires succeed");
    assert_eq!(node.act("unableTimer", id, "it").await["code"], 0);

    // The fires in flight at the disable settle: every task created has
    // its fire recorded succeeded.
    let (fires, reply, tasks) = wait_for("the tasks and the succeeded fires agree", || async {
        let fires: Vec<Value> = node.fires(id, "it").await.into_iter().filter(|f| f["status"] == 2).collect();
        let reply = go.get("/v1/get_task_list?task_type=tick&limit=1000").await;
        let tasks: Vec<TaskData> = serde_json::from_value(reply["task_list"].clone()).unwrap();
        (tasks.len() == fires.len()).then_some((fires, reply, tasks))
    })
    .await;
    assert!(fires.len() >= fired.iter().filter(|f| f["status"] == 2).count());
    assert_eq!(tasks.len(), fires.len(), "one task per succeeded fire: {reply}");
    for fire in &fires {
        let key = FireKey { timer_id: id, run_ms: fire["runTimer"].as_i64().unwrap() };
        let task_id = format!("{}_tick_1", fire_uuid(key));
        assert_eq!(fire["output"], format!("created task {task_id}"), "{fire}");
        let task = tasks.iter().find(|t| t.task_id == task_id).unwrap_or_else(|| panic!("{task_id} missing"));
        assert_eq!((task.user_id.as_str(), task.task_stage.as_str()), ("it", "start"));
        assert_eq!(task.context, r#"{"from":"cron"}"#);
        assert_eq!(task.status, 1);
    }

    // The same fire again (a retry, another node) creates no second task.
    let creator = TimerTasks(node.node.tasks.clone());
    let notify =
        AsyncflowNotify { task_type: "tick".into(), task_stage: "start".into(), context: r#"{"from":"cron"}"#.into() };
    let key = FireKey { timer_id: id, run_ms: fires[0]["runTimer"].as_i64().unwrap() };
    let again = creator.create_task("it", &notify, key).await.unwrap();
    assert_eq!(again, format!("{}_tick_1", fire_uuid(key)));
    assert_eq!(go.counts("tick").await, fires.len() as i64);
    // Also after the type rolled to a new table.
    assert!(node.node.tasks.store().roll("tick", 1, now_ms()).await.unwrap());
    node.node.tasks.forget("tick");
    assert_eq!(creator.create_task("it", &notify, key).await.unwrap(), again);
    assert_eq!(go.counts("tick").await, fires.len() as i64);

    // A NUL would fail PostgreSQL's whole create batch: refused up front, on both APIs.
    let nul = json!({"app": "it", "name": "nul", "cron": "* * * * * *",
        "notifyAsyncflowParam": {"taskType": "tick", "context": "a\u{0}b"}});
    let reply = node.create(nul).await;
    assert_eq!(reply["code"], 400, "{reply}");
    let body = json!({"task_data": {"task_type": "tick", "context": "a\u{0}b"}}).to_string();
    let reply = go.post_json("/v1/create_task", &body).await;
    assert_eq!(reply["code"], 8020, "{reply}");
    // A type that is not registered is refused at create, clearly.
    let unknown = json!({"app": "it", "name": "nope", "cron": "* * * * * *",
        "notifyAsyncflowParam": {"taskType": "nope"}});
    let reply = node.create(unknown).await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert!(reply["msg"].as_str().unwrap().contains("notifyAsyncflowParam.taskType"), "{reply}");
    node.stop().await;
}

/// A fire whose task type is not registered fails at once, with the reason
/// as its output: retrying cannot register the type. createTimer refuses
/// such a timer, so this one is stored behind the API's back (as a timer
/// whose type is missing from a restored database would be).
async fn a_fire_whose_task_type_is_unknown_fails_after_one_attempt(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let ghost = NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: "it".into(),
        name: "ghost".into(),
        status: TimerStatus::Disabled,
        schedule: Schedule::Once { run_at_ms: now_ms() + 1_000 },
        notify: Notify::Asyncflow(AsyncflowNotify {
            task_type: "ghost".into(),
            task_stage: String::new(),
            context: String::new(),
        }),
        retry: RetryPolicy { max_attempts: 3, backoff_ms: 100, no_retry_statuses: None },
        misfire: MisfirePolicy::FireAll,
        delete_after_run: false,
        on_failure: None,
        on_missed: None,
        on_late: None,
        pause_after_failures: None,
        overlap: Default::default(),
    };
    let id = node.node.stores.timers.create_timer(&ghost, now_ms()).await.unwrap().id;
    assert_eq!(node.act("enableTimer", id, "it").await["code"], 0);
    let fire = wait_for("the fire ends failed", || async {
        node.fires(id, "it").await.into_iter().find(|f| f["status"] == 3)
    })
    .await;
    assert_eq!(fire["attempt"], 1, "an unknown type is not retried: {fire}");
    assert_eq!(fire["output"], "creating the task failed: task type `ghost` is not registered", "{fire}");
    node.stop().await;
}

/// With auth on, a type registered with an app's token is that app's: every
/// call on it with another app's token answers 403 in the asyncflow shape,
/// and the cfg list shows each app only what it may use.
async fn task_types_belong_to_the_app_that_registered_them(stack: Stack) {
    let storage = Storage::new(stack).await;
    let mut config = storage.config.clone();
    config.auth.enabled = true;
    for app in ["alpha", "beta"] {
        config.auth.apps.insert(
            app.into(),
            AppCredentials { token: Secret::new(format!("{app}-token")), secret: Secret::new(format!("{app}-secret")) },
        );
    }
    let node = TestNode::spawn_with(config).await;
    let call = |method: reqwest::Method, path: &str, token: &str, body: Option<Value>| {
        let mut req = node.http.request(method, format!("{}{path}", node.base)).bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;
    let (status, reply) =
        call(post.clone(), "/v1/register_task", "alpha-token", Some(json!({"task_type": "alpha_jobs"}))).await;
    assert_eq!((status, &reply["code"]), (200, &json!(0)), "{reply}");
    let (_, reply) = call(
        post.clone(),
        "/v1/create_task",
        "alpha-token",
        Some(json!({"task_data": {"task_type": "alpha_jobs", "context": "x"}})),
    )
    .await;
    let task_id = reply["task_id"].as_str().unwrap().to_string();

    let beta_calls = [
        (post.clone(), "/v1/register_task".to_string(), Some(json!({"task_type": "alpha_jobs", "schedule_limit": 1}))),
        (
            post.clone(),
            "/v1/set_task_schedule_cfg".to_string(),
            Some(json!({"task_type": "alpha_jobs", "schedule_limit": 1})),
        ),
        (post.clone(), "/v1/create_task".to_string(), Some(json!({"task_data": {"task_type": "alpha_jobs"}}))),
        (post.clone(), "/v1/hold_tasks?task_type=alpha_jobs&limit=10".to_string(), None),
        (post.clone(), "/v1/set_task".to_string(), Some(json!({"task_data": {"task_id": task_id, "status": 4}}))),
        (get.clone(), format!("/v1/get_task?task_id={task_id}"), None),
        (get.clone(), "/v1/get_task_list?task_type=alpha_jobs".to_string(), None),
        (get.clone(), "/v1/get_task_counts_by_type?task_type=alpha_jobs".to_string(), None),
    ];
    let mut every_call = beta_calls.to_vec();
    every_call.push((get.clone(), "/v1/get_task_schedule_cfg_list".to_string(), None));
    for (method, path, body) in beta_calls {
        let (status, reply) = call(method, &path, "beta-token", body).await;
        assert_eq!(status, 403, "{path}: {reply}");
        assert_eq!(reply["code"], 8020, "{path}: {reply}");
        assert!(reply["msg"].as_str().unwrap().contains("belongs to another app"), "{path}: {reply}");
    }
    // Without a valid token every call but ping is a 401, in the asyncflow shape.
    for (method, path, body) in every_call {
        for token in ["", "not-a-token"] {
            let mut req = node.http.request(method.clone(), format!("{}{path}", node.base));
            if !token.is_empty() {
                req = req.bearer_auth(token);
            }
            if let Some(body) = &body {
                req = req.json(body);
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 401, "{path} with {token:?}");
            let reply: Value = resp.json().await.unwrap();
            assert_eq!(reply["code"], 8020, "{path}: {reply}");
        }
    }
    let ping = node.http.get(format!("{}/v1/ping", node.base)).send().await.unwrap();
    assert_eq!(ping.status(), 200);
    // An unmodified Go worker at http://alpha:alpha-token@host:port sends
    // Basic credentials: they work as alpha's token, and only as alpha's.
    let basic = |user: &str, token: &str| {
        node.http.get(format!("{}/v1/get_task?task_id={task_id}", node.base)).basic_auth(user, Some(token)).send()
    };
    let reply: Value = basic("alpha", "alpha-token").await.unwrap().json().await.unwrap();
    assert_eq!((&reply["code"], &reply["task_data"]["task_id"]), (&json!(0), &json!(task_id)), "{reply}");
    for (user, token) in [("beta", "alpha-token"), ("alpha", "beta-token"), ("alpha", "nope")] {
        let resp = basic(user, token).await.unwrap();
        let status = resp.status();
        let reply: Value = resp.json().await.unwrap();
        assert!(status == 401 || status == 403, "{user}:{token}: {status} {reply}");
        assert_eq!(reply["code"], 8020, "{user}:{token}: {reply}");
    }
    // Even past the route's check (another node's cache), the engine keeps the owner's cfg.
    let cfg = TaskScheduleCfg { task_type: "alpha_jobs".into(), schedule_limit: 1, ..Default::default() };
    let err = node.node.tasks.register(cfg.clone(), Some("beta")).await.unwrap_err();
    assert!(matches!(err, xtimer_asyncflow::Error::TypeExists(_)), "{err}");
    let err = node.node.tasks.set_cfg(cfg, Some("beta")).await.unwrap_err();
    assert!(matches!(err, xtimer_asyncflow::Error::NotOwner(_)), "{err}");
    let (_, list) = call(get.clone(), "/v1/get_task_schedule_cfg_list", "beta-token", None).await;
    assert_eq!(list["task_schedule_cfg_list"], Value::Null, "{list}");
    let (_, list) = call(get.clone(), "/v1/get_task_schedule_cfg_list", "alpha-token", None).await;
    assert_eq!(list["task_schedule_cfg_list"][0]["task_type"], "alpha_jobs", "{list}");
    // Nothing beta sent changed alpha's task or type.
    let (_, task) = call(get.clone(), &format!("/v1/get_task?task_id={task_id}"), "alpha-token", None).await;
    assert_eq!(task["task_data"]["status"], 1, "{task}");
    assert_eq!(list["task_schedule_cfg_list"][0]["schedule_limit"], 100, "{list}");
    // Nor may beta's timers create alpha's tasks.
    let timer = json!({"app": "beta", "name": "t", "cron": "* * * * * *",
        "notifyAsyncflowParam": {"taskType": "alpha_jobs"}});
    let (status, reply) = call(post.clone(), "/api/xtimer/createTimer", "beta-token", Some(timer)).await;
    assert_eq!(status, 400, "{reply}");
    node.stop().await;
}

/// get_task_list, as the reference: only tasks whose order_time has come.
async fn get_task_list_shows_only_tasks_whose_time_has_come(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let go = GoWorker::new(&node);
    go.register(json!({"task_type": "later"})).await;
    let now_id = go.create("later", "now").await;
    // A negative priority puts order_time an hour ahead.
    let body = json!({"task_data": {"task_type": "later", "context": "in-an-hour", "priority": -3600}});
    let reply = go.post_json("/v1/create_task", &body.to_string()).await;
    assert_eq!(reply["code"], 0, "{reply}");
    for query in ["status=1", "status=0"] {
        let list = go.get(&format!("/v1/get_task_list?task_type=later&{query}&limit=10")).await;
        let ids: Vec<&str> =
            list["task_list"].as_array().unwrap().iter().map(|t| t["task_id"].as_str().unwrap()).collect();
        assert_eq!(ids, vec![now_id.as_str()], "{query}: {list}");
    }
    assert_eq!(go.counts("later").await, 2, "both exist");
    node.stop().await;
}

/// register_task creates a type and never changes one: a second register
/// answers 8048 and leaves the tuned cfg alone (a deploy script that
/// registers at every start keeps production settings). The cfg changes
/// through set_task_schedule_cfg, in the same shapes, zero meaning unchanged.
async fn register_creates_and_set_task_schedule_cfg_changes(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let go = GoWorker::new(&node);
    go.register(json!({"task_type": "tuned", "schedule_limit": 50, "max_retry_num": 7, "retry_interval": -5})).await;
    let registered = go.cfg("tuned").await;

    // A deploy script registering again, flat, nested either way: 8048, nothing changed.
    for body in [
        json!({"task_type": "tuned"}),
        json!({"task_config_data": {"task_type": "tuned", "schedule_limit": 1}}),
        json!({"task_type_data": {"task_type": "tuned", "max_retry_num": 1}}),
    ] {
        let reply = go.post_json("/v1/register_task", &body.to_string()).await;
        assert_eq!(reply["code"], 8048, "{body}: {reply}");
        assert!(reply["msg"].as_str().unwrap().contains("already registered"), "{reply}");
        assert!(reply["msg"].as_str().unwrap().contains("/v1/set_task_schedule_cfg"), "{reply}");
        assert_eq!(go.cfg("tuned").await, registered, "{body} changed the cfg");
    }

    // set_task_schedule_cfg: only the fields sent change; the reply is the cfg as changed.
    let reply = go
        .post_json("/v1/set_task_schedule_cfg", r#"{"task_config_data":{"task_type":"tuned","schedule_limit":9}}"#)
        .await;
    assert_eq!(reply["code"], 0, "{reply}");
    assert_eq!(reply["msg"], "ok");
    let changed = &reply["task_schedule_cfg"];
    assert_eq!(changed["schedule_limit"], 9, "{reply}");
    for key in ["schedule_interval", "max_processing_time", "max_retry_num", "retry_interval", "max_retry_interval"] {
        assert_eq!(changed[key], registered[key], "{key} kept: {reply}");
    }
    assert_eq!(&go.cfg("tuned").await, changed, "the list shows the change");
    let flat = go.post_json("/v1/set_task_schedule_cfg", r#"{"task_type":"tuned","max_retry_num":2}"#).await;
    assert_eq!(flat["code"], 0, "{flat}");
    let nested = r#"{"task_type_data":{"task_type":"tuned","retry_interval":30,"max_retry_interval":60}}"#;
    let nested = go.post_json("/v1/set_task_schedule_cfg", nested).await;
    assert_eq!(nested["code"], 0, "{nested}");
    let now = go.cfg("tuned").await;
    assert_eq!(
        [&now["schedule_limit"], &now["max_retry_num"], &now["retry_interval"], &now["max_retry_interval"]],
        [&json!(9), &json!(2), &json!(30), &json!(60)],
        "{now}"
    );
    // New tasks take the changed cfg.
    let task_id = go.create("tuned", "c").await;
    let task = go.get_task(&task_id).await;
    assert_eq!((task.max_retry_num, task.max_retry_interval), (2, 30), "{task:?}");

    // Bad input names the field and the limit, and changes nothing.
    let bad = go.post_json("/v1/set_task_schedule_cfg", r#"{"task_type":"tuned","schedule_limit":5000}"#).await;
    assert_eq!(bad["code"], 8020, "{bad}");
    assert!(bad["msg"].as_str().unwrap().contains("schedule_limit must be 1 to 2000, not 5000"), "{bad}");
    let bad = go.post_json("/v1/set_task_schedule_cfg", r#"{"schedule_limit":5}"#).await;
    assert_eq!(bad["code"], 8020, "{bad}");
    assert!(bad["msg"].as_str().unwrap().contains("task_type is required"), "{bad}");
    let bad = go.post_json("/v1/set_task_schedule_cfg", r#"{"task_type":"tuned","schedule_limit":"5"}"#).await;
    assert_eq!(bad["code"], 8021, "{bad}");
    assert_eq!(go.cfg("tuned").await, now, "refused changes left the cfg alone");
    // A type that is not registered is not created by a cfg change.
    let ghost = go.post_json("/v1/set_task_schedule_cfg", r#"{"task_type":"ghost","schedule_limit":5}"#).await;
    assert_eq!(ghost["code"], 8039, "{ghost}");
    assert!(ghost["msg"].as_str().unwrap().contains("not registered"), "{ghost}");
    let list = go.get("/v1/get_task_schedule_cfg_list").await;
    assert_eq!(list["task_schedule_cfg_list"].as_array().unwrap().len(), 1, "{list}");
    node.stop().await;
}

/// Creates `n` tasks of `user` (`concurrency` creates at a time); returns their ids.
async fn create_for(go: &Arc<GoWorker>, task_type: &str, user: &str, n: usize, concurrency: usize) -> Vec<String> {
    let mut creates = tokio::task::JoinSet::new();
    for c in 0..concurrency {
        let (go, task_type, user) = (go.clone(), task_type.to_string(), user.to_string());
        creates.spawn(async move {
            let mut ids = Vec::new();
            for i in (c..n).step_by(concurrency) {
                let body = json!({"task_data": {"task_type": task_type, "user_id": user, "context": i.to_string()}});
                let reply = go.post_json("/v1/create_task", &body.to_string()).await;
                assert_eq!(reply["code"], 0, "{reply}");
                ids.push(reply["task_id"].as_str().unwrap().to_string());
            }
            ids
        });
    }
    let mut ids = Vec::new();
    while let Some(part) = creates.join_next().await {
        ids.extend(part.unwrap());
    }
    ids
}

fn users(tasks: &[TaskData]) -> Vec<&str> {
    tasks.iter().map(|t| t.user_id.as_str()).collect()
}

/// A type registered with `fair_by_user: true` is held round-robin across
/// user_ids: 10 tasks of user B created after 10,000 of user A are all in
/// the first hold of 20, each user's oldest first. set_task_schedule_cfg
/// turns it off and on (a change that leaves it out keeps it); the cfg
/// list shows it beside every key it had; a type without it is held
/// strictly by order_time.
async fn a_fair_by_user_type_is_held_round_robin_across_users(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let go = Arc::new(GoWorker::new(&node));
    go.register(json!({"task_type": "fair_users", "schedule_limit": 20, "fair_by_user": true})).await;
    go.register(json!({"task_type": "plain_users", "schedule_limit": 20})).await;
    let fair = go.cfg("fair_users").await;
    for key in [
        "task_type",
        "schedule_limit",
        "schedule_interval",
        "max_processing_time",
        "max_retry_num",
        "retry_interval",
        "max_retry_interval",
        "create_time",
        "modify_time",
    ] {
        assert!(fair.get(key).is_some(), "{key} listed: {fair}");
    }
    assert_eq!(fair["fair_by_user"], true, "{fair}");
    assert_eq!(go.cfg("plain_users").await["fair_by_user"], false);

    create_for(&go, "fair_users", "A", 10_000, 64).await;
    // B's ten, one after another, after all of A's.
    let mut b_ids = Vec::new();
    for _ in 0..10 {
        b_ids.extend(create_for(&go, "fair_users", "B", 1, 1).await);
    }

    // Limit 0: the type's schedule_limit, 20. Round k: A's k-th oldest, then B's.
    let first = go.hold("fair_users", 0).await;
    assert_eq!(first.len(), 20);
    assert_eq!(users(&first), ["A", "B"].repeat(10), "round-robin: {:?}", users(&first));
    let b_held: Vec<&str> = first.iter().filter(|t| t.user_id == "B").map(|t| t.task_id.as_str()).collect();
    assert_eq!(b_held, b_ids.iter().map(String::as_str).collect::<Vec<_>>(), "B's in order_time order");
    let a_orders: Vec<i64> = first.iter().filter(|t| t.user_id == "A").map(|t| t.order_time).collect();
    assert!(a_orders.windows(2).all(|w| w[0] <= w[1]), "A's oldest first: {a_orders:?}");

    // A change that leaves fair_by_user out keeps it.
    let kept = go.post_json("/v1/set_task_schedule_cfg", r#"{"task_type":"fair_users","max_retry_num":5}"#).await;
    assert_eq!((&kept["code"], &kept["task_schedule_cfg"]["fair_by_user"]), (&json!(0), &json!(true)), "{kept}");
    // Off: B's next tasks wait behind all of A's, strictly by order_time.
    let off = go.post_json("/v1/set_task_schedule_cfg", r#"{"task_type":"fair_users","fair_by_user":false}"#).await;
    assert_eq!((&off["code"], &off["task_schedule_cfg"]["fair_by_user"]), (&json!(0), &json!(false)), "{off}");
    assert_eq!(go.cfg("fair_users").await["fair_by_user"], false);
    let late_b = create_for(&go, "fair_users", "B", 5, 5).await;
    let held = go.hold("fair_users", 20).await;
    assert_eq!(users(&held), ["A"; 20], "oldest first with the flag off");
    // On again, nested as Go sends a cfg: B's five come in the first five rounds.
    let on = r#"{"task_config_data":{"task_type":"fair_users","fair_by_user":true}}"#;
    let on = go.post_json("/v1/set_task_schedule_cfg", on).await;
    assert_eq!(on["task_schedule_cfg"]["fair_by_user"], true, "{on}");
    let held = go.hold("fair_users", 20).await;
    assert_eq!(&users(&held)[..10], ["A", "B"].repeat(5), "{:?}", users(&held));
    let mut b_held: Vec<String> = held.iter().filter(|t| t.user_id == "B").map(|t| t.task_id.clone()).collect();
    b_held.sort();
    let mut late_b = late_b;
    late_b.sort();
    assert_eq!(b_held, late_b);
    // A flag that is not a boolean is refused.
    let bad = go.post_json("/v1/set_task_schedule_cfg", r#"{"task_type":"fair_users","fair_by_user":"yes"}"#).await;
    assert_eq!(bad["code"], 8021, "{bad}");

    // Without the flag: A's tasks, all older, come first.
    create_for(&go, "plain_users", "A", 100, 16).await;
    create_for(&go, "plain_users", "B", 10, 1).await;
    let held = go.hold("plain_users", 20).await;
    assert_eq!(users(&held), ["A"; 20]);
    assert!(held.windows(2).all(|w| w[0].order_time <= w[1].order_time));
    let rest = go.hold("plain_users", 200).await;
    assert_eq!(rest.len(), 90);
    assert!(rest.windows(2).all(|w| w[0].order_time <= w[1].order_time), "strictly by order_time");
    node.stop().await;
}

on_both_stacks!(
    a_fair_by_user_type_is_held_round_robin_across_users,
    register_creates_and_set_task_schedule_cfg_changes,
    task_types_belong_to_the_app_that_registered_them,
    get_task_list_shows_only_tasks_whose_time_has_come,
    go_worker_wire,
    concurrent_holds_never_share_a_task,
    a_failing_task_delays_no_other,
    a_crashed_workers_task_comes_back,
    tables_roll_and_tasks_keep_flowing,
    a_cron_timer_with_an_asyncflow_notify_creates_one_task_per_fire,
    a_fire_whose_task_type_is_unknown_fails_after_one_attempt,
);
