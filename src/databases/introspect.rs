//! Schema grounding (seed 003): a markdown snapshot of a user's database —
//! each table's columns with their types, and a few sample rows — for the
//! model's prompt, and the prompt's block that holds it ([`grounding`]).
//! Read through [`super::query::run`], so it is read-only and bounded like
//! any query.

use std::fmt::Write as _;

use serde_json::Value;

use super::query::{QueryLimits, SqlResult, Target, run};

/// Tables described at most.
const MAX_TABLES: usize = 50;
/// Sample rows per table.
const SAMPLE_ROWS: usize = 3;
/// Bytes of markdown at most.
const MAX_BYTES: usize = 32 * 1024;

/// `"name"` for SQL, quotes doubled.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "NULL".into(),
        other => other.to_string(),
    }
}

/// `(table as written in SQL, [(column, type)])` of every user table.
async fn tables(
    target: &Target,
    limits: QueryLimits,
) -> Result<Vec<(String, Vec<(String, String)>)>, String> {
    let meta = match target {
        Target::Sqlite(_) => {
            "SELECT m.name AS t, p.name AS c, p.type AS ty FROM sqlite_master m \
             JOIN pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' \
             ORDER BY m.name, p.cid"
        }
        Target::Postgres(_) => {
            "SELECT CASE WHEN table_schema = 'public' THEN quote_ident(table_name) \
             ELSE quote_ident(table_schema) || '.' || quote_ident(table_name) END AS t, \
             column_name AS c, data_type AS ty FROM information_schema.columns \
             WHERE table_schema NOT IN ('pg_catalog', 'information_schema') \
             ORDER BY table_schema, table_name, ordinal_position"
        }
    };
    let limits = QueryLimits {
        max_rows: 5000,
        max_bytes: 1 << 20,
        ..limits
    };
    let SqlResult { rows, .. } = run(target, meta, limits).await?;
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for row in rows {
        let [t, c, ty] = [&row[0], &row[1], &row[2]].map(text);
        let t = match target {
            Target::Sqlite(_) => quoted(&t),
            Target::Postgres(_) => t,
        };
        match out.last_mut() {
            Some((last, cols)) if *last == t => cols.push((c, ty)),
            _ => out.push((t, vec![(c, ty)])),
        }
    }
    Ok(out)
}

/// The markdown snapshot of the database at `target`.
///
/// # Errors
/// The database cannot be reached or read.
pub async fn snapshot(target: &Target, limits: QueryLimits) -> Result<String, String> {
    let all = tables(target, limits).await?;
    let mut md = String::new();
    if all.is_empty() {
        md.push_str("The database has no tables.\n");
    }
    for (i, (table, columns)) in all.iter().enumerate() {
        if i == MAX_TABLES || md.len() > MAX_BYTES {
            let _ = writeln!(md, "\n({} more tables not shown)", all.len() - i);
            break;
        }
        let _ = writeln!(md, "## {table}\n");
        md.push_str("| column | type |\n|---|---|\n");
        for (c, ty) in columns {
            let _ = writeln!(md, "| {c} | {ty} |");
        }
        let sample = format!("SELECT * FROM {table} LIMIT {SAMPLE_ROWS}");
        if let Ok(r) = run(target, &sample, limits).await
            && !r.rows.is_empty()
        {
            let _ = writeln!(md, "\nSample rows:\n\n| {} |", r.columns.join(" | "));
            let _ = writeln!(md, "|{}", "---|".repeat(r.columns.len()));
            for row in &r.rows {
                let cells: Vec<String> = row
                    .iter()
                    .map(|v| {
                        text(v)
                            .replace('|', "\\|")
                            .replace('\n', " ")
                            .chars()
                            .take(80)
                            .collect()
                    })
                    .collect();
                let _ = writeln!(md, "| {} |", cells.join(" | "));
            }
        }
        md.push('\n');
    }
    Ok(md)
}

/// Largest piece of a last result put in a prompt.
const GROUNDING_RESULT_BYTES: usize = 4096;

/// The block a chat's system prompt gets when a database is connected (seed
/// 003's `aigis_prompt`): the schema, and the last result, cut.
pub fn grounding(db_schema: &str, sql_result: Option<&str>) -> String {
    let mut block = format!(
        "\n\nThe user's connected database (call ask_database to query it, ask_analyst to chart the last result):\n{db_schema}"
    );
    if let Some(r) = sql_result {
        let mut end = r.len().min(GROUNDING_RESULT_BYTES);
        while !r.is_char_boundary(end) {
            end -= 1;
        }
        block.push_str("\nThe last query result:\n");
        block.push_str(&r[..end]);
        if end < r.len() {
            block.push_str(" […]");
        }
    }
    block
}
