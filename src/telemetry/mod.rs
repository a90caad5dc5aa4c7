//! Traces (issue 39): OpenTelemetry spans with the GenAI semantic
//! conventions, exported over OTLP (HTTP/protobuf or gRPC).
//!
//! Off unless `[telemetry]` or the standard `OTEL_*` variables turn it on
//! ([`crate::config::Telemetry`]). Off, nothing is installed: every
//! [`Span`] is `None`, no context is attached to any future, no header is
//! read or written. On, one tracer exports in batches from the SDK's own
//! thread; a run's spans hang under the `traceparent` of the request that
//! started it, and HTTP tools, MCP servers and upstream agents are sent the
//! context of the call that reaches them ([`propagate`]).

pub mod propagate;
mod span;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _, WithTonicConfig as _};
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};

pub use span::{Span, SpanKind};

use crate::config::{OtlpProtocol, Telemetry};

/// What [`init`] installed.
struct Installed {
    tracer: SdkTracer,
    capture_content: bool,
    /// One commit in this many gets a span (0: none).
    commit_every: u64,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Whether traces are on.
#[inline]
pub fn on() -> bool {
    INSTALLED.get().is_some()
}

fn tracer() -> Option<&'static SdkTracer> {
    INSTALLED.get().map(|i| &i.tracer)
}

/// Whether message contents, tool arguments and results go on spans
/// (`capture_content`; never a secret answer).
pub fn capture_content() -> bool {
    INSTALLED.get().is_some_and(|i| i.capture_content)
}

/// Flushes and stops the exporter when dropped (at the end of `main`).
pub struct Guard(SdkTracerProvider);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = self.0.shutdown() {
            eprintln!("agentwire: flushing traces: {e}");
        }
    }
}

/// Installs the tracer `config` describes, once per process; `None` when
/// traces are off. Called inside the Tokio runtime (gRPC's channel lives
/// on it).
///
/// # Errors
/// The exporter cannot be built (a bad endpoint or protocol).
pub fn init(config: &Telemetry) -> anyhow::Result<Option<Guard>> {
    if !config.enabled || INSTALLED.get().is_some() {
        return Ok(None);
    }
    let exporter = match config.protocol {
        OtlpProtocol::Grpc => {
            let mut builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
            let endpoint = config.endpoint.clone().or_else(|| {
                std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                    .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT"))
                    .ok()
            });
            if let Some(endpoint) = &config.endpoint {
                builder = builder.with_endpoint(endpoint.clone());
            }
            // tonic adds no roots of its own: the system's, for https.
            if endpoint.is_some_and(|e| e.starts_with("https:")) {
                install_crypto();
                let tls = opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new()
                    .with_native_roots();
                builder = builder.with_tls_config(tls);
            }
            builder.build()?
        }
        OtlpProtocol::HttpProtobuf => {
            install_crypto();
            // A blocking client is built (and later dropped) off the runtime,
            // each export bounded by OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT.
            let timeout = export_timeout();
            let client = std::thread::spawn(move || {
                reqwest::blocking::Client::builder()
                    .connect_timeout(std::time::Duration::from_secs(10).min(timeout))
                    .timeout(timeout)
                    .build()
            })
            .join()
            .map_err(|_| anyhow::anyhow!("building the OTLP HTTP client panicked"))??;
            let mut builder = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client);
            if let Some(endpoint) = &config.endpoint {
                // As OTEL_EXPORTER_OTLP_ENDPOINT: a base, the signal's path added.
                let base = endpoint.trim_end_matches('/');
                builder = builder.with_endpoint(format!("{base}/v1/traces"));
            }
            builder.build()?
        }
    };
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(config.service_name.clone())
        .build();
    let mut provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource);
    if let Some(ratio) = config.sample_ratio {
        provider = provider.with_sampler(Sampler::ParentBased(Box::new(
            Sampler::TraceIdRatioBased(ratio),
        )));
    }
    let provider = provider.build();
    let commit_every = match config.commit_sample_ratio {
        r if r <= 0.0 => 0,
        r => (1.0 / r).round().max(1.0) as u64,
    };
    let installed = Installed {
        tracer: provider.tracer("agentwire"),
        capture_content: config.capture_content,
        commit_every,
    };
    if INSTALLED.set(installed).is_err() {
        return Ok(None);
    }
    tracing::info!(
        protocol = config.protocol.as_str(),
        service = %config.service_name,
        "traces are exported over OTLP"
    );
    Ok(Some(Guard(provider)))
}

/// A span for one store commit, for one commit in `commit_sample_ratio`
/// (a trace of its own: commits group many chats).
pub fn commit_span(batches: usize, envelopes: impl FnOnce() -> usize) -> Span {
    static COMMITS: AtomicU64 = AtomicU64::new(0);
    let Some(installed) = INSTALLED.get() else {
        return Span::none();
    };
    let every = installed.commit_every;
    if every == 0
        || !COMMITS
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(every)
    {
        return Span::none();
    }
    Span::root("store commit", SpanKind::Internal, || {
        vec![
            kv("db.operation.name", "commit"),
            kv("agentwire.store.batches", batches as i64),
            kv("agentwire.store.envelopes", envelopes() as i64),
        ]
    })
}

/// An attribute.
pub fn kv(key: &'static str, value: impl Into<opentelemetry::Value>) -> opentelemetry::KeyValue {
    opentelemetry::KeyValue::new(key, value)
}

/// ring as rustls's provider (as `llm::install_crypto`, which sits above
/// this module): the exporter's clients are built with it.
fn install_crypto() {
    // Fails only if a provider was installed first; either is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// How long one export may take: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or
/// `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), else the specification's
/// 10 s.
fn export_timeout() -> std::time::Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok()?.trim().parse::<u64>().ok())
    .filter(|&ms| ms > 0)
    .map_or(
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis,
    )
}
