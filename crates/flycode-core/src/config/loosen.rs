//! Which settings of an untrusted project file would loosen safety (PROTOCOL.md §10
//! "Configuration"): each is judged against what the layers below it (defaults, the user's file)
//! already say, so an untrusted file may repeat or tighten them but never widen them. What each
//! setting's value does to safety is declared once, in [`super::table`]; this file holds the
//! comparisons.

use std::path::{Path, PathBuf};

use super::file::{Key, SettingEntry};
use super::setting::AppliedSetting;
use super::table::{self, Rule, Safety};
use crate::protocol::ToolName;
use crate::tools::registry;
use crate::tools::tool::ApprovalClass;

/// What the layers below the project file say, for one key.
pub type Lower<'a> = &'a dyn Fn(&Key) -> Option<&'a AppliedSetting>;

/// Why `entry`, from the untrusted project file in `project_dir`, would loosen what `lower`
/// says; `None` when it may apply. The setting's [`Safety`] in the table decides; a key the table
/// does not hold is the person's alone (the table fails closed).
pub fn loosens(entry: &SettingEntry, lower: Lower<'_>, project_dir: &Path) -> Option<String> {
    let Some(setting) = table::lookup(&entry.key.0) else {
        return Some(format!(
            "{} is not a setting an untrusted file may make; only your own flycode.toml may",
            entry.key
        ));
    };
    let name = entry.key.0.last().map_or("", String::as_str);
    match setting.safety {
        Safety::Neutral | Safety::Tightens => None,
        Safety::PersonOnly(why) => Some(why.to_owned()),
        Safety::LargerLoosens | Safety::SmallerLoosens(_) => {
            let old = lower(&entry.key)
                .and_then(|applied| applied.value.as_integer())
                .or(setting.default.integer());
            let new = entry.value.as_integer()?;
            let Some(old) = old else {
                // Nothing to compare with: a number the person did not choose cannot be judged,
                // so it is theirs to set.
                return Some(format!(
                    "{name} has no value of yours to compare with; only your own flycode.toml may set it"
                ));
            };
            match setting.safety {
                Safety::SmallerLoosens(why) => {
                    (new < old).then(|| format!("less than {name} = {old} ({why})"))
                }
                _ => (new > old).then(|| format!("larger than {name} = {old}")),
            }
        }
        Safety::Ranked(order) => {
            let old = lower(&entry.key)
                .and_then(|applied| applied.value.as_str().map(str::to_owned))
                .or_else(|| setting.default.text().map(str::to_owned))?;
            let new = entry.value.as_str()?;
            // An unknown word is the loosest: the file reader refuses it anyway.
            let rank = |word: &str| order.iter().position(|w| *w == word).unwrap_or(order.len());
            (rank(new) > rank(&old)).then(|| format!("looser than {} = {old:?}", entry.key))
        }
        Safety::Rule(Rule::Network) => {
            let old = lower(&entry.key)
                .and_then(|applied| applied.value.as_bool())
                .unwrap_or(true);
            (entry.value.as_bool() == Some(true) && !old)
                .then(|| "turns on the network that process_network = false turned off".to_owned())
        }
        Safety::Rule(Rule::PerTool) => {
            tool_rule(name, entry.value.as_str().unwrap_or_default(), lower)
        }
        Safety::Rule(Rule::Roots) => roots(entry, lower, project_dir),
        Safety::Rule(Rule::ProjectPrompt) => {
            if !name.ends_with("_file") {
                return None;
            }
            let path = project_dir.join(entry.value.as_str().unwrap_or_default());
            (!is_inside(&path, &[project_dir.to_owned()]))
                .then(|| "reads a file outside the project folder into the prompt".to_owned())
        }
        Safety::Rule(Rule::SameAsYours) => {
            let old = lower(&entry.key).map(|applied| &applied.value);
            (old != Some(&entry.value)).then(|| {
                "chooses the model, the endpoint or the key variable (it could send your API key or your work elsewhere)".to_owned()
            })
        }
    }
}

