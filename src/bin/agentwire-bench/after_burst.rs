//! `after-burst`: what the background work a burst leaves behind (the
//! journal's folds, WAL checkpoints on SQLite; autovacuum and checkpoints on
//! PostgreSQL) does to live streams. One `stream` burst, then paced runs
//! back to back on the same server, each reported on its own.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::report::load_1m;
use crate::scenarios::{Target, stream};

/// What one `after-burst` run asks for.
pub struct Plan {
    pub burst_chats: usize,
    pub burst_n: u64,
    pub chats: usize,
    pub n: u64,
    pub runs: usize,
}

/// Each paced run must stay under these (issue 33, item 15).
const P99_MS: f64 = 10.0;
const P999_MS: f64 = 25.0;

/// The burst, then `plan.runs` paced runs right after it, with the
/// machine's 1-minute load average read before each.
pub async fn run(t: &Target, plan: &Plan) -> anyhow::Result<Value> {
    let load_before = load_1m();
    let burst = stream(t, plan.burst_chats, plan.burst_n, false).await?;
    let mut runs = Vec::with_capacity(plan.runs);
    for _ in 0..plan.runs {
        let load = load_1m();
        let mut figures = stream(t, plan.chats, plan.n, true).await?;
        figures["load_1m"] = json!(load);
        runs.push(figures);
    }
    let worst = |q: &str| {
        runs.iter()
            .filter_map(|r| r["latency_ms"][q].as_f64())
            .reduce(f64::max)
    };
    Ok(json!({
        "load_1m": load_before,
        "burst": {
            "envelopes_per_s": burst["envelopes_per_s"],
            "latency_ms": burst["latency_ms"],
        },
        "runs": runs,
        "worst_p99_ms": worst("p99"),
        "worst_p999_ms": worst("p999"),
    }))
}

/// Whether every paced run of an `after-burst` line met the target.
pub fn met(r: &Value) -> Option<bool> {
    let runs = r["figures"]["runs"].as_array()?;
    let each = |r: &Value| {
        let l = &r["latency_ms"];
        Some(l["p99"].as_f64()? <= P99_MS && l["p999"].as_f64()? <= P999_MS)
    };
    runs.iter()
        .map(each)
        .try_fold(!runs.is_empty(), |all, ok| Some(all && ok?))
}

/// The target's line in the Targets table, for one server's run.
pub fn target(runs: &[Value], server: &str, backend: &str) -> (String, String, &'static str) {
    let what = format!(
        "after a `burst:` of 100 × 2,000, five paced runs of 50 chats in a row, each p99 ≤ \
         {P99_MS} ms and p99.9 ≤ {P999_MS} ms, {backend}"
    );
    // Only the sizes count for the target (the table shows any).
    let full = |p: &Value| {
        (
            p["burst_chats"].as_u64(),
            p["burst_n"].as_u64(),
            p["chats"].as_u64(),
        ) == (Some(100), Some(2000), Some(50))
            && p["runs"].as_u64() >= Some(5)
    };
    let series: Vec<&Value> = runs
        .iter()
        .filter(|r| {
            r["scenario"] == "after-burst" && r["params"]["server"] == server && full(&r["params"])
        })
        .collect();
    if series.is_empty() {
        return (what, "–".into(), "not measured");
    }
    let worst = |q: &str| {
        series
            .iter()
            .filter_map(|r| r["figures"][q].as_f64())
            .reduce(f64::max)
            .map_or("–".into(), |v| format!("{v:.1}"))
    };
    let ok = series.iter().filter(|r| met(r) == Some(true)).count();
    let shown = format!(
        "{ok} of {} series met; worst p99 {} ms, p99.9 {} ms",
        series.len(),
        worst("worst_p99_ms"),
        worst("worst_p999_ms")
    );
    (
        what,
        shown,
        if ok == series.len() { "yes" } else { "**no**" },
    )
}

/// A latency in ms, one decimal.
fn ms(v: &Value) -> String {
    v.as_f64().map_or("–".into(), |v| format!("{v:.1}"))
}

