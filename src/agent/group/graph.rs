//! Who may speak after whom (AG2's `allowed_or_disallowed_speaker_transitions`,
//! `speaker_transitions_type` and `allow_repeat_speaker`): the members every
//! method picks from, after a given speaker.
//!
//! As AG2 builds it, but for the default: with neither set, anyone may
//! follow anyone and the method decides about the last speaker (`random`
//! draws anyone else — agentwire's default; AG2 reads unset as
//! `allow_repeat_speaker: true`); with
//! `allow_repeat_speaker`, anyone may follow anyone else, and a member
//! itself only if allowed; with the transitions, exactly what they list
//! (`disallowed`: everyone but those), a member they do not list as a
//! source being a dead end — the run ends after it.

use std::collections::BTreeMap;

use super::super::definition::{RepeatSpec, TransitionsType};

/// Who may follow whom, checked against the members.
#[derive(Debug, Clone, PartialEq)]
pub struct Transitions {
    /// `next[i][j]`: member `j` may speak after member `i`; `None`: anyone
    /// may, the last speaker as the method decides.
    next: Option<Vec<Vec<bool>>>,
    /// Members with no transition out (the run ends after them).
    sinks: Vec<bool>,
}

/// A group file's rules about who follows whom: its transitions, their
/// type, `allow_repeat_speaker`.
pub(super) type Rules<'a> = (
    &'a Option<BTreeMap<String, Vec<String>>>,
    Option<TransitionsType>,
    &'a Option<RepeatSpec>,
);

/// What follows a speaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum After {
    /// Whoever the method picks (the last speaker as the method decides).
    Anyone,
    /// These members only, in member order.
    Only(Vec<usize>),
    /// Nobody: the speaker is a dead end.
    Nobody,
}

impl Transitions {
    /// The rules of `spec` over the members `names`.
    ///
    /// # Errors
    /// A name that is no member, both rules at once, or transitions without
    /// their type.
    pub(super) fn build(spec: Rules<'_>, names: &[&str]) -> Result<Self, String> {
        let n = names.len();
        let index = |field: &str, name: &str| {
            names
                .iter()
                .position(|m| *m == name)
                .ok_or_else(|| format!("{field}: `{name}` is not a member"))
        };
        let field = "group.allowed_or_disallowed_speaker_transitions";
        match spec {
            (Some(_), _, Some(_)) => Err(format!(
                "{field}: not together with group.allow_repeat_speaker (as in AG2: set one)"
            )),
            (Some(_), None, _) => Err(
                "group.speaker_transitions_type: `allowed` or `disallowed`, with the transitions"
                    .into(),
            ),
            (None, Some(_), _) => {
                Err("group.speaker_transitions_type: only with the transitions".into())
            }
            (Some(graph), Some(kind), None) => {
                let mut listed: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
                for (from, to) in graph {
                    let from = index(&format!("{field}.{from}"), from)?;
                    let targets = to
                        .iter()
                        .map(|t| index(&format!("{field}.{}", names[from]), t))
                        .collect::<Result<Vec<_>, _>>()?;
                    listed.insert(from, targets);
                }
                let mut next = vec![vec![kind == TransitionsType::Disallowed; n]; n];
                let mut sinks = vec![false; n];
                for (i, row) in next.iter_mut().enumerate() {
                    match listed.get(&i) {
                        Some(targets) => {
                            for &t in targets {
                                row[t] = kind == TransitionsType::Allowed;
                            }
                        }
                        // Allowed: a member not listed has nobody after it.
                        None if kind == TransitionsType::Allowed => sinks[i] = true,
                        None => {}
                    }
                }
                Ok(Self {
                    next: Some(next),
                    sinks,
                })
            }
            (None, None, repeat) => {
                let next = repeat.as_ref().map(|repeat| {
                    let again = |i: usize| match repeat {
                        RepeatSpec::All(all) => *all,
                        RepeatSpec::Members(members) => members.iter().any(|m| m == names[i]),
                    };
                    (0..n)
                        .map(|i| (0..n).map(|j| i != j || again(i)).collect())
                        .collect()
                });
                if let Some(RepeatSpec::Members(members)) = repeat {
                    for m in members {
                        index("group.allow_repeat_speaker", m)?;
                    }
                }
                Ok(Self {
                    next,
                    sinks: vec![false; n],
                })
            }
        }
    }

