//! [`Span`]: one OpenTelemetry span, or nothing at all when traces are off.

use std::borrow::Cow;
use std::future::Future;

use futures_util::future::Either;
use opentelemetry::trace::{
    FutureExt as _, Status, TraceContextExt as _, Tracer as _, WithContext,
};
use opentelemetry::{Context, KeyValue};

pub use opentelemetry::trace::SpanKind;

/// A span in flight, ended when dropped; `None` when traces are off (then
/// every method does nothing and no closure given to one runs).
///
/// The span lives in a [`Context`]: [`Span::scope`] makes it the current
/// one for a future, so what that future starts (a model call, a tool)
/// becomes its child.
#[derive(Default)]
pub struct Span(Option<Context>);

impl Span {
    /// No span.
    pub const fn none() -> Self {
        Self(None)
    }

    /// A child of the current span (the future's, see [`Span::scope`]), or
    /// of none.
    pub fn start(
        name: impl FnOnce() -> Cow<'static, str>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        match super::tracer() {
            Some(_) => Self::under(&Context::current(), name(), kind, attributes()),
            None => Self(None),
        }
    }

    /// A span that starts a trace of its own.
    pub fn root(
        name: &'static str,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        match super::tracer() {
            Some(_) => Self::under(&Context::new(), name.into(), kind, attributes()),
            None => Self(None),
        }
    }

    /// A child of `parent` (a remote context: a `traceparent`).
    pub fn under(
        parent: &Context,
        name: Cow<'static, str>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Self {
        let Some(tracer) = super::tracer() else {
            return Self(None);
        };
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Self(Some(parent.with_span(span)))
    }

    /// Whether there is a span (traces are on).
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Adds attributes (made only when there is a span).
    pub fn record(&self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attributes(attributes());
        }
    }

    /// An event at this moment.
    pub fn event(&self, name: &'static str) {
        if let Some(cx) = &self.0 {
            cx.span().add_event(name, Vec::new());
        }
    }

    /// Marks the span failed: `error.type` and the status's description.
    pub fn fail(&self, error_type: impl FnOnce() -> String, description: impl FnOnce() -> String) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            span.set_attribute(KeyValue::new("error.type", error_type()));
            span.set_status(Status::error(description()));
        }
    }

    /// Runs `future` with this span current (its spans become children).
    pub fn scope<F: Future>(&self, future: F) -> Either<WithContext<F>, F> {
        match &self.0 {
            Some(cx) => Either::Left(future.with_context(cx.clone())),
            None => Either::Right(future),
        }
    }

    /// The span's context (for a `traceparent` sent on).
    pub fn context(&self) -> Option<&Context> {
        self.0.as_ref()
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }
}
