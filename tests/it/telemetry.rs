//! Traces (API 1h) through a real node with the default settings and
//! `telemetry.otlp_endpoint` set: a real OTLP/HTTP collector (a receiver on
//! loopback whose bodies are decoded with the `opentelemetry-proto` types)
//! gets a span per callback attempt and per API request; the callbacks
//! carry the `traceparent` of their attempt's span. A collector that is
//! down, or that never answers, costs the fires nothing.

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};
use prost::Message;
use serde_json::json;
use xtimer::receiver::{Hit, Receiver};

use crate::helpers::{every_second, Stack, Storage, TestNode, PATIENCE};

/// Every span `collector` got, with its resource's `service.name`.
fn spans(collector: &Receiver) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    for hit in collector.hits() {
        assert_eq!(hit.uri.path(), "/v1/traces", "spans are posted to /v1/traces");
        let content_type = hit.headers.as_ref().and_then(|h| h.get("content-type")).expect("a content type");
        assert_eq!(content_type, "application/x-protobuf");
        let request = ExportTraceServiceRequest::decode(hit.body.as_ref()).expect("an OTLP protobuf body");
        for resource in request.resource_spans {
            let attributes = resource.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
            let service = attributes.get("service.name").cloned().unwrap_or_default();
            for scope in resource.scope_spans {
                out.extend(scope.spans.into_iter().map(|span| (service.clone(), span)));
            }
        }
    }
    out
}

