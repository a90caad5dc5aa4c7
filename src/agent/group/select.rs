//! Who speaks next in a group: a handoff (the member's `handoff_to` call,
//! or an `after` rule) overrides the method; else the first turn may be
//! fixed (`first`); else the transitions (`graph`) say who may speak — one
//! member alone speaks without asking, none ends the run — and the method
//! picks among them: `round_robin` (the next allowed in member order),
//! `random` (seeded per chat and run), `auto` (the selector model, asked
//! again `max_retries_for_selecting_speaker` times, then round robin with
//! the reason logged), `manual` (the user, asked with the allowed members
//! as options; an empty answer moves to the next member, as AG2's code
//! does).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::oneshot;

use super::super::build::{Group, Target};
use super::super::definition::SelectionMethod;
use super::super::prompt::fit_budget;
use super::graph::After;
use super::view::view;
use super::{SPEAKER_REQUEST, SPEAKER_TOOL};
use crate::link::{Gone, InputOutcome, RunLink, RunMsg, Said};
use crate::llm::{Message, Provider, Usage, complete};
use crate::protocol::RunEndReason;

/// The next turn.
pub(super) enum Pick {
    /// Member `index` speaks, chosen by `method`, with `reason` in words.
    Member {
        index: usize,
        method: &'static str,
        reason: Option<String>,
    },
    /// The run ends.
    End(RunEndReason),
}

/// Chooses the speakers of one run.
pub(super) struct Chooser<'a> {
    group: &'a Group,
    /// The selector's prompt budget (the group's `prompt_budget_tokens`).
    budget: u64,
    seed: u64,
    rng: StdRng,
    draws: u64,
    /// The next pick goes on after a conversation the last speaker's
    /// `after` rule ended (`terminate`): that rule is spent.
    pub(super) ended: bool,
}

impl<'a> Chooser<'a> {
    /// `seed` drives `random` (the chat's and the run's, so a replay of the
    /// log explains every pick).
    pub(super) fn new(group: &'a Group, budget: u64, seed: u64) -> Self {
        Self {
            group,
            budget,
            seed,
            rng: StdRng::seed_from_u64(seed),
            draws: 0,
            ended: false,
        }
    }

    /// The handoff that decides the turn after member `previous`, if any: its
    /// `handoff_to` call, else its `after` rule.
    pub(super) fn forced(
        &self,
        previous: usize,
        handoff: Option<Target>,
    ) -> Option<(Target, &'static str)> {
        handoff
            .map(|t| (t, "handoff"))
            .or_else(|| self.group.after.get(&previous).map(|t| (*t, "after")))
    }

    /// Chooses the next speaker after `previous` (`None`: the run's first turn).
    pub(super) async fn next(
        &mut self,
        previous: Option<usize>,
        handoff: Option<Target>,
        transcript: &[Said],
        ask: Ask<'_>,
    ) -> Result<Pick, Gone> {
        let group = self.group;
        let spent = std::mem::take(&mut self.ended);
        if let Some(p) = previous
            && !spent
            && let Some((target, method)) = self.forced(p, handoff)
        {
            match target {
                Target::Member(index) => {
                    return Ok(Pick::Member {
                        index,
                        method,
                        reason: None,
                    });
                }
                Target::User | Target::Terminate => return Ok(Pick::End(RunEndReason::Completed)),
                // The method picks, as if nothing forced the turn.
                Target::Select => {}
            }
        }
        if previous.is_none()
            && let Some(index) = group.first
        {
            return Ok(Pick::Member {
                index,
                method: "first",
                reason: None,
            });
        }
        let n = group.members.len();
        let method = group.method.as_str();
        let member = |index, reason| Pick::Member {
            index,
            method,
            reason,
        };
        let after = group.transitions.after(previous);
        let eligible: Vec<usize> = match &after {
            // A dead end (AG2's `NoEligibleSpeaker`): the conversation ends.
            After::Nobody => return Ok(Pick::End(RunEndReason::Completed)),
            After::Anyone => (0..n).collect(),
            After::Only(only) if only.len() == 1 => {
                let why = "the only member allowed to speak next".to_owned();
                return Ok(member(only[0], Some(why)));
            }
            After::Only(only) => only.clone(),
        };
        // The next allowed member in member order, after the last speaker.
        let round_robin = match previous {
            None => eligible[0],
            Some(p) => (1..=n)
                .map(|k| (p + k) % n)
                .find(|i| eligible.contains(i))
                .unwrap_or(eligible[0]),
        };
        Ok(match group.method {
            SelectionMethod::RoundRobin => member(round_robin, None),
            SelectionMethod::Random => {
                // With no rule, anyone but the last speaker (when there is
                // anyone else); with one, whom it allows.
                let candidates: Vec<usize> = match after {
                    After::Anyone => (0..n).filter(|i| n == 1 || Some(*i) != previous).collect(),
                    _ => eligible.clone(),
                };
                let draw = self.rng.random_range(0..candidates.len());
                self.draws += 1;
                let reason = format!("seed {}, draw {}", self.seed, self.draws);
                member(candidates[draw], Some(reason))
            }
            SelectionMethod::Auto => {
                self.auto(transcript, &eligible, round_robin, ask, None)
                    .await?
            }
            SelectionMethod::Manual => match self.ask_user(ask.link, &eligible).await? {
                Some(Ok(index)) => member(index, None),
                // No choice made: the next member, as AG2's code does (its
                // prompt promises `auto`; `GroupChat.select_speaker` moves
                // to the next agent, and the parity test holds us to it).
                Some(Err(why)) => Pick::Member {
                    index: round_robin,
                    method: "round_robin",
                    reason: Some(format!(
                        "{}; round robin instead",
                        why.unwrap_or_else(|| "no choice was made".to_owned())
                    )),
                },
                None => Pick::End(RunEndReason::Timeout),
            },
        })
    }

