//! A span per API request (API 1h), when traces are on: `{METHOD}
//! {route}`, a server span with the route's pattern (never its path's ids
//! as the name), the method, path and status. A request that carries a
//! W3C `traceparent` gets its span in the caller's trace.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{
    Span, SpanBuilder, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};

use crate::metrics;

/// Middleware (installed only when traces are on): the request's span.
pub async fn trace_request(State(tracer): State<Arc<BoxedTracer>>, request: Request, next: Next) -> Response {
    let start = SystemTime::now();
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let parent = parent_of(request.headers());
    let response = next.run(request).await;
    let route = metrics::route_of(&response).to_owned();
    let status = response.status();
    let builder = SpanBuilder::from_name(format!("{method} {route}"))
        .with_kind(SpanKind::Server)
        .with_start_time(start)
        .with_attributes([
            KeyValue::new("http.request.method", method),
            KeyValue::new("http.route", route),
            KeyValue::new("url.path", path),
            KeyValue::new("http.response.status_code", i64::from(status.as_u16())),
        ]);
    let mut span = tracer.build_with_context(builder, &parent);
    if status.is_server_error() {
        span.set_status(Status::error(status.to_string()));
    }
    span.end();
    response
}

/// The caller's trace from its `traceparent` header (W3C version 00), or
/// a new trace.
fn parent_of(headers: &HeaderMap) -> Context {
    match headers.get("traceparent").and_then(|v| v.to_str().ok()).and_then(parse_traceparent) {
        Some(parent) => Context::new().with_remote_span_context(parent),
        None => Context::new(),
    }
}

/// `00-{32 hex trace id}-{16 hex span id}-{2 hex flags}`; `None` for
/// anything else or all-zero ids.
fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let lower_hex =
        |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if version != "00"
        || parts.next().is_some()
        || !lower_hex(trace, 32)
        || !lower_hex(span, 16)
        || !lower_hex(flags, 2)
    {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok().filter(|t| *t != TraceId::INVALID)?;
    let span = SpanId::from_hex(span).ok().filter(|s| *s != SpanId::INVALID)?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    Some(SpanContext::new(trace, span, flags, true, TraceState::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_parses_and_a_bad_one_does_not() {
        let parsed = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").expect("parses");
        assert_eq!(parsed.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.span_id().to_string(), "00f067aa0ba902b7");
        assert!(parsed.is_sampled() && parsed.is_remote());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }
}
