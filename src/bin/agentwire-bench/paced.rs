//! The paced sweep of `docs/benchmarks.md`: chats of `slow:` (a word every
//! 20 ms, 50 envelopes/s each) from a few dozen to thousands, per server, as a
//! table and as an SVG chart (latency against offered rate).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

/// Envelopes/s one paced chat offers (a word every 20 ms).
const PER_CHAT: f64 = 50.0;

/// The servers in the order they are drawn, with their colour.
const SERVERS: [(&str, &str); 4] = [
    ("agentwire", "#1f6feb"),
    ("agentwire-postgres", "#8957e5"),
    ("raw", "#6e7781"),
    ("socketio", "#d1242f"),
];

/// One paced run: offered envelopes/s, delivered/s, p50 and p99 ms.
#[derive(Debug, Clone, Copy)]
struct Point {
    chats: u64,
    offered: f64,
    delivered: f64,
    p50: f64,
    p99: f64,
}

/// The paced runs of each server, by number of chats.
fn sweep(runs: &[Value]) -> BTreeMap<&str, Vec<Point>> {
    let mut by: BTreeMap<&str, Vec<Point>> = BTreeMap::new();
    for r in runs
        .iter()
        .filter(|r| r["scenario"] == "stream" && r["params"]["paced"] == true)
    {
        let (p, f) = (&r["params"], &r["figures"]);
        let (Some(server), Some(chats)) = (p["server"].as_str(), p["chats"].as_u64()) else {
            continue;
        };
        let point = Point {
            chats,
            offered: chats as f64 * PER_CHAT,
            delivered: f["envelopes_per_s"].as_f64().unwrap_or(0.0),
            p50: f["latency_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
            p99: f["latency_ms"]["p99"].as_f64().unwrap_or(f64::NAN),
        };
        by.entry(server).or_default().push(point);
    }
    for points in by.values_mut() {
        points.sort_by_key(|p| p.chats);
    }
    by
}

/// The p99 of `server`'s paced run with exactly `chats` chats.
pub fn p99_at(runs: &[Value], server: &str, chats: u64) -> Option<f64> {
    sweep(runs)
        .get(server)?
        .iter()
        .find(|p| p.chats == chats)
        .map(|p| p.p99)
}

/// The Markdown section: one row per chat count, one column per server.
pub fn section(runs: &[Value], svg_name: Option<&str>, md: &mut String) {
    let by = sweep(runs);
    if by.is_empty() {
        return;
    }
    let servers: Vec<&str> = SERVERS
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| by.contains_key(s))
        .collect();
    let _ = writeln!(
        md,
        "\n## Paced streams: chats of `slow: 150` (a word every 20 ms)\n\n\
         The chats start spread evenly over one word's interval (as independent \
         agents would), so the offered rate is steady. \
         Each cell: latency p50 / p99 in ms (`ts` to receipt), then the share of \
         the offered envelopes/s delivered while the run lasted (below 100 %: \
         the server, or the load generator on the same cores, fell behind).\n"
    );
    if let Some(name) = svg_name {
        let _ = writeln!(md, "![latency against offered rate]({name})\n");
    }
    let _ = write!(md, "| chats | offered/s |");
    for s in &servers {
        let _ = write!(md, " {s} |");
    }
    let _ = write!(md, "\n|---|---|");
    for _ in &servers {
        let _ = write!(md, "---|");
    }
    let _ = writeln!(md);
    let chats: std::collections::BTreeSet<u64> = by.values().flatten().map(|p| p.chats).collect();
    for c in chats {
        let _ = write!(md, "| {c} | {:.0} |", c as f64 * PER_CHAT);
        for s in &servers {
            match by[s].iter().find(|p| p.chats == c) {
                Some(p) => {
                    let _ = write!(
                        md,
                        " {:.1} / {:.1} ({:.0} %) |",
                        p.p50,
                        p.p99,
                        100.0 * p.delivered / p.offered
                    );
                }
                None => {
                    let _ = write!(md, " – |");
                }
            }
        }
        let _ = writeln!(md);
    }
}

