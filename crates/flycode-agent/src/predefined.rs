//! Predefined agents (PROTOCOL.md §9 (Hints and predefined agents)): `NAME.md` files in
//! `.flycode/agents/` of a trusted project or `agents/` in the user's configuration directory,
//! each a role for a sub-agent with, optionally, the tools it may use. `agent.task` with `name`
//! starts one; the prompt of the tag dialect lists them.
//!
//! The file is Markdown with an optional front matter between `---` lines, of `key: value`
//! lines: `description` (one line for the list) and `tools` (names separated by commas, as the
//! protocol or native calling spells them). What follows is the role. The tools are intersected
//! with what a sub-agent may be given, so a file can narrow a sub-agent, never widen it.

use std::path::PathBuf;

use crate::protocol::{ToolName, ToolSet};
use flycode_core::tools::places::{Places, is_plain_name};

/// The largest agent file read, in bytes.
const AGENT_FILE_CAP: usize = 64 * 1024;

/// One predefined agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PredefinedAgent {
    /// Its name (the file's, without `.md`).
    pub name: String,
    /// Its one-line description: the front matter's, else the role's first line.
    pub description: String,
    /// Its role text.
    pub role: String,
    /// The tools it names, when it names any.
    pub tools: Option<Vec<ToolName>>,
    /// Its file.
    pub file: PathBuf,
}

/// Why a predefined agent cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PredefinedError {
    /// No agent has the name.
    #[error(
        "there is no predefined agent called {name:?}; available: {}",
        list(available)
    )]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names there are.
        available: Vec<String>,
    },
    /// The project holds it, but the project is not trusted.
    #[error("the predefined agent {name} is in {}, but this project's flycode.toml is not trusted, so its agents are not used; available: {}", file.display(), list(available))]
    Untrusted {
        /// The name asked for.
        name: String,
        /// Its file.
        file: PathBuf,
        /// The names there are.
        available: Vec<String>,
    },
    /// Its file is unreadable or names a tool that does not exist.
    #[error("the predefined agent {name} ({}) cannot be used: {why}", file.display())]
    Broken {
        /// Its name.
        name: String,
        /// Its file.
        file: PathBuf,
        /// What is wrong.
        why: String,
    },
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// Every predefined agent of `places` that can be read, the project's first; a name found twice
/// is the project's.
pub fn available_agents(places: &Places) -> Vec<PredefinedAgent> {
    let mut found: Vec<PredefinedAgent> = Vec::new();
    for dir in places.search_dirs("agents") {
        for entry in flycode_core::tools::hint::sorted_entries(&dir) {
            let Some(name) = entry.strip_suffix(".md") else {
                continue;
            };
            if !is_plain_name(name)
                || found.iter().any(|agent| agent.name == name)
                || !places.stays_in_place(&dir.join(&entry))
            {
                continue;
            }
            if let Ok(agent) = read_agent(&dir, name) {
                found.push(agent);
            }
        }
    }
    found
}

/// The predefined agent `name`.
pub fn find_agent(places: &Places, name: &str) -> Result<PredefinedAgent, PredefinedError> {
    let available = || -> Vec<String> {
        available_agents(places)
            .into_iter()
            .map(|agent| agent.name)
            .collect()
    };
    if is_plain_name(name) {
        for dir in places.search_dirs("agents") {
            let file = dir.join(format!("{name}.md"));
            if file.is_file() {
                if !places.stays_in_place(&file) {
                    return Err(PredefinedError::Broken {
                        name: name.to_owned(),
                        file,
                        why: "it leads outside the project (a link), and only the project's own files become instructions".to_owned(),
                    });
                }
                return read_agent(&dir, name);
            }
        }
        if let Some(file) = places
            .untrusted_project_dir("agents")
            .map(|dir| dir.join(format!("{name}.md")))
            .filter(|file| file.is_file())
        {
            return Err(PredefinedError::Untrusted {
                name: name.to_owned(),
                file,
                available: available(),
            });
        }
    }
    Err(PredefinedError::Unknown {
        name: name.to_owned(),
        available: available(),
    })
}

