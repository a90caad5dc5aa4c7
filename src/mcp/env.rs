//! What a server gets of agentwire's environment: a stdio server's process
//! starts with a cleared environment plus a small default (never the model
//! API keys, the JWT secret or the master key agentwire holds), and a value
//! of `env`, `headers` or `envFile` may name one of agentwire's variables,
//! `${env:NAME}`, instead of holding a secret.

use std::collections::BTreeMap;

/// The variables of agentwire's environment a stdio server inherits (those
/// that are set), as the official SDKs' clients do.
#[cfg(not(windows))]
pub const INHERITED: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];
#[cfg(windows)]
pub const INHERITED: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
    "PROGRAMFILES",
];

/// The environment a stdio server starts with: the [`INHERITED`] variables
/// agentwire has (a shell function's value, `()…`, left out), then
/// `configured` over them.
pub(super) fn child_env(configured: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = INHERITED
        .iter()
        .filter_map(|name| {
            let value = std::env::var(name).ok()?;
            (!value.starts_with("()")).then(|| ((*name).to_owned(), value))
        })
        .filter(|(name, _)| !configured.contains_key(name))
        .collect();
    env.extend(configured.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// `value` with each `${env:NAME}` replaced by agentwire's variable `NAME`.
///
/// # Errors
/// `NAME` is not set (the message names it, never a value); `${input:…}`
/// (VS Code asks its user, agentwire asks no one) or any other `${…}`.
pub fn expand(value: &str) -> Result<String, String> {
    expand_with(value, |name| std::env::var(name).ok())
}

fn expand_with(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            return Err("an unclosed `${`: write `${env:NAME}` for a variable".into());
        };
        let inner = &rest[start + 2..start + len];
        match inner.split_once(':') {
            Some(("env", name))
                if !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                match lookup(name) {
                    Some(v) => out.push_str(&v),
                    None => {
                        return Err(format!(
                            "the environment variable `{name}` (named by `${{env:{name}}}`) is not \
                             set"
                        ));
                    }
                }
            }
            Some(("input", _)) => {
                return Err(format!(
                    "`${{{inner}}}`: VS Code's inputs ask its user for a value, and agentwire asks \
                     no one; put the value in an environment variable and write `${{env:NAME}}`"
                ));
            }
            _ => {
                return Err(format!(
                    "`${{{inner}}}`: only `${{env:NAME}}` (an environment variable of agentwire's) \
                     is replaced"
                ));
            }
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The variables of a dotenv file (VS Code's `envFile`): `NAME=value` lines,
/// an optional `export `, `#` comments, values in single or double quotes.
///
/// # Errors
/// An unreadable file, or a line that is not `NAME=value` (by its number).
pub fn read_env_file(path: &std::path::Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    parse_env_file(&text)
        .map_err(|line| format!("`{}` line {line}: not NAME=value", path.display()))
}

fn parse_env_file(text: &str) -> Result<BTreeMap<String, String>, usize> {
    let mut vars = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            return Err(i + 1);
        };
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(i + 1);
        }
        let value = value.trim();
        let unquoted = ['"', '\'']
            .iter()
            .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q))
            .unwrap_or(value);
        vars.insert(name.to_owned(), unquoted.to_owned());
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_owned())
    }

    #[test]
    fn env_names_are_replaced_and_other_forms_are_refused_by_name() {
        assert_eq!(
            expand_with("Bearer ${env:TOKEN}", lookup).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand_with("${env:TOKEN}:${env:TOKEN}", lookup).unwrap(),
            "s3cret:s3cret"
        );
        assert_eq!(expand_with("plain $TOKEN", lookup).unwrap(), "plain $TOKEN");
        let err = expand_with("${env:MISSING}", lookup).unwrap_err();
        assert!(
            err.contains("`MISSING`") && err.contains("not set"),
            "{err}"
        );
        let err = expand_with("${input:api-key}", lookup).unwrap_err();
        assert!(err.contains("VS Code's inputs"), "{err}");
        let err = expand_with("${workspaceFolder}/x", lookup).unwrap_err();
        assert!(err.contains("only `${env:NAME}`"), "{err}");
        assert!(
            expand_with("${env:TOKEN", lookup)
                .unwrap_err()
                .contains("unclosed")
        );
        assert!(expand_with("${env:}", lookup).is_err());
    }

    #[test]
    fn the_child_gets_the_defaults_and_its_own_env_over_them() {
        let configured = BTreeMap::from([("PATH".to_owned(), "/only/here".to_owned())]);
        let env = child_env(&configured);
        assert!(env.iter().all(|(k, _)| INHERITED.contains(&k.as_str())));
        assert_eq!(
            env.iter().filter(|(k, _)| k == "PATH").collect::<Vec<_>>(),
            [&("PATH".to_owned(), "/only/here".to_owned())]
        );
    }

    #[test]
    fn an_env_file_reads_as_dotenv() {
        let vars =
            parse_env_file("# keys\nA=1\nexport B = \"two words\"\nC='x=y'\n\nD=\n").unwrap();
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two words");
        assert_eq!(vars["C"], "x=y");
        assert_eq!(vars["D"], "");
        assert_eq!(parse_env_file("A=1\nnot a line\n"), Err(2));
    }
}