/// The Markdown section: a row per server, a cell per paced run.
pub fn section(runs: &[Value], md: &mut String) {
    let lines: Vec<&Value> = runs
        .iter()
        .filter(|r| r["scenario"] == "after-burst")
        .collect();
    let Some(most) = lines
        .iter()
        .filter_map(|r| r["figures"]["runs"].as_array().map(Vec::len))
        .max()
    else {
        return;
    };
    let _ = writeln!(
        md,
        "\n## `after-burst`: paced runs right after a burst\n\n\
         One `stream` burst on a fresh server, then paced runs of `slow:` chats \
         back to back, while the store does what the burst left (SQLite: the \
         journal's folds and the WAL's checkpoints; PostgreSQL: its own \
         checkpoints and autovacuum). Each cell: latency p50 / p99 / p99.9 ms, \
         then the machine's 1-minute load average when the run started \
         (other work on the machine shows there).\n"
    );
    let _ = write!(md, "| server | burst, paced | load before |");
    for i in 1..=most {
        let _ = write!(md, " run {i} |");
    }
    let _ = write!(
        md,
        " every run p99 ≤ {P99_MS} and p99.9 ≤ {P999_MS} |\n|---|---|---|"
    );
    for _ in 0..=most {
        let _ = write!(md, "---|");
    }
    let _ = writeln!(md);
    for r in lines {
        let (p, f) = (&r["params"], &r["figures"]);
        let _ = write!(
            md,
            "| {} | {} × {}, {} × {} | {} |",
            p["server"].as_str().unwrap_or("?"),
            p["burst_chats"],
            p["burst_n"],
            p["chats"],
            p["n"],
            f["load_1m"]
        );
        let each = f["runs"].as_array().map_or(&[][..], Vec::as_slice);
        for i in 0..most {
            match each.get(i) {
                Some(run) => {
                    let l = &run["latency_ms"];
                    let _ = write!(
                        md,
                        " {} / {} / {} (load {}) |",
                        ms(&l["p50"]),
                        ms(&l["p99"]),
                        ms(&l["p999"]),
                        run["load_1m"]
                    );
                }
                None => {
                    let _ = write!(md, " – |");
                }
            }
        }
        let verdict = match met(r) {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        let _ = writeln!(md, " {verdict} |");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(p99s: &[(f64, f64)]) -> Value {
        let runs: Vec<Value> = p99s
            .iter()
            .map(|(p99, p999)| {
                json!({"latency_ms": {"p50": 1.0, "p99": p99, "p999": p999}, "load_1m": 0.5})
            })
            .collect();
        let worst = |i: usize| p99s.iter().map(|p| [p.0, p.1][i]).reduce(f64::max);
        json!({"scenario": "after-burst",
               "params": {"server": "agentwire", "burst_chats": 100, "burst_n": 2000, "chats": 50, "n": 150, "runs": p99s.len().max(5)},
               "figures": {"load_1m": 0.4, "runs": runs, "worst_p99_ms": worst(0), "worst_p999_ms": worst(1)}})
    }

    #[test]
    fn every_run_must_meet_both_bounds() {
        assert_eq!(met(&line(&[(5.0, 12.0), (9.9, 24.0)])), Some(true));
        assert_eq!(met(&line(&[(5.0, 12.0), (10.5, 20.0)])), Some(false));
        assert_eq!(met(&line(&[(5.0, 30.0)])), Some(false));
        assert_eq!(met(&line(&[])), Some(false));
        assert_eq!(met(&json!({"figures": {}})), None);
    }

    #[test]
    fn the_section_has_a_cell_per_run() {
        let mut md = String::new();
        section(&[line(&[(5.0, 12.0), (30.0, 40.0)])], &mut md);
        assert!(
            md.contains(
                "| agentwire | 100 × 2000, 50 × 150 | 0.4 | 1.0 / 5.0 / 12.0 (load 0.5) | \
                 1.0 / 30.0 / 40.0 (load 0.5) | **no** |"
            ),
            "{md}"
        );
        let (_, shown, verdict) = target(&[line(&[(5.0, 12.0)])], "agentwire", "SQLite");
        let one = "1 of 1 series met; worst p99 5.0 ms, p99.9 12.0 ms";
        assert_eq!((shown.as_str(), verdict), (one, "yes"));
        let two = [line(&[(5.0, 12.0)]), line(&[(11.0, 12.0)])];
        let (_, shown, verdict) = target(&two, "agentwire", "SQLite");
        let half = "1 of 2 series met; worst p99 11.0 ms, p99.9 12.0 ms";
        assert_eq!((shown.as_str(), verdict), (half, "**no**"));
    }
}