/// A `[tools]` rule loosens when it lets a tool run with less asking than the layers below:
/// `allow` where they ask or deny, `ask` where they deny.
fn tool_rule(name: &str, rule: &str, lower: Lower<'_>) -> Option<String> {
    let tool = ToolName::from_name(name)?;
    let lower_rule = lower(&Key(vec!["tools".to_owned(), name.to_owned()]))
        .and_then(|applied| applied.value.as_str().map(str::to_owned));
    let approval = lower(&Key::of(&["approval"]))
        .and_then(|applied| applied.value.as_str().map(str::to_owned))
        .unwrap_or_else(|| "ask".to_owned());
    // What the tool gets without this rule: its rule below, else what the mode gives it.
    let old = match lower_rule.as_deref() {
        Some(rule) => rule,
        None if approval == "auto" => "allow",
        None => {
            let asks =
                registry::tool(tool).is_some_and(|t| t.approval() == ApprovalClass::AsksFirst);
            if asks || approval == "read-only" {
                "ask"
            } else {
                "allow"
            }
        }
    };
    let rank = |rule: &str| match rule {
        "deny" => 0,
        "ask" => 1,
        _ => 2,
    };
    // A `process.run` of a shell or an interpreter is judged as `shell.exec`, and policy takes
    // the `shell.exec` rule first for it (PROTOCOL.md §10, Policy): a `shell.exec` rule must
    // not ask less than the user's `process.run` rule either.
    let named_rule = (tool == ToolName::ShellExec)
        .then(|| {
            lower(&Key(vec![
                "tools".to_owned(),
                ToolName::ProcessRun.as_str().to_owned(),
            ]))
        })
        .flatten()
        .and_then(|applied| applied.value.as_str().map(str::to_owned));
    let old = match named_rule.as_deref() {
        Some(named) if rank(named) < rank(old) => named,
        _ => old,
    };
    let otherwise = match old {
        "deny" => "be denied",
        "ask" => "ask first",
        _ => "run",
    };
    (rank(rule) > rank(old)).then(|| format!("{tool} would otherwise {otherwise}"))
}

/// Roots loosen when one lies outside the project folder, or outside every root the layers
/// below name.
fn roots(entry: &SettingEntry, lower: Lower<'_>, project_dir: &Path) -> Option<String> {
    let listed = |value: &toml::Value, base: &Path| {
        value
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(toml::Value::as_str)
                    .map(|root| base.join(root))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let new = listed(&entry.value, project_dir);
    let outside_project = new
        .iter()
        .find(|root| !is_inside(root, &[project_dir.to_owned()]));
    if let Some(root) = outside_project {
        return Some(format!(
            "{} is outside the project folder {}",
            root.display(),
            project_dir.display()
        ));
    }
    // `roots = []` below means the default (the working directory): no roots of its own.
    let lower_roots = lower(&entry.key)
        .map(|applied| listed(&applied.value, &applied.base))
        .filter(|roots| !roots.is_empty())?;
    if new.is_empty() {
        // `roots = []` means the working directory, which need not be inside the user's roots.
        return Some(
            "an empty list (the working directory) widens the roots your own configuration names"
                .to_owned(),
        );
    }
    let outside_lower = new.iter().find(|root| !is_inside(root, &lower_roots))?;
    Some(format!(
        "{} is outside the roots your own configuration names",
        outside_lower.display()
    ))
}

/// Whether `path` (links resolved) lies in one of `dirs` (links resolved); a path that does not
/// exist is not inside anything.
fn is_inside(path: &Path, dirs: &[PathBuf]) -> bool {
    let Ok(path) = crate::sandbox::host::canonicalize(path) else {
        return false;
    };
    dirs.iter()
        .filter_map(|dir| crate::sandbox::host::canonicalize(dir).ok())
        .any(|dir| path.starts_with(dir))
}
