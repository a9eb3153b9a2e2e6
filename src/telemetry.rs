//! OpenTelemetry traces over OTLP/HTTP (`telemetry.otlp_endpoint`, API 1h):
//! the node's tracer provider, its batch processor and exporter.
//!
//! Spans are queued for a background thread that exports them in batches;
//! a full queue drops spans, never waits. A collector that is down or slow
//! costs only the spans it misses: no fire and no request waits on it.

use std::time::Duration;

use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use xtimer_core::config::TelemetryConfig;

/// Spans queued for export at most; past it new spans are dropped.
const MAX_QUEUED_SPANS: usize = 65_536;
/// Spans per export request.
const EXPORT_BATCH: usize = 1_024;
/// How often queued spans are exported when fewer than a batch wait.
const EXPORT_EVERY: Duration = Duration::from_secs(1);
/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The node's traces: a provider when `telemetry.otlp_endpoint` is set.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Starts exporting to `config`'s endpoint (nothing when it is empty);
    /// spans name this node as `service.instance.id`.
    pub fn start(config: &TelemetryConfig, node_id: &str) -> anyhow::Result<Self> {
        let Some(url) = config.traces_url().map_err(anyhow::Error::msg)? else {
            return Ok(Self { provider: None });
        };
        let exporter = SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| anyhow::anyhow!("telemetry.otlp_endpoint `{url}`: {e}"))?;
        let batches = BatchConfigBuilder::default()
            .with_max_queue_size(MAX_QUEUED_SPANS)
            .with_max_export_batch_size(EXPORT_BATCH)
            .with_scheduled_delay(EXPORT_EVERY)
            .build();
        let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batches).build();
        let resource = Resource::builder()
            .with_service_name("xtimer")
            .with_attributes([
                KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
                KeyValue::new("service.instance.id", node_id.to_owned()),
            ])
            .build();
        let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
        tracing::info!(endpoint = url, "Traces are exported over OTLP/HTTP.");
        Ok(Self { provider: Some(provider) })
    }

    /// A tracer for the executor and the API, or `None` when traces are off.
    pub fn tracer(&self) -> Option<BoxedTracer> {
        let provider = self.provider.as_ref()?;
        Some(BoxedTracer::new(Box::new(provider.tracer("xtimer"))))
    }

    /// Exports what is queued (within the export timeout) and stops.
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else { return };
        // The provider waits on its export thread: not on a runtime thread.
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
}