    /// Who may speak after `previous` (`None`: the run's first turn, anyone).
    pub(super) fn after(&self, previous: Option<usize>) -> After {
        let (Some(next), Some(p)) = (&self.next, previous) else {
            return After::Anyone;
        };
        if self.sinks[p] {
            return After::Nobody;
        }
        let allowed: Vec<usize> = (0..next[p].len()).filter(|&j| next[p][j]).collect();
        // AG2: no member left after the filters means the method takes
        // everyone into account.
        if allowed.is_empty() {
            After::Anyone
        } else {
            After::Only(allowed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::definition::GroupSpec;

    fn rules(spec: &GroupSpec) -> Rules<'_> {
        (
            &spec.allowed_or_disallowed_speaker_transitions,
            spec.speaker_transitions_type,
            &spec.allow_repeat_speaker,
        )
    }

    fn spec(yaml: &str) -> GroupSpec {
        serde_saphyr::from_str(&format!("members: []\n{yaml}")).unwrap()
    }

    const NAMES: [&str; 3] = ["planner", "researcher", "writer"];

    #[test]
    fn allowed_disallowed_and_repeats_give_who_may_follow() {
        let t = |yaml: &str| Transitions::build(rules(&spec(yaml)), &NAMES).unwrap();
        let none = t("");
        assert_eq!(none.after(Some(0)), After::Anyone);
        let allowed = t(
            "allowed_or_disallowed_speaker_transitions: {planner: [researcher, writer], researcher: [planner]}\nspeaker_transitions_type: allowed",
        );
        assert_eq!(allowed.after(None), After::Anyone);
        assert_eq!(allowed.after(Some(0)), After::Only(vec![1, 2]));
        assert_eq!(allowed.after(Some(1)), After::Only(vec![0]));
        assert_eq!(allowed.after(Some(2)), After::Nobody, "writer lists nobody");
        let disallowed = t(
            "allowed_or_disallowed_speaker_transitions: {planner: [writer]}\nspeaker_transitions_type: disallowed",
        );
        assert_eq!(disallowed.after(Some(0)), After::Only(vec![0, 1]));
        assert_eq!(disallowed.after(Some(2)), After::Only(vec![0, 1, 2]));
        let no_repeat = t("allow_repeat_speaker: false");
        assert_eq!(no_repeat.after(Some(1)), After::Only(vec![0, 2]));
        let some_repeat = t("allow_repeat_speaker: [writer]");
        assert_eq!(some_repeat.after(Some(2)), After::Only(vec![0, 1, 2]));
        assert_eq!(some_repeat.after(Some(0)), After::Only(vec![1, 2]));
        assert_eq!(
            t("allow_repeat_speaker: true").after(Some(0)),
            After::Only(vec![0, 1, 2])
        );
    }

    #[test]
    fn mistakes_name_the_field() {
        let err = |yaml: &str| Transitions::build(rules(&spec(yaml)), &NAMES).unwrap_err();
        assert!(
            err("allowed_or_disallowed_speaker_transitions: {planner: [writer]}")
                .contains("speaker_transitions_type")
        );
        assert!(err("allowed_or_disallowed_speaker_transitions: {planner: [ghost]}\nspeaker_transitions_type: allowed").contains("`ghost` is not a member"));
        assert!(err("allowed_or_disallowed_speaker_transitions: {ghost: [writer]}\nspeaker_transitions_type: allowed").contains("`ghost`"));
        assert!(err("allowed_or_disallowed_speaker_transitions: {planner: [writer]}\nspeaker_transitions_type: allowed\nallow_repeat_speaker: false").contains("not together"));
        assert!(err("speaker_transitions_type: allowed").contains("only with the transitions"));
        assert!(err("allow_repeat_speaker: [ghost]").contains("allow_repeat_speaker"));
    }
}
