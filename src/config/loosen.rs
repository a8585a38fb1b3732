//! Which settings of an untrusted project file would loosen safety (PROTOCOL.md §10
//! "Configuration"): each is judged against what the layers below it (defaults, the user's file)
//! already say, so an untrusted file may repeat or tighten them but never widen them. Settings
//! that neither loosen nor tighten (the tool set, turn and context budgets, prompt text) pass.

use std::path::{Path, PathBuf};

use super::file::{Key, SettingEntry};
use super::reply_limit::DEFAULT_MAX_REPLY_BYTES;
use super::setting::AppliedSetting;
use crate::protocol::{DEFAULT_BODY_CAP, ToolName};
use crate::tools::registry;
use crate::tools::tool::ApprovalClass;

/// What the layers below the project file say, for one key.
pub(crate) type Lower<'a> = &'a dyn Fn(&Key) -> Option<&'a AppliedSetting>;

/// Why `entry`, from the untrusted project file in `project_dir`, would loosen what `lower`
/// says; `None` when it may apply.
pub(crate) fn loosens(
    entry: &SettingEntry,
    lower: Lower<'_>,
    project_dir: &Path,
) -> Option<String> {
    let key = entry.key.0.iter().map(String::as_str).collect::<Vec<_>>();
    let text = |key: &[&str]| {
        lower(&Key::of(key)).and_then(|applied| applied.value.as_str().map(str::to_owned))
    };
    let new_text = entry.value.as_str().unwrap_or_default();
    match key.as_slice() {
        ["approval"] => {
            let old = text(&["approval"]).unwrap_or_else(|| "ask".to_owned());
            let rank = |mode: &str| match mode {
                "read-only" => 0,
                "ask" => 1,
                _ => 2,
            };
            (rank(new_text) > rank(&old)).then(|| format!("looser than approval = {old:?}"))
        }
        ["process_sandbox"] => {
            let old = text(&["process_sandbox"]).unwrap_or_else(|| "workspace-write".to_owned());
            let rank = |mode: &str| match mode {
                "read-only" => 0,
                "workspace-write" => 1,
                _ => 2,
            };
            (rank(new_text) > rank(&old)).then(|| format!("looser than process_sandbox = {old:?}"))
        }
        ["durability"] => {
            // "process" gives up surviving a power loss (PROTOCOL.md §9 (fs.write)).
            let old = text(&["durability"]).unwrap_or_else(|| "full".to_owned());
            (new_text == "process" && old != "process")
                .then(|| format!("looser than durability = {old:?}"))
        }
        ["process_network"] => {
            let old = lower(&entry.key)
                .and_then(|applied| applied.value.as_bool())
                .unwrap_or(true);
            (entry.value.as_bool() == Some(true) && !old)
                .then(|| "turns on the network that process_network = false turned off".to_owned())
        }
        ["output_cap" | "max_reply_bytes" | "timeout_ms"] => {
            let default = match key[0] {
                "output_cap" => DEFAULT_BODY_CAP as i64,
                "max_reply_bytes" => DEFAULT_MAX_REPLY_BYTES as i64,
                _ => 60_000,
            };
            let old = lower(&entry.key)
                .and_then(|applied| applied.value.as_integer())
                .unwrap_or(default);
            (entry.value.as_integer().unwrap_or(0) > old)
                .then(|| format!("larger than {} = {old}", key[0]))
        }
        // Fewer days would make `flycode gc` remove more of the user's records.
        ["state", "keep_days"] => {
            let old = lower(&entry.key)
                .and_then(|applied| applied.value.as_integer())
                .unwrap_or(i64::from(super::DEFAULT_KEEP_DAYS));
            (entry.value.as_integer().unwrap_or(0) < old)
                .then(|| format!("fewer than keep_days = {old} (flycode gc would remove more)"))
        }
        // Less would make the undo store forget more of the user's changes.
        [
            "undo",
            setting @ ("max_bytes" | "max_age_days" | "max_file_bytes"),
        ] => {
            let default = crate::sandbox::undo::UndoLimits::default();
            let fallback = match *setting {
                "max_bytes" => default.max_bytes,
                "max_age_days" => u64::from(default.max_age_days),
                _ => default.max_file_bytes,
            };
            let old = lower(&entry.key)
                .and_then(|applied| applied.value.as_integer())
                .unwrap_or(i64::try_from(fallback).unwrap_or(i64::MAX));
            (entry.value.as_integer().unwrap_or(0) < old)
                .then(|| format!("less than {setting} = {old} (the undo store would forget more)"))
        }
        // More jobs at once, or larger job logs, take more of the machine than the user allowed.
        ["jobs", "log_bytes" | "max_running"] => {
            let default = match key[1] {
                "log_bytes" => crate::tools::jobs::DEFAULT_LOG_BYTES as i64,
                _ => i64::from(crate::tools::jobs::DEFAULT_MAX_RUNNING),
            };
            let old = lower(&entry.key)
                .and_then(|applied| applied.value.as_integer())
                .unwrap_or(default);
            (entry.value.as_integer().unwrap_or(0) > old)
                .then(|| format!("larger than {} = {old}", key[1]))
        }
        ["tools", name] if *name != "set" => tool_rule(name, new_text, lower),
        ["roots"] => roots(entry, lower, project_dir),
        ["agent", "base_url" | "model" | "api_key_env" | "provider"]
        | [
            "agent",
            "light",
            "model" | "base_url" | "api_key_env" | "provider",
        ] => {
            let old = text(&key);
            (old.as_deref() != Some(new_text)).then(|| {
                "chooses the model, the endpoint or the key variable (it could send your API key or your work elsewhere)".to_owned()
            })
        }
        ["agent", "role_file" | "system_prompt_file"] | ["agent", "subagent", _, "role_file"] => {
            let path = project_dir.join(new_text);
            (!is_inside(&path, &[project_dir.to_owned()]))
                .then(|| "reads a file outside the project folder into the prompt".to_owned())
        }
        _ => None,
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
