//! OpenTelemetry spans of callback attempts (API 1h): one `xtimer.fire`
//! span per attempt, whose W3C `traceparent` the callback carries so the
//! receiver's own spans join the trace.
//!
//! Every attempt of one fire belongs to one trace, whichever node sends it
//! and however long apart: the trace id, and the id of the parent the
//! attempts share (the fire itself, not exported), are derived from the
//! fire's key. Spans are handed to the tracer's batch processor, which
//! exports them off the fire path; a collector that cannot be reached
//! costs a fire nothing but the hand-over.

use std::borrow::Cow;
use std::time::SystemTime;

use opentelemetry::global::{BoxedSpan, BoxedTracer};
use opentelemetry::trace::{
    Span, SpanBuilder, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};
use xtimer_core::fire::FireKey;

use crate::callback::{Answer, Delivery};

/// The name of an attempt's span.
pub const FIRE_SPAN: &str = "xtimer.fire";

/// Where attempts' spans go: a tracer, or nothing when traces are off.
#[derive(Clone)]
pub struct FireTraces {
    tracer: std::sync::Arc<BoxedTracer>,
}

impl std::fmt::Debug for FireTraces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FireTraces")
    }
}

/// What an attempt's span says of its fire.
#[derive(Debug, Clone, Copy)]
pub struct AttemptFacts<'a> {
    /// The fire.
    pub key: FireKey,
    /// Its scheduled time, Unix ms.
    pub scheduled_ms: i64,
    /// Its timer's app.
    pub app: &'a str,
    /// The attempt's number, 1 for the first.
    pub attempt: u32,
    /// `host:port` of the callback.
    pub host: &'a str,
}

/// An attempt's span, open while its callback is out.
pub struct AttemptSpan {
    span: BoxedSpan,
    /// `00-{trace id}-{span id}-01`.
    traceparent: String,
}

impl FireTraces {
    /// Spans go to `tracer`.
    pub fn new(tracer: BoxedTracer) -> Self {
        Self { tracer: std::sync::Arc::new(tracer) }
    }

    /// Opens the span of an attempt, starting now.
    pub fn start(&self, facts: AttemptFacts<'_>) -> AttemptSpan {
        let (trace_id, parent_id) = fire_ids(facts.key);
        let parent = SpanContext::new(trace_id, parent_id, TraceFlags::SAMPLED, true, TraceState::default());
        let cx = Context::new().with_remote_span_context(parent);
        let builder = SpanBuilder::from_name(FIRE_SPAN)
            .with_kind(SpanKind::Client)
            .with_start_time(SystemTime::now())
            .with_attributes([
                KeyValue::new("xtimer.timer_id", facts.key.timer_id),
                KeyValue::new("xtimer.app", facts.app.to_owned()),
                KeyValue::new("xtimer.run_time_ms", facts.key.run_ms),
                KeyValue::new("xtimer.scheduled_time_ms", facts.scheduled_ms),
                KeyValue::new("xtimer.attempt", i64::from(facts.attempt)),
                KeyValue::new("server.address", facts.host.to_owned()),
            ]);
        let span = self.tracer.build_with_context(builder, &cx);
        let context = span.span_context();
        let traceparent = format!("00-{}-{}-01", context.trace_id(), context.span_id());
        AttemptSpan { span, traceparent }
    }
}

impl AttemptSpan {
    /// The `traceparent` header of the attempt's callback.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// Ends the span with how the attempt went: the answer and how late
    /// it left (ms after its run time).
    pub fn end(mut self, answer: &Answer, lateness_ms: i64) {
        let (outcome, status) = match answer.delivery {
            Delivery::Delivered => ("succeeded", None),
            Delivery::Rejected { status, .. } => ("rejected", Some(status)),
            Delivery::Unanswered => ("unanswered", None),
            Delivery::Refused => ("refused", None),
            Delivery::NotSent { .. } => ("not_sent", None),
        };
        let mut attributes =
            vec![KeyValue::new("xtimer.lateness_ms", lateness_ms), KeyValue::new("xtimer.outcome", outcome)];
        let status = status.or_else(|| answer.delivery.delivered().then(|| ok_status(&answer.output)).flatten());
        if let Some(status) = status {
            attributes.push(KeyValue::new("http.response.status_code", i64::from(status)));
        }
        self.span.set_attributes(attributes);
        if !answer.delivery.delivered() {
            self.span.set_status(Status::Error { description: Cow::Owned(first_line(&answer.output)) });
        }
        self.span.end();
    }
}

/// The status of a delivered answer, from its output (`HTTP 200: ...`).
fn ok_status(output: &str) -> Option<u16> {
    output.strip_prefix("HTTP ")?.get(..3)?.parse().ok()
}

/// At most the first line and 200 bytes of an output, for a span's status.
fn first_line(output: &str) -> String {
    let line = output.lines().next().unwrap_or_default();
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_owned()
}

/// The trace id of a fire and the span id of the fire itself (the parent
/// of its attempts): both from its key, so every node derives the same.
/// Mixed so they look random; the trace id is one-to-one with the key.
fn fire_ids(key: FireKey) -> (TraceId, SpanId) {
    let high = mix(key.timer_id as u64 ^ 0x7874_696d_6572_0001);
    let low = mix(key.run_ms as u64 ^ high);
    let trace = (u128::from(high) << 64) | u128::from(low);
    let parent = mix(high ^ low.rotate_left(32)).max(1);
    (TraceId::from_bytes(trace.to_be_bytes()), SpanId::from_bytes(parent.to_be_bytes()))
}

/// SplitMix64's finalizer: a bijection on u64 that spreads every bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fire_has_one_trace_id_and_fires_have_different_ones() {
        let key = FireKey { timer_id: 42, run_ms: 1_700_000_000_000 };
        assert_eq!(fire_ids(key), fire_ids(key));
        let next = FireKey { run_ms: key.run_ms + 1000, ..key };
        let other = FireKey { timer_id: 43, ..key };
        assert_ne!(fire_ids(key).0, fire_ids(next).0);
        assert_ne!(fire_ids(key).0, fire_ids(other).0);
        assert_ne!(fire_ids(key).1, SpanId::INVALID);
        assert_ne!(fire_ids(key).0, TraceId::INVALID);
    }

    #[test]
    fn a_delivered_status_reads_from_its_output() {
        assert_eq!(ok_status("HTTP 204: "), Some(204));
        assert_eq!(ok_status("task 7"), None);
        assert_eq!(first_line("a\nb"), "a");
        assert_eq!(first_line(&"é".repeat(150)).len(), 200);
    }
}