/// A span's (or resource's) attributes as text, integers in decimal.
fn attributes(list: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> HashMap<String, String> {
    list.iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                Any::StringValue(s) => s.clone(),
                Any::IntValue(i) => i.to_string(),
                Any::BoolValue(b) => b.to_string(),
                Any::DoubleValue(d) => d.to_string(),
                _ => return None,
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn traceparent(hit: &Hit) -> String {
    let headers = hit.headers.as_ref().expect("detailed receiver");
    headers.get("traceparent").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// A node on `stack` whose traces go to `endpoint`, otherwise the
/// product's defaults (not the suite's quicker executor and reconciler).
async fn traced_node(stack: Stack, endpoint: String) -> (TestNode, Storage) {
    let storage = Storage::new(stack).await;
    let mut config = storage.config.clone();
    let defaults = xtimer_core::config::Config::default();
    config.executor = defaults.executor;
    config.reconciler = defaults.reconciler;
    config.server.shutdown_grace_ms = defaults.server.shutdown_grace_ms;
    config.telemetry.otlp_endpoint = endpoint;
    (TestNode::spawn_with(config).await, storage)
}

/// A fire that fails once, then succeeds: two `xtimer.fire` spans in one
/// trace, with their attributes; the two callbacks carry `traceparent`s
/// naming exactly those spans. The createTimer request has its span too.
pub async fn a_fire_is_one_trace_its_attempts_spans_and_its_callbacks_carry_them(stack: Stack) {
    let collector = Receiver::start(true).await.unwrap();
    let (app, _storage) = traced_node(stack, format!("http://{}", collector.addr)).await;
    let rx = Receiver::start(true).await.unwrap();
    rx.fail_first(1);
    let id = app.create_ok(every_second("traced", &rx, json!({"retry": {"maxAttempts": 2, "backoffMs": 200}}))).await;
    // The first fire whose second attempt arrived.
    let mut first_key = String::new();
    let got_two = rx
        .wait_until(PATIENCE, |hits| {
            hits.iter().any(|h| hits.iter().filter(|o| o.key == h.key).count() == 2 && !h.key.is_empty())
        })
        .await;
    assert!(got_two, "a fire sent twice: {:?}", rx.hits().iter().map(|h| &h.key).collect::<Vec<_>>());
    let hits = rx.hits();
    for hit in &hits {
        if hits.iter().filter(|o| o.key == hit.key).count() == 2 {
            first_key = hit.key.clone();
            break;
        }
    }
    let attempts: Vec<&Hit> = hits.iter().filter(|h| h.key == first_key).collect();
    let run_ms = attempts[0].run_ms;

    // Exported within a second or so (the batch processor's period).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let fire_spans = loop {
        let found: Vec<(String, Span)> = spans(&collector)
            .into_iter()
            .filter(|(_, s)| {
                let a = attributes(&s.attributes);
                s.name == "xtimer.fire"
                    && a.get("xtimer.timer_id") == Some(&id.to_string())
                    && a.get("xtimer.run_time_ms") == Some(&run_ms.to_string())
            })
            .collect();
        if found.len() >= 2 || tokio::time::Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(fire_spans.len(), 2, "two attempt spans: {fire_spans:?}");
    let mut by_attempt: Vec<(HashMap<String, String>, &Span)> =
        fire_spans.iter().map(|(_, s)| (attributes(&s.attributes), s)).collect();
    by_attempt.sort_by_key(|(a, _)| a["xtimer.attempt"].clone());
    let (first, second) = (&by_attempt[0], &by_attempt[1]);
    assert_eq!(first.1.trace_id, second.1.trace_id, "one trace");
    assert_ne!(first.1.span_id, second.1.span_id);
    assert_eq!(first.0["xtimer.attempt"], "1");
    assert_eq!(second.0["xtimer.attempt"], "2");
    assert_eq!(first.0["http.response.status_code"], "500");
    assert_eq!(second.0["http.response.status_code"], "200");
    assert_eq!(first.0["xtimer.outcome"], "rejected");
    assert_eq!(second.0["xtimer.outcome"], "succeeded");
    for (a, span) in &by_attempt {
        assert_eq!(a["xtimer.app"], "it");
        assert_eq!(a["xtimer.scheduled_time_ms"], run_ms.to_string());
        let lateness: i64 = a["xtimer.lateness_ms"].parse().expect("lateness");
        assert!((0..PATIENCE.as_millis() as i64).contains(&lateness), "{lateness}");
        assert_eq!(span.kind, SpanKind::Client as i32);
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    }
    assert!(second.0["xtimer.lateness_ms"].parse::<i64>().unwrap() >= 200, "the retry left after its backoff");
    assert!(fire_spans.iter().all(|(service, _)| service == "xtimer"), "service.name");

    // Each callback names its attempt's span.
    let mut sent: Vec<String> = attempts.iter().map(|h| traceparent(h)).collect();
    let mut spanned: Vec<String> =
        by_attempt.iter().map(|(_, s)| format!("00-{}-{}-01", hex(&s.trace_id), hex(&s.span_id))).collect();
    sent.sort();
    spanned.sort();
    assert_eq!(sent, spanned, "traceparent headers match the spans");

    // The API request that created the timer.
    let created = spans(&collector).into_iter().find(|(_, s)| s.name == "POST /api/xtimer/createTimer");
    let (_, created) = created.expect("a span for the createTimer request");
    let a = attributes(&created.attributes);
    assert_eq!(a["http.response.status_code"], "200");
    assert_eq!(a["http.route"], "/api/xtimer/createTimer");
    assert_eq!(created.kind, SpanKind::Server as i32);
    app.stop().await;
}

/// With the collector down (nothing listens) or hung (it accepts and never
/// answers), per-second fires leave on time and every one succeeds.
pub async fn with_the_collector_down_or_hung_fires_are_on_time_and_none_fail(stack: Stack) {
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung_addr = hung.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hung.accept().await {
            held.push(socket);
        }
    });
    for endpoint in [format!("http://{down}"), format!("http://{hung_addr}")] {
        let (app, _storage) = traced_node(stack, endpoint.clone()).await;
        let rx = Receiver::start(true).await.unwrap();
        let id = app.create_ok(every_second("untraced", &rx, json!({}))).await;
        assert!(rx.wait_until(PATIENCE, |hits| hits.len() >= 6).await, "{endpoint}: six fires");
        let hits = rx.hits();
        // A fire path that waited on the exporter would be seconds late (its
        // export timeout is 5 s); 500 ms is the other real-clock tests' bound,
        // generous for a busy 2-core host running the whole suite.
        for hit in &hits {
            assert!(hit.lateness_ms() < 500.0, "{endpoint}: a fire {} ms late", hit.lateness_ms());
            assert!(traceparent(hit).starts_with("00-"), "{endpoint}: still traced");
        }
        let fires = app.fires(id, "it").await;
        let ended: Vec<_> = fires.iter().filter(|f| f["status"] != 0 && f["status"] != 1).collect();
        assert!(ended.iter().all(|f| f["status"] == 2), "{endpoint}: every fire succeeded: {ended:?}");
        app.stop().await;
    }
    hold.abort();
}

crate::on_both_stacks!(
    a_fire_is_one_trace_its_attempts_spans_and_its_callbacks_carry_them,
    with_the_collector_down_or_hung_fires_are_on_time_and_none_fail,
);
