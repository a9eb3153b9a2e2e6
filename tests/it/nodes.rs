//! The nodes endpoint.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::{Stack, TestNode};

pub async fn a_node_reports_itself_and_the_shards_it_holds(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let node = loop {
        let reply: Value =
            app.http.get(format!("{}/api/xtimer/nodes", app.base)).send().await.unwrap().json().await.unwrap();
        assert_eq!(reply["code"], 0, "{reply}");
        let list = reply["result"]["list"].as_array().unwrap().clone();
        if let Some(node) = list.first().filter(|n| n["shardsHeld"].as_u64().unwrap_or(0) > 0) {
            assert_eq!(list.len(), 1);
            break node.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no node with shards: {reply}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(node["id"], app.node.node_id.as_str());
    assert_eq!(node["listen"], app.node.addr.to_string());
    assert!(node["heartbeatAgeMs"].as_i64().unwrap() < 5_000, "{node}");
    // Its heartbeats reach the database: ready.
    let ready = app.http.get(format!("{}/readyz", app.base)).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["result"], serde_json::json!({"status": "ok", "database": "ok"}), "{ready}");
    app.stop().await;
}

crate::on_both_stacks!(a_node_reports_itself_and_the_shards_it_holds);
