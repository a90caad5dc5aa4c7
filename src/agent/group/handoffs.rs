//! A group's conditional handoffs, checked from its file: AG2's
//! `OnCondition` (a `transfer_to_<target>_<n>` tool per condition, offered
//! while its `available` expression holds) and `OnContextCondition` (an
//! expression over the context variables, checked before the member's
//! model is asked).

use super::super::definition::HandoffSpec;
use super::expr;
use crate::tools::{TO_USER, Tool};

/// The longest tool name vendors take.
const MAX_TOOL_NAME: usize = 64;

/// A member's conditional handoffs (AG2's `OnCondition` and
/// `OnContextCondition`), in the file's order.
#[derive(Default)]
pub struct Conditions {
    /// The `transfer_to_…` tools, each offered while its `available`
    /// expression holds.
    pub llm: Vec<(Tool, Option<expr::Expr>)>,
    /// Checked before the member's model is asked; the first that holds
    /// hands the turn over.
    pub context: Vec<ContextCondition>,
}

/// One `OnContextCondition`.
pub struct ContextCondition {
    /// Whom to: a member's name, `user`, `terminate` or `select`.
    pub to: String,
    pub expression: expr::Expr,
    pub available: Option<expr::Expr>,
}

/// Each member's conditional handoffs, checked: targets are members or
/// `user`, `stay`, `terminate`, `select`; expressions parse.
pub(super) fn conditions(spec: &HandoffSpec, names: &[String]) -> Result<Vec<Conditions>, String> {
    let mut all: Vec<Conditions> = names.iter().map(|_| Conditions::default()).collect();
    let index = |at: &str, name: &str| {
        names
            .iter()
            .position(|n| n == name)
            .ok_or(format!("{at}: `{name}` is not a member"))
    };
    // Whom a target names: a member's name (`stay`: the member's own), or
    // the keyword.
    let whom = |at: &str, from: usize, to: &str| -> Result<String, String> {
        Ok(match to {
            "stay" => names[from].clone(),
            TO_USER | "terminate" | "select" => to.to_owned(),
            _ if names.iter().any(|n| n == to) => to.to_owned(),
            _ => {
                return Err(format!(
                    "{at}.to: `{to}` is neither a member nor `{TO_USER}`, `stay`, `terminate` or `select`"
                ));
            }
        })
    };
    let parse = |at: String, source: &Option<String>| -> Result<Option<expr::Expr>, String> {
        source
            .as_deref()
            .map(|s| expr::Expr::parse(s).map_err(|e| format!("{at}: {e}")))
            .transpose()
    };
    for (member, list) in &spec.conditions {
        let at = format!("group.handoffs.conditions.{member}");
        let from = index(&at, member)?;
        for (i, c) in list.iter().enumerate() {
            let at = format!("{at}[{i}]");
            let to = whom(&at, from, &c.to)?;
            let name = format!("{}{}_{}", crate::tools::TRANSFER_PREFIX, c.to, i + 1);
            if name.len() > MAX_TOOL_NAME {
                return Err(format!(
                    "{at}.to: its tool `{name}` is over {MAX_TOOL_NAME} characters (a shorter member name)"
                ));
            }
            if c.condition.trim().is_empty() || c.condition.len() > 4096 {
                return Err(format!("{at}.condition: 1 to 4096 characters"));
            }
            let available = parse(format!("{at}.available"), &c.available)?;
            all[from]
                .llm
                .push((Tool::transfer(name, &c.condition, &to), available));
        }
    }
    for (member, list) in &spec.context_conditions {
        let at = format!("group.handoffs.context_conditions.{member}");
        let from = index(&at, member)?;
        for (i, c) in list.iter().enumerate() {
            let at = format!("{at}[{i}]");
            all[from].context.push(ContextCondition {
                to: whom(&at, from, &c.to)?,
                expression: parse(format!("{at}.expression"), &Some(c.expression.clone()))?
                    .expect("given"),
                available: parse(format!("{at}.available"), &c.available)?,
            });
        }
    }
    Ok(all)
}