/// The chart: p99 (solid) and p50 (dashed) against offered envelopes/s, both
/// axes logarithmic, one colour per server.
pub fn svg(runs: &[Value]) -> Option<String> {
    let by = sweep(runs);
    let all: Vec<Point> = by.values().flatten().copied().collect();
    if all.is_empty() {
        return None;
    }
    let (w, h, left, right, top, bottom) = (720.0, 420.0, 70.0, 170.0, 30.0, 50.0);
    let lat = |p: &Point| [p.p50, p.p99];
    let ms: Vec<f64> = all.iter().flat_map(lat).filter(|v| *v > 0.0).collect();
    let (x_lo, x_hi) = decades(all.iter().map(|p| p.offered));
    let (y_lo, y_hi) = decades(ms.iter().copied());
    let x = |v: f64| left + (v.log10() - x_lo) / (x_hi - x_lo) * (w - left - right);
    let y = |v: f64| {
        h - bottom - (v.max(10f64.powf(y_lo)).log10() - y_lo) / (y_hi - y_lo) * (h - top - bottom)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="18" font-size="14">Paced chats (a word every 20 ms): latency against offered envelopes/s</text>"#
    );
    for d in (x_lo as i32)..=(x_hi as i32) {
        let v = 10f64.powi(d);
        let px = x(v);
        let _ = writeln!(
            s,
            r##"<line x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            h - bottom,
            h - bottom + 16.0,
            label(v)
        );
    }
    for d in (y_lo as i32)..=(y_hi as i32) {
        let v = 10f64.powi(d);
        let py = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{} ms</text>"##,
            w - right,
            left - 6.0,
            py + 4.0,
            label(v)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">offered envelopes/s (chats × 50)</text>"#,
        left + (w - left - right) / 2.0,
        h - 12.0
    );
    let mut legend_y = top + 10.0;
    for (server, colour) in SERVERS {
        let Some(points) = by.get(server) else {
            continue;
        };
        for (i, dash) in [(1, ""), (0, r#" stroke-dasharray="5,4""#)] {
            let path: Vec<String> = points
                .iter()
                .filter(|p| lat(p)[i] > 0.0)
                .map(|p| format!("{:.1},{:.1}", x(p.offered), y(lat(p)[i])))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>"#,
                path.join(" ")
            );
            for p in points.iter().filter(|p| lat(p)[i] > 0.0) {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#,
                    x(p.offered),
                    y(lat(p)[i])
                );
            }
        }
        let lx = w - right + 14.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{legend_y}" x2="{:.1}" y2="{legend_y}" stroke="{colour}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{server}</text>"#,
            lx + 22.0,
            lx + 28.0,
            legend_y + 4.0
        );
        legend_y += 20.0;
    }
    let lx = w - right + 14.0;
    let _ = writeln!(
        s,
        r##"<text x="{lx}" y="{:.1}" fill="#555">solid: p99</text><text x="{lx}" y="{:.1}" fill="#555">dashed: p50</text>"##,
        legend_y + 10.0,
        legend_y + 26.0
    );
    s.push_str("</svg>\n");
    Some(s)
}

/// The whole decades (as log10) around `values`.
fn decades(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (0.0, 1.0);
    }
    let (lo, hi) = (lo.log10().floor(), hi.log10().ceil());
    (lo, if hi > lo { hi } else { lo + 1.0 })
}

fn label(v: f64) -> String {
    if v >= 1000.0 {
        format!("{}k", v / 1000.0)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(server: &str, chats: u64, p50: f64, p99: f64) -> Value {
        json!({"scenario": "stream",
               "params": {"server": server, "chats": chats, "n": 150, "paced": true},
               "figures": {"envelopes_per_s": chats as f64 * 45.0,
                           "latency_ms": {"p50": p50, "p99": p99}}})
    }

    #[test]
    fn the_sweep_is_a_table_and_a_chart() {
        let runs = vec![
            run("agentwire", 500, 2.0, 9.0),
            run("agentwire", 50, 0.9, 3.0),
            run("raw", 50, 0.5, 1.0),
            run("socketio", 500, 4.0, 40.0),
        ];
        let mut md = String::new();
        section(&runs, Some("paced.svg"), &mut md);
        assert!(md.contains("![latency against offered rate](paced.svg)"));
        assert!(
            md.contains("| chats | offered/s | agentwire | raw | socketio |"),
            "{md}"
        );
        assert!(
            md.contains("| 50 | 2500 | 0.9 / 3.0 (90 %) | 0.5 / 1.0 (90 %) | – |"),
            "{md}"
        );
        assert!(
            md.contains("| 500 | 25000 | 2.0 / 9.0 (90 %) | – | 4.0 / 40.0 (90 %) |"),
            "{md}"
        );
        assert_eq!(p99_at(&runs, "agentwire", 500), Some(9.0));
        assert_eq!(p99_at(&runs, "agentwire", 1000), None);

        let chart = svg(&runs).unwrap();
        assert!(chart.starts_with("<svg") && chart.ends_with("</svg>\n"));
        // Two lines (p50, p99) per server with runs, and one point per run and line.
        assert_eq!(chart.matches("<polyline").count(), 6);
        assert_eq!(chart.matches("<circle").count(), 8);
        assert!(chart.contains(">1k</text>") && chart.contains(">10k</text>"));
        assert!(svg(&[]).is_none());
    }
}