fn read_agent(dir: &std::path::Path, name: &str) -> Result<PredefinedAgent, PredefinedError> {
    let file = dir.join(format!("{name}.md"));
    let broken = |why: String| PredefinedError::Broken {
        name: name.to_owned(),
        file: file.clone(),
        why,
    };
    let bytes =
        flycode_core::tools::hint::shelf::read_confined(dir, &format!("{name}.md"), AGENT_FILE_CAP)
            .map_err(|error| broken(error.message))?;
    let text = String::from_utf8(bytes).map_err(|_| broken("it is not UTF-8 text".to_owned()))?;
    let (front, role) = split_front_matter(&text);
    let mut description = None;
    let mut tools = None;
    for line in front.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "description" => description = Some(value.trim().to_owned()),
            "tools" => tools = Some(parse_tools(value).map_err(broken)?),
            _ => {}
        }
    }
    let role = role.trim().to_owned();
    if role.is_empty() {
        return Err(broken("its role text is empty".to_owned()));
    }
    let description = description.unwrap_or_else(|| {
        role.lines()
            .map(|line| line.trim().trim_start_matches('#').trim())
            .find(|line| !line.is_empty())
            .unwrap_or_default()
            .chars()
            .take(160)
            .collect()
    });
    Ok(PredefinedAgent {
        name: name.to_owned(),
        description,
        role,
        tools,
        file,
    })
}

/// The front matter (between a first line `---` and the next `---` line) and the rest.
fn split_front_matter(text: &str) -> (&str, &str) {
    let text = text.trim_start_matches('\u{FEFF}');
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return ("", text);
    };
    for (at, _) in rest.match_indices("---") {
        let line_start = at == 0 || rest[..at].ends_with('\n');
        let after = &rest[at + 3..];
        let line_end = after.is_empty() || after.starts_with('\n') || after.starts_with("\r\n");
        if line_start && line_end {
            return (&rest[..at], after);
        }
    }
    ("", text)
}

/// `fs.read, fs_search` → the tools.
fn parse_tools(value: &str) -> Result<Vec<ToolName>, String> {
    value
        .split([',', ' '])
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            ToolName::from_native_name(name, ToolSet::All)
                .ok_or_else(|| format!("its tools name {name:?}, which is no flycode tool"))
        })
        .collect()
}

/// The tools a sub-agent of `agent` may use: those it names that a sub-agent may be given
/// (`allowed`), plus `agent.complete`, without which it could not finish; all of `allowed` when
/// it names none.
pub fn granted_tools(agent: &PredefinedAgent, allowed: &[ToolName]) -> Vec<ToolName> {
    match &agent.tools {
        None => allowed.to_vec(),
        Some(named) => allowed
            .iter()
            .copied()
            .filter(|tool| named.contains(tool) || *tool == ToolName::AgentComplete)
            .collect(),
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    fn places_with(project: Option<(PathBuf, bool)>, user: &std::path::Path) -> Places {
        Places {
            state_dir: None,
            user_config: Some(user.to_path_buf()),
            project,
            memory_all_roots: false,
        }
    }

    #[test]
    fn reads_role_and_tools_and_narrows_them() {
        let temp = tempfile::tempdir().unwrap();
        let agents = temp.path().join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join("reviewer.md"),
            "---\ndescription: Reviews code\ntools: fs.read, fs_search, shell.exec\n---\nYou review code.\n",
        )
        .unwrap();
        let places = places_with(None, temp.path());
        let agent = find_agent(&places, "reviewer").unwrap();
        assert_eq!(agent.description, "Reviews code");
        assert_eq!(agent.role, "You review code.");
        assert_eq!(
            granted_tools(&agent, &ToolName::SUBAGENT),
            [
                ToolName::FsRead,
                ToolName::FsSearch,
                ToolName::AgentComplete
            ]
        );
    }

    #[test]
    fn an_unknown_name_lists_the_available_ones_and_untrusted_projects_are_refused() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(temp.path().join("agents")).unwrap();
        std::fs::write(temp.path().join("agents/a.md"), "Role A").unwrap();
        let project = temp.path().join("p");
        std::fs::create_dir_all(project.join(".flycode/agents")).unwrap();
        std::fs::write(project.join(".flycode/agents/b.md"), "Role B").unwrap();
        let places = places_with(Some((project.clone(), false)), temp.path());
        let error = find_agent(&places, "zzz").unwrap_err();
        assert!(error.to_string().contains("available: a"), "{error}");
        let error = find_agent(&places, "b").unwrap_err();
        assert!(
            matches!(error, PredefinedError::Untrusted { .. }),
            "{error}"
        );
        let trusted = places_with(Some((project, true)), temp.path());
        assert_eq!(find_agent(&trusted, "b").unwrap().role, "Role B");
        let names: Vec<String> = available_agents(&trusted)
            .into_iter()
            .map(|a| a.name)
            .collect();
        assert_eq!(names, ["b", "a"]);
        assert!(find_agent(&trusted, "../a").is_err());
    }
}
