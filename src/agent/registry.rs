//! Every agent the server knows: the built-in `demo` and the agents folder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::build::{Agent, parse};
use super::definition::AgentFile;
use super::group;
use super::models::ModelRegistry;
use crate::config::ModelConfig;
use crate::workflows::{WorkflowFileError, WorkflowRegistry};

/// The `demo` agent, built into the binary.
const DEMO: &str = include_str!("demo.yaml");

/// A bad agent or workflow file, naming the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum AgentFileError {
    #[error("agent file {file}: {message}")]
    Agent { file: PathBuf, message: String },
    /// A file of the agents folder's `workflows/`: "workflow file …".
    #[error(transparent)]
    Workflow(#[from] WorkflowFileError),
}

/// Every agent the server knows, by id.
#[derive(Debug, Clone, Default)]
pub struct AgentRegistry {
    agents: HashMap<String, Arc<Agent>>,
    models: ModelRegistry,
    /// The agents folder's `workflows/`.
    workflows: WorkflowRegistry,
}

impl AgentRegistry {
    /// The built-in `demo` plus every `*.yaml`/`*.yml` file in `dir`, and
    /// the workflows in `dir/workflows/`.
    ///
    /// # Errors
    /// A bad file (named, with the field), a duplicate id, or an unreadable
    /// folder. A missing folder is an error only when `required`.
    pub fn load(
        dir: &Path,
        required: bool,
        models: &[ModelConfig],
    ) -> Result<Self, AgentFileError> {
        let mut agents = HashMap::new();
        let http = crate::llm::http_client();
        let models =
            ModelRegistry::from_config(models, &http).map_err(|message| AgentFileError::Agent {
                file: "agentwire.toml".into(),
                message: format!("models: {message}"),
            })?;
        let demo = Agent::from_yaml(DEMO, &http).map_err(|message| AgentFileError::Agent {
            file: "<built-in demo>".into(),
            message,
        })?;
        agents.insert(demo.id.clone(), Arc::new(demo));
        let paths = match crate::config::yaml_files(dir) {
            Ok(paths) => paths,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                return Ok(Self {
                    agents,
                    models,
                    workflows: WorkflowRegistry::default(),
                });
            }
            Err(e) => {
                return Err(AgentFileError::Agent {
                    file: dir.to_owned(),
                    message: format!("cannot read the agents folder: {e}"),
                });
            }
        };
        // Plain agents first: a group's members may name them.
        let mut groups = Vec::new();
        for path in paths {
            let fail = |message: String| AgentFileError::Agent {
                file: path.clone(),
                message: message.replace("<input>", &path.display().to_string()),
            };
            let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
            // The YAML reader names its source `<input>` in its snippets.
            let file = parse(&text).map_err(fail)?;
            if file.group.is_some() {
                groups.push((path, file));
                continue;
            }
            let mut agent = Agent::from_file(file, &http).map_err(fail)?;
            // The files a template's widgets show, read once, here.
            if let Some(template) = agent.template.as_mut().and_then(Arc::get_mut) {
                template.read_files(dir).map_err(fail)?;
            }
            insert(&mut agents, agent).map_err(fail)?;
        }
        let plain = agents.clone();
        // A group's nested chats may name another group: that one first
        // (a circle of them, or a group that is not there, is named).
        let ids: std::collections::HashSet<String> =
            groups.iter().map(|(_, f)| f.id.clone()).collect();
        while !groups.is_empty() {
            let ready = groups.iter().position(|(_, file)| {
                nested_ids(file).all(|id| !ids.contains(id) || agents.contains_key(id))
            });
            let (path, file) = groups.remove(ready.unwrap_or(0));
            let fail = |message: String| AgentFileError::Agent {
                file: path.clone(),
                message,
            };
            let built = &agents;
            let resolve = |id: &str, nested: bool| match (plain.get(id), built.get(id)) {
                (Some(agent), _) if agent.template.is_some() => Err(format!(
                    "`{id}` walks a template; it cannot take turns in a group"
                )),
                (Some(agent), _) => Ok(agent.clone()),
                (None, Some(group)) if nested => Ok(group.clone()),
                (None, _) if nested && ids.contains(id) => Err(format!(
                    "the group `{id}` nests this one, directly or not (a circle)"
                )),
                (None, _) => Err(format!(
                    "no agent file has the id `{id}` (a member cannot be a group)"
                )),
            };
            let agent = group::build(file, &http, resolve).map_err(fail)?;
            insert(&mut agents, agent).map_err(fail)?;
        }
        let workflows = WorkflowRegistry::load(&dir.join("workflows"))?;
        Ok(Self {
            agents,
            models,
            workflows,
        })
    }

    /// Caps each event an upstream AG-UI agent sends at `bytes` (the
    /// server's `max_message_bytes`).
    pub fn limit_upstream_events(&self, bytes: usize) {
        for agent in self.agents.values() {
            if let Some(up) = &agent.upstream {
                up.limit_events(bytes);
            }
        }
    }

    /// The user-invoked workflows (seed 002).
    pub fn workflows(&self) -> &WorkflowRegistry {
        &self.workflows
    }

    /// The agent with that id.
    pub fn get(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents.get(id).cloned()
    }

    /// The models chats may switch to.
    pub fn models(&self) -> &ModelRegistry {
        &self.models
    }

    /// Every agent, sorted by id.
    pub fn all(&self) -> Vec<Arc<Agent>> {
        let mut all: Vec<_> = self.agents.values().cloned().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// Every agent id, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<_> = self.agents.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }
}

/// Adds an agent, unless its id is taken.
fn insert(agents: &mut HashMap<String, Arc<Agent>>, agent: Agent) -> Result<(), String> {
    if agents.contains_key(&agent.id) {
        return Err(format!("id: `{}` is already defined", agent.id));
    }
    agents.insert(agent.id.clone(), Arc::new(agent));
    Ok(())
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;

/// The agent ids a group file's nested chats name.
fn nested_ids(file: &AgentFile) -> impl Iterator<Item = &str> {
    file.group
        .iter()
        .flat_map(|g| &g.members)
        .flat_map(|m| &m.nested)
        .map(|n| n.agent.as_str())
}