    /// `auto`: the selector's pick among `eligible` (`reason`: why it was
    /// asked, if not the method), else `fallback` by round robin.
    async fn auto(
        &self,
        transcript: &[Said],
        eligible: &[usize],
        fallback: usize,
        ask: Ask<'_>,
        reason: Option<String>,
    ) -> Result<Pick, Gone> {
        let before = *ask.usage;
        let chosen = self
            .ask_selector(transcript, eligible, ask.selector, ask.usage)
            .await;
        // The selector's calls are the group's own (its agent's).
        ask.link.used(None, before, *ask.usage).await?;
        Ok(match chosen {
            Ok(index) => Pick::Member {
                index,
                method: "auto",
                reason,
            },
            Err(why) => Pick::Member {
                index: fallback,
                method: "round_robin",
                reason: Some(format!("{why}; round robin instead")),
            },
        })
    }

    /// Asks the selector model to name one of `eligible`, again up to
    /// `max_retries_for_selecting_speaker` times when its answer names none
    /// (AG2's `max_attempts`).
    async fn ask_selector(
        &self,
        transcript: &[Said],
        eligible: &[usize],
        selector: &dyn Provider,
        usage: &mut Usage,
    ) -> Result<usize, String> {
        let names = self.names(eligible);
        let list = format!("[{}]", names.join(", "));
        let mut messages = view(transcript, None, 2_000);
        // The selector reads no more of the conversation than a member may.
        messages = fit_budget(&messages, self.budget, &self.group.selector_prompt);
        messages.push(Message::user(format!(
                "Read the above conversation. Then select the next role from {list} to play. Only return the role."
            )));
        let mut last = String::new();
        for _ in 0..=self.group.selector_retries {
            let answer = complete(
                selector,
                &self.group.selector_prompt,
                messages.clone(),
                64,
                usage,
            )
            .await
            .map_err(|e| format!("the selector failed: {e}"))?;
            if let Some(index) = named(&answer, &names) {
                return Ok(eligible[index]);
            }
            messages.push(Message::Assistant {
                text: answer.clone(),
                tool_calls: Vec::new(),
            });
            messages.push(Message::user(format!(
                "You did not choose a single member. The only names accepted are {list}. \
                     Respond with ONLY the name of the speaker."
            )));
            last = answer;
        }
        Err(format!(
            "the selector answered `{}`, which names no single member",
            last.trim().chars().take(80).collect::<String>()
        ))
    }

    /// `manual`: asks the user, with the `eligible` members as options (the
    /// chat takes only one of them, or nothing, as the answer). `None`:
    /// nobody answered in time; `Err(None)`: no choice was made.
    async fn ask_user(
        &self,
        link: &RunLink,
        eligible: &[usize],
    ) -> Result<Option<Result<usize, Option<String>>>, Gone> {
        let names = self.names(eligible);
        let (respond, answer) = oneshot::channel();
        link.send(RunMsg::AskInput {
            // The choice a restart cut off is asked again by its id.
            request_id: link
                .rewaited(SPEAKER_REQUEST)
                .unwrap_or_else(|| format!("{SPEAKER_REQUEST}{}", uuid::Uuid::new_v4().simple())),
            prompt: format!("Who speaks next? {}", names.join(", ")),
            password: false,
            options: Some(names.iter().map(|n| (*n).to_owned()).collect()),
            tool_name: Some(SPEAKER_TOOL.into()),
            waited: None,
            respond,
        })
        .await?;
        Ok(match answer.await.map_err(|_| Gone)? {
            InputOutcome::TimedOut => None,
            InputOutcome::Answered(text) if text.trim().is_empty() => Some(Err(None)),
            InputOutcome::Answered(text) => Some(
                names
                    .iter()
                    .position(|n| *n == text)
                    .map(|i| eligible[i])
                    .ok_or_else(|| Some(format!("the answer `{text}` names no member"))),
            ),
        })
    }

    /// The names of the members `indexes`.
    fn names(&self, indexes: &[usize]) -> Vec<&str> {
        indexes
            .iter()
            .map(|&i| self.group.members[i].name.as_str())
            .collect()
    }
}

/// What the method may use to ask: the selector model (and where its usage
/// goes), the run's link (for the user).
pub(super) struct Ask<'a> {
    pub selector: &'a dyn Provider,
    pub usage: &'a mut Usage,
    pub link: &'a RunLink,
}

/// The member a selector's answer names: the whole answer (quotes and
/// punctuation aside), or the only member it mentions as a word.
fn named(answer: &str, names: &[&str]) -> Option<usize> {
    let bare = answer
        .trim()
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '-');
    if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(bare)) {
        return Some(i);
    }
    let words: Vec<&str> = answer
        .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
        .collect();
    let mentioned: Vec<usize> = (0..names.len())
        .filter(|i| words.iter().any(|w| w.eq_ignore_ascii_case(names[*i])))
        .collect();
    (mentioned.len() == 1).then(|| mentioned[0])
}

#[cfg(test)]
mod tests {
    use super::named;

    #[test]
    fn answers_that_name_a_member() {
        let names = ["planner", "researcher", "writer"];
        assert_eq!(named("writer", &names), Some(2));
        assert_eq!(named(" \"Writer\".\n", &names), Some(2));
        assert_eq!(named("I think the researcher should go.", &names), Some(1));
        assert_eq!(named("planner or writer", &names), None);
        assert_eq!(named("nobody", &names), None);
        assert_eq!(named("", &names), None);
    }
}
