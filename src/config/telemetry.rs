//! Traces (`[telemetry]` in `agentwire.toml`, and the standard `OTEL_*`
//! variables): whether they are on, where they go, what they hold.

use serde::Deserialize;

/// A refusal: the key at fault and why.
type Refused = (&'static str, String);

/// `[telemetry]` as written; every key optional.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TelemetryFile {
    /// Export traces (the `OTEL_*` variables can turn them on too).
    pub enabled: Option<bool>,
    /// The collector's base URL (as `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub endpoint: Option<String>,
    /// `http/protobuf` or `grpc` (as `OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Option<String>,
    /// `service.name` (as `OTEL_SERVICE_NAME`) [default: agentwire].
    pub service_name: Option<String>,
    /// Message contents, tool arguments and results on spans (never a
    /// secret answer) [default: false].
    pub capture_content: Option<bool>,
    /// The share of traces kept, 0 to 1 (as `OTEL_TRACES_SAMPLER_ARG`
    /// with `parentbased_traceidratio`) [default: the SDK's, all].
    pub sample_ratio: Option<f64>,
    /// The share of store commits that get a span, 0 to 1 [default: 0.01].
    pub commit_sample_ratio: Option<f64>,
}

/// How spans are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OtlpProtocol {
    #[default]
    HttpProtobuf,
    Grpc,
}

impl OtlpProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HttpProtobuf => "http/protobuf",
            Self::Grpc => "grpc",
        }
    }
}

/// Traces, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Telemetry {
    pub enabled: bool,
    /// The collector's base URL; `None`: the `OTEL_*` variables' or the
    /// exporter's default (localhost).
    pub endpoint: Option<String>,
    pub protocol: OtlpProtocol,
    pub service_name: String,
    pub capture_content: bool,
    pub sample_ratio: Option<f64>,
    pub commit_sample_ratio: f64,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self {
            enabled: false,
            endpoint: None,
            protocol: OtlpProtocol::HttpProtobuf,
            service_name: "agentwire".to_owned(),
            capture_content: false,
            sample_ratio: None,
            commit_sample_ratio: 0.01,
        }
    }
}

/// `[telemetry]` and the environment (`env` reads one variable), checked.
///
/// On when `enabled = true`, or, without `enabled`, when
/// `OTEL_TRACES_EXPORTER` is `otlp` or an OTLP endpoint variable is set;
/// off whenever `OTEL_SDK_DISABLED` is `true` or `OTEL_TRACES_EXPORTER` is
/// `none`.
pub(super) fn resolve(
    file: Option<&TelemetryFile>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Telemetry, Refused> {
    let file = file.cloned().unwrap_or_default();
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let exporter = set("OTEL_TRACES_EXPORTER").map(|v| v.trim().to_ascii_lowercase());
    let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || exporter.as_deref() == Some("none");
    let asked = exporter.as_deref() == Some("otlp")
        || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    if let Some(other) = exporter
        .as_deref()
        .filter(|e| !matches!(*e, "otlp" | "none"))
    {
        return Err((
            "telemetry",
            format!("OTEL_TRACES_EXPORTER `{other}`: only `otlp` and `none` are supported"),
        ));
    }
    let protocol = match file
        .protocol
        .or_else(|| set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
        .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .as_deref()
        .map(str::trim)
    {
        None | Some("http/protobuf") => OtlpProtocol::HttpProtobuf,
        Some("grpc") => OtlpProtocol::Grpc,
        Some(other) => {
            return Err((
                "telemetry.protocol",
                format!("`{other}`: `http/protobuf` or `grpc`"),
            ));
        }
    };
    if let Some(url) = &file.endpoint
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err((
            "telemetry.endpoint",
            format!("`{url}`: an http:// or https:// URL"),
        ));
    }
    let ratio = |key: &'static str, r: Option<f64>| match r {
        Some(r) if !(0.0..=1.0).contains(&r) => Err((key, "a number from 0 to 1".to_owned())),
        r => Ok(r),
    };
    Ok(Telemetry {
        enabled: !disabled && file.enabled.unwrap_or(asked),
        endpoint: file.endpoint,
        protocol,
        service_name: file
            .service_name
            .or_else(|| set("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "agentwire".to_owned()),
        capture_content: file.capture_content.unwrap_or(false),
        sample_ratio: ratio("telemetry.sample_ratio", file.sample_ratio)?,
        commit_sample_ratio: ratio("telemetry.commit_sample_ratio", file.commit_sample_ratio)?
            .unwrap_or(0.01),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn off_unless_asked_and_the_environment_can_ask_or_forbid() {
        assert!(!resolve(None, with(&[])).unwrap().enabled);
        let endpoint = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")];
        assert!(resolve(None, with(&endpoint)).unwrap().enabled);
        assert!(
            resolve(None, with(&[("OTEL_TRACES_EXPORTER", "otlp")]))
                .unwrap()
                .enabled
        );
        let on = TelemetryFile {
            enabled: Some(true),
            ..Default::default()
        };
        assert!(resolve(Some(&on), with(&[])).unwrap().enabled);
        assert!(
            !resolve(Some(&on), with(&[("OTEL_SDK_DISABLED", "true")]))
                .unwrap()
                .enabled
        );
        let off = TelemetryFile {
            enabled: Some(false),
            ..Default::default()
        };
        assert!(!resolve(Some(&off), with(&endpoint)).unwrap().enabled);
        assert_eq!(
            resolve(None, with(&[("OTEL_TRACES_EXPORTER", "zipkin")]))
                .unwrap_err()
                .0,
            "telemetry"
        );
    }

    #[test]
    fn protocol_endpoint_and_ratios_are_checked() {
        let grpc = with(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(resolve(None, grpc).unwrap().protocol, OtlpProtocol::Grpc);
        let file = |f: TelemetryFile| resolve(Some(&f), with(&[]));
        let bad = file(TelemetryFile {
            protocol: Some("http/json".into()),
            ..Default::default()
        });
        assert_eq!(bad.unwrap_err().0, "telemetry.protocol");
        let bad = file(TelemetryFile {
            endpoint: Some("collector:4317".into()),
            ..Default::default()
        });
        assert_eq!(bad.unwrap_err().0, "telemetry.endpoint");
        let bad = file(TelemetryFile {
            sample_ratio: Some(1.5),
            ..Default::default()
        });
        assert_eq!(bad.unwrap_err().0, "telemetry.sample_ratio");
        let named = resolve(None, with(&[("OTEL_SERVICE_NAME", "chat-backend")])).unwrap();
        assert_eq!(named.service_name, "chat-backend");
        assert_eq!(named.commit_sample_ratio, 0.01);
    }
}
