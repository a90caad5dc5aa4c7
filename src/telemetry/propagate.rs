//! W3C trace context in and out: a request's `traceparent` continues its
//! trace (a run started by it hangs under it, on any node: the run carries
//! it as text), and HTTP tools, MCP servers and upstream agents get the
//! `traceparent` of the span that calls them. Nothing is read or written
//! when traces are off.

use std::collections::HashMap;

use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// The trace context a request's headers carry, when traces are on and
/// they carry a valid one.
pub fn extract(headers: &axum::http::HeaderMap) -> Option<Context> {
    if !super::on() {
        return None;
    }
    let cx = TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    cx.span().span_context().is_valid().then_some(cx)
}

/// The current span's context as `traceparent` text (what a run started
/// from here continues), if traces are on and there is one.
pub fn current_traceparent() -> Option<String> {
    if !super::on() {
        return None;
    }
    traceparent_of(&Context::current())
}

/// `cx`'s span as `traceparent` text, if it has a valid one.
pub fn traceparent_of(cx: &Context) -> Option<String> {
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut fields = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut fields);
    fields.remove("traceparent")
}

/// The remote context `traceparent` names (an empty one if it is not
/// valid).
pub fn context_of(traceparent: Option<&str>) -> Context {
    let Some(text) = traceparent else {
        return Context::new();
    };
    let fields = HashMap::from([("traceparent".to_owned(), text.to_owned())]);
    TraceContextPropagator::new().extract(&fields)
}

/// `request` with the current span's `traceparent` (and `tracestate`),
/// when traces are on.
pub fn inject(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    if !super::on() {
        return request;
    }
    let mut headers = axum::http::HeaderMap::new();
    TraceContextPropagator::new().inject_context(
        &Context::current(),
        &mut opentelemetry_http::HeaderInjector(&mut headers),
    );
    request.headers(headers)
}
