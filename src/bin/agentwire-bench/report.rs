//! Figures and how they are printed: a JSON line on stdout per run (machine,
//! commit, scenario, parameters, figures) and a table on stderr.

use std::io::Write as _;
use std::time::Instant;

use serde_json::{Map, Value, json};

/// Latency samples in milliseconds.
#[derive(Debug, Default, Clone)]
pub struct Latencies(Vec<f64>);

impl Latencies {
    pub fn push(&mut self, ms: f64) {
        self.0.push(ms);
    }

    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    /// p50, p99, p99.9 and max, in ms (null when empty).
    pub fn summary(&mut self) -> Value {
        if self.0.is_empty() {
            return json!({"p50": null, "p99": null, "p999": null, "max": null});
        }
        self.0.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let i = ((self.0.len() as f64 - 1.0) * p).round() as usize;
            round(self.0[i])
        };
        json!({"p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": round(*self.0.last().unwrap())})
    }
}

pub fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The machine's 1-minute load average (`/proc/loadavg`): on a shared
/// machine, what else ran beside the benchmark.
pub fn load_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The machine the run is on.
pub fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split(':').nth(1))
        .map(str::trim)
        .unwrap_or("unknown");
    json!({
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "cpu": model,
        "os": std::env::consts::OS,
    })
}

/// The commit of the working tree (or `$AGENTWIRE_COMMIT`).
pub fn commit() -> String {
    if let Ok(c) = std::env::var("AGENTWIRE_COMMIT") {
        return c;
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        )
}

/// CPU seconds (user + system) a process has used so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((utime + stime) / ticks)
}

/// A process's resident memory, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A progress line on stderr, at most every half second.
pub struct Progress {
    last: Instant,
    quiet: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Self {
        Self {
            last: Instant::now(),
            quiet,
        }
    }

    pub fn tick(&mut self, what: impl FnOnce() -> String) {
        if !self.quiet && self.last.elapsed().as_millis() >= 500 {
            self.last = Instant::now();
            eprint!("\r\x1b[K{}", what());
            let _ = std::io::stderr().flush();
        }
    }

    pub fn done(&self) {
        if !self.quiet {
            eprint!("\r\x1b[K");
        }
    }
}

/// Prints a run: the JSON line on stdout, the table on stderr.
pub fn emit(scenario: &str, params: Value, figures: Value) {
    let line = json!({
        "tool": "agentwire-bench",
        "machine": machine(),
        "commit": commit(),
        "at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        // What else ran on the machine meanwhile, read as the run ends.
        "load_1m_after": load_1m(),
        "scenario": scenario,
        "params": params,
        "figures": figures,
    });
    println!("{line}");
    let mut rows = Vec::new();
    flatten("", &line["params"], &mut rows);
    let params_len = rows.len();
    flatten("", &line["figures"], &mut rows);
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    eprintln!("── {scenario} ──");
    for (i, (k, v)) in rows.iter().enumerate() {
        if i == params_len {
            eprintln!("  {:-<width$}", "", width = width + 12);
        }
        eprintln!("  {k:<width$}  {v}");
    }
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) => flatten_map(prefix, map, out),
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}

fn flatten_map(prefix: &str, map: &Map<String, Value>, out: &mut Vec<(String, String)>) {
    for (k, v) in map {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        flatten(&key, v, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut l = Latencies::default();
        for i in 1..=1000 {
            l.push(f64::from(i));
        }
        let s = l.summary();
        assert_eq!(s["p50"], 501.0);
        assert_eq!(s["p99"], 990.0);
        assert_eq!(s["p999"], 999.0);
        assert_eq!(s["max"], 1000.0);
        assert!(Latencies::default().summary()["p50"].is_null());
    }

    #[test]
    fn this_process_is_measurable() {
        let me = std::process::id();
        assert!(rss_kib(me).unwrap() > 0);
        assert!(cpu_seconds(me).unwrap() >= 0.0);
    }
}
