//! The shape of the code, checked: the top-level modules depend on each other
//! only downwards (the order of `LAYERS`, as in `ARCHITECTURE.md`), no two
//! source files import each other (directly or round a circle), and no source
//! file grows past `MAX_LINES`.
//!
//! The import graph is read from the text: every `crate::…` and `super::…`
//! path, and in a `mod.rs` every use of a child module other than
//! re-exporting it (`pub use child::X` is a facade, not a use). Test files and
//! `#[cfg(test)]` modules are left out: a test may use anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules, lowest first: each may use only those before it.
const LAYERS: &[&str] = &[
    "config",
    "metrics",
    "telemetry",
    "protocol",
    "store",
    "databases",
    "testing",
    "llm",
    "mcp",
    "upstream",
    "link",
    "tools",
    "templates",
    "workflows",
    "agent",
    "session",
    "schedules",
    "webhooks",
    "wire",
    "auth",
    "http",
    "", // lib.rs
];

/// Lines a source file may have; a longer one needs splitting (or a reason
/// here, next to an exemption).
const MAX_LINES: usize = 500;

struct Source {
    /// `src/session/actor/run.rs` → `["session", "actor", "run"]`.
    module: Vec<String>,
    text: String,
    is_facade: bool,
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every library source file (not the binaries), by path relative to `src/`.
fn sources() -> BTreeMap<String, Source> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, Source>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                if rel != "bin" {
                    walk(&path, base, out);
                }
                continue;
            }
            if !rel.ends_with(".rs") || rel == "main.rs" {
                continue;
            }
            let mut module: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_owned)
                .collect();
            let is_facade = matches!(module.last().map(String::as_str), Some("mod" | "lib"));
            if is_facade {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(
                rel,
                Source {
                    module,
                    text,
                    is_facade,
                },
            );
        }
    }
    let mut out = BTreeMap::new();
    walk(&src(), &src(), &mut out);
    out
}

fn is_test_file(rel: &str) -> bool {
    rel.ends_with("tests.rs") || rel.split('/').any(|part| part == "tests")
}

/// The file that defines module path `path` (its longest prefix that is a file).
fn file_of(files: &BTreeMap<String, Source>, path: &[String]) -> Option<String> {
    (0..=path.len()).rev().find_map(|n| {
        let prefix = path[..n].join("/");
        let candidates = if n == 0 {
            vec!["lib.rs".to_owned()]
        } else {
            vec![format!("{prefix}.rs"), format!("{prefix}/mod.rs")]
        };
        candidates.into_iter().find(|c| files.contains_key(c))
    })
}

/// The text without comments, `#[cfg(test)] mod tests { … }`, and (in a
/// facade) its re-exports of its own children.
fn code(source: &Source) -> String {
    let mut out = String::new();
    let mut in_reexport = false;
    let mut lines = source.text.lines().peekable();
    while let Some(line) = lines.next() {
        let line = line.split("//").next().unwrap_or_default();
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("mod tests {"))
        {
            break;
        }
        if source.is_facade {
            let starts = ["pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|p| trimmed.strip_prefix(p));
            if let Some(rest) = starts
                && !rest.starts_with("crate::")
                && !rest.starts_with("super::")
            {
                in_reexport = true;
            }
            if in_reexport {
                in_reexport = !line.contains(';');
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that follow each `head::` in `code` (`crate::a::B` → `[a, B]`;
/// `super::{a, b::C}` → `[a]`, `[b, C]`), not counting `pub(in crate::…)`.
fn paths_after(code: &str, head: &str) -> Vec<Vec<String>> {
    let needle = format!("{head}::");
    let mut out = Vec::new();
    for (at, _) in code.match_indices(&needle) {
        let before = &code[..at];
        if before.ends_with("in ")
            || before
                .chars()
                .next_back()
                .is_some_and(|c| ident_char(c) || c == ':')
        {
            continue;
        }
        expand(&code[at + needle.len()..], Vec::new(), &mut out);
    }
    out
}

/// The paths of one use tree starting at `rest`, each after `prefix`.
fn expand(rest: &str, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let (mut depth, mut start) = (0usize, 0usize);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand(&group[start..i], prefix.clone(), out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&group[start..i], prefix.clone(), out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let ident: String = rest.chars().take_while(|c| ident_char(*c)).collect();
    if ident.is_empty() {
        if !prefix.is_empty() {
            out.push(prefix);
        }
        return;
    }
    let after = &rest[ident.len()..];
    prefix.push(ident);
    match after.strip_prefix("::") {
        Some(more) => expand(more, prefix, out),
        None => out.push(prefix),
    }
}

/// File → the files it imports.
fn import_graph(files: &BTreeMap<String, Source>) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for (rel, source) in files {
        if is_test_file(rel) {
            continue;
        }
        let code = code(source);
        let mut targets = BTreeSet::new();
        for path in paths_after(&code, "crate") {
            targets.extend(file_of(files, &path));
        }
        for path in paths_after(&code, "super") {
            let mut base = source.module.clone();
            base.pop();
            let mut rest = path.as_slice();
            while rest.first().is_some_and(|p| p == "super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            targets.extend(file_of(files, &base));
        }
        if source.is_facade {
            for line in code.lines() {
                let Some(child) = line
                    .trim_start()
                    .trim_start_matches("pub ")
                    .trim_start_matches("pub(crate) ")
                    .strip_prefix("mod ")
                    .and_then(|r| r.strip_suffix(';'))
                else {
                    continue;
                };
                let used = paths_after(&code, child).into_iter().next().is_some();
                if used {
                    let mut path = source.module.clone();
                    path.push(child.to_owned());
                    targets.extend(file_of(files, &path));
                }
            }
        }
        targets.remove(rel);
        graph.insert(rel.clone(), targets);
    }
    graph
}

/// A circle through `start`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn dfs(
        graph: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if dfs(graph, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    dfs(graph, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn no_source_file_imports_round_a_circle() {
    let files = sources();
    let graph = import_graph(&files);
    // The reader must see the imports it claims to: a known edge of each kind.
    let edge = |from: &str, to: &str| graph[from].contains(to);
    assert!(edge("session/actor/run.rs", "link/mod.rs"), "crate:: paths");
    assert!(
        edge("tools/pipeline.rs", "tools/record.rs"),
        "super:: paths"
    );
    assert!(edge("tools/tool.rs", "tools/ui.rs"), "super::child paths");
    assert!(
        edge("http/mod.rs", "http/ops.rs"),
        "a facade's own use of a child"
    );
    assert!(
        !edge("tools/mod.rs", "tools/tool.rs"),
        "re-exports are not uses"
    );
    let circles: Vec<_> = graph
        .keys()
        .filter_map(|file| circle(&graph, file))
        .map(|c| c.join(" → "))
        .collect();
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn top_level_modules_depend_only_downwards() {
    let files = sources();
    let graph = import_graph(&files);
    let layer = |rel: &str| {
        let top = files[rel].module.first().map_or("", String::as_str);
        LAYERS
            .iter()
            .position(|l| *l == top)
            .unwrap_or_else(|| panic!("{rel}: module `{top}` is not in LAYERS"))
    };
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            if layer(to) > layer(from) {
                upward.push(format!("{from} → {to}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_source_file_is_too_long() {
    let long: Vec<_> = sources()
        .iter()
        .filter(|(rel, _)| !is_test_file(rel))
        .map(|(rel, s)| (rel.clone(), s.text.lines().count()))
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(rel, n)| format!("{rel}: {n} lines"))
        .collect();
    assert!(long.is_empty(), "split these files:\n{}", long.join("\n"));
}
