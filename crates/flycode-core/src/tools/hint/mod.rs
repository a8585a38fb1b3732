//! The hint tools (PROTOCOL.md §9 (hint.load, hint.unload, hint.resource)): a hint is a folder
//! of instructions (`HINT.md`) and resources, `.flycode/hints/NAME/` of a trusted project or
//! `hints/NAME/` in the user's configuration directory. Loading one puts its `HINT.md` in the
//! conversation's context until it is unloaded; its other files are read with `hint.resource`,
//! confined to its folder ([`shelf::read_confined`]). A project the person does not trust offers
//! no hints: what a hint says becomes the model's instructions.

pub mod shelf;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::json;

use super::places::{Places, is_plain_name};
use super::tool::{ApprovalClass, Effects, Tool, ToolContext, plural};
use super::{ToolError, ToolOutput};
use crate::protocol::{ErrorCode, ToolName};
pub use shelf::{HintShelf, LoadedHint};

/// The instructions file of a hint.
pub const HINT_FILE: &str = "HINT.md";

/// The largest `HINT.md` loaded, in bytes.
const HINT_CAP: usize = 64 * 1024;

/// A hint that can be loaded, for the prompt's list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HintInfo {
    /// Its name.
    pub name: String,
    /// The first line of its `HINT.md` that is not blank or a heading mark alone.
    pub summary: String,
}

/// The hints of `places`, the project's first; a name found twice is the project's.
pub fn available_hints(places: &Places) -> Vec<HintInfo> {
    let mut found: Vec<HintInfo> = Vec::new();
    for dir in places.search_dirs("hints") {
        for name in sorted_entries(&dir) {
            if found.iter().any(|hint| hint.name == name)
                || !places.stays_in_place(&dir.join(&name))
            {
                continue;
            }
            let Ok(bytes) = shelf::read_confined(&dir.join(&name), HINT_FILE, HINT_CAP) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let summary = text
                .lines()
                .map(|line| line.trim().trim_start_matches('#').trim())
                .find(|line| !line.is_empty())
                .unwrap_or_default()
                .chars()
                .take(160)
                .collect();
            found.push(HintInfo { name, summary });
        }
    }
    found
}

/// The plain names in `dir`, sorted (nothing when it cannot be read).
pub fn sorted_entries(dir: &Path) -> Vec<String> {
    let Ok(entries) = crate::sandbox::host::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// `hint.load` in the registry.
pub struct HintLoad;

/// `hint.unload` in the registry.
pub struct HintUnload;

/// `hint.resource` in the registry.
pub struct HintResource;

/// The arguments of `hint.load`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HintLoadArgs {
    /// The hint's folder name.
    pub name: String,
}

/// The arguments of `hint.unload`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HintUnloadArgs {
    /// The hint to unload; every one when absent.
    pub name: Option<String>,
}

/// How `hint.resource` returns a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub enum ResourceEncoding {
    /// UTF-8 text (the default).
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    /// Base64 of any bytes.
    #[serde(rename = "base64")]
    Base64,
}

/// The arguments of `hint.resource`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HintResourceArgs {
    /// The file, relative to the hint's folder.
    pub path: String,
    /// How to return it.
    #[serde(default)]
    pub encoding: ResourceEncoding,
}

/// The folder of the hint `name`, or why it cannot be loaded.
fn find_hint(places: &Places, name: &str) -> Result<PathBuf, ToolError> {
    if !is_plain_name(name) {
        return Err(ToolError::new(
            ErrorCode::InvalidArgs,
            format!("{name:?} is not a hint name: use the folder's plain name, without separators"),
            Some("pick a name from the list of available hints"),
        ));
    }
    if let Some(dir) = places
        .search_dirs("hints")
        .into_iter()
        .map(|dir| dir.join(name))
        .find(|dir| super::places::is_dir(dir))
    {
        if !places.stays_in_place(&dir) {
            return Err(ToolError::new(
                ErrorCode::DeniedByPolicy,
                format!(
                    "hint {name} is not loaded: {} leads outside the project (a link), and only the project's own files become instructions",
                    dir.display()
                ),
                Some("use another hint, or ask the user to put the hint inside the project"),
            ));
        }
        return Ok(dir);
    }
    if let Some(dir) = places
        .untrusted_project_dir("hints")
        .map(|dir| dir.join(name))
        .filter(|dir| super::places::is_dir(dir))
    {
        return Err(ToolError::new(
            ErrorCode::DeniedByPolicy,
            format!(
                "hint {name} is in {}, but this project's flycode.toml is not trusted, so its hints are not loaded",
                dir.display()
            ),
            Some("use another hint, or ask the user to trust the project"),
        )
        .with_advice("run `flycode trust` in the project to let its hints and agents be used"));
    }
    let known: Vec<String> = available_hints(places)
        .into_iter()
        .map(|h| h.name)
        .collect();
    Err(ToolError::new(
        ErrorCode::NotFound,
        format!(
            "there is no hint called {name}; available: {}",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ),
        Some("load one of the available hints"),
    ))
}

impl Tool for HintLoad {
    type Args = HintLoadArgs;
    const NAME: ToolName = ToolName::HintLoad;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AgentMemory
    }

    fn effects<'a>(&self, _args: &'a HintLoadArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &HintLoadArgs, _roots: &[PathBuf]) -> String {
        args.name.clone()
    }

    fn summary(&self, output: &ToolOutput) -> String {
        format!("Loaded {}", output.data["name"].as_str().unwrap_or("?"))
    }

    fn run(&self, context: &ToolContext<'_>, args: &HintLoadArgs) -> Result<ToolOutput, ToolError> {
        let dir = find_hint(&context.limits.places, &args.name)?;
        let bytes = shelf::read_confined(&dir, HINT_FILE, HINT_CAP)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            ToolError::new(
                ErrorCode::BinaryContent,
                format!("{}/{HINT_FILE} is not UTF-8 text", dir.display()),
                None,
            )
        })?;
        let dir = crate::sandbox::host::canonicalize(&dir).unwrap_or(dir);
        context.hints.load(LoadedHint {
            name: args.name.clone(),
            dir: dir.clone(),
            text: text.clone(),
        });
        let fence = crate::protocol::result::backtick_fence_for(&text);
        Ok(ToolOutput {
            body: Some(format!(
                "Loaded hint {} ({}). Its {HINT_FILE}, which stays in your context until hint.unload:\n\n{fence}markdown\n{}\n{fence}\n",
                args.name,
                dir.display(),
                text.trim_end()
            )),
            fields: Vec::new(),
            data: json!({"name": args.name, "dir": dir.display().to_string(), "hint": text}),
            continue_hint: None,
            kept: None,
        })
    }
}

impl Tool for HintUnload {
    type Args = HintUnloadArgs;
    const NAME: ToolName = ToolName::HintUnload;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::AgentMemory
    }

    fn effects<'a>(&self, _args: &'a HintUnloadArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &HintUnloadArgs, _roots: &[PathBuf]) -> String {
        args.name.clone().unwrap_or_else(|| "every hint".to_owned())
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let count = output.data["unloaded"].as_array().map_or(0, Vec::len);
        format!("Unloaded {}", plural(count, "hint"))
    }

    fn run(
        &self,
        context: &ToolContext<'_>,
        args: &HintUnloadArgs,
    ) -> Result<ToolOutput, ToolError> {
        let gone = context.hints.unload(args.name.as_deref());
        if gone.is_empty() {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                match &args.name {
                    Some(name) => format!("hint {name} is not loaded"),
                    None => "no hint is loaded".to_owned(),
                },
                Some("nothing to unload"),
            ));
        }
        Ok(ToolOutput {
            body: Some(format!("Unloaded: {}\n", gone.join(", "))),
            fields: Vec::new(),
            data: json!({"unloaded": gone}),
            continue_hint: None,
            kept: None,
        })
    }
}

impl Tool for HintResource {
    type Args = HintResourceArgs;
    const NAME: ToolName = ToolName::HintResource;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, _args: &'a HintResourceArgs) -> Effects<'a> {
        // The hint's folder is flycode's configuration, not a root: no root path is read.
        Effects::default()
    }

    fn subject(&self, args: &HintResourceArgs, _roots: &[PathBuf]) -> String {
        args.path.clone()
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let bytes = output.data["bytes"].as_u64().unwrap_or(0);
        format!("Read {}", super::fs::ls::human_size(bytes))
    }

    fn run(
        &self,
        context: &ToolContext<'_>,
        args: &HintResourceArgs,
    ) -> Result<ToolOutput, ToolError> {
        let loaded = context.hints.loaded();
        let Some(latest) = loaded.last() else {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!(
                    "{}: no hint is loaded, so there is no resource to read",
                    args.path
                ),
                Some("load a hint with hint.load first"),
            ));
        };
        // The latest hint holding the path answers; a refusal is the latest hint's.
        let cap = context.limits.output_cap;
        let mut first_error = None;
        for hint in loaded.iter().rev() {
            match shelf::read_confined(&hint.dir, &args.path, cap) {
                Ok(bytes) => return resource_output(hint, &args.path, bytes, args.encoding),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                format!("{} not found in {}", args.path, latest.name),
                None,
            )
        }))
    }
}

fn resource_output(
    hint: &LoadedHint,
    path: &str,
    bytes: Vec<u8>,
    encoding: ResourceEncoding,
) -> Result<ToolOutput, ToolError> {
    let size = bytes.len();
    let body = match encoding {
        ResourceEncoding::Base64 => base64::engine::general_purpose::STANDARD.encode(&bytes),
        ResourceEncoding::Utf8 => String::from_utf8(bytes).map_err(|_| {
            ToolError::new(
                ErrorCode::BinaryContent,
                format!("{path} of hint {} is not UTF-8 text", hint.name),
                Some("read it with encoding base64"),
            )
        })?,
    };
    Ok(ToolOutput {
        body: Some(body.clone()),
        fields: vec![("hint".to_owned(), hint.name.clone())],
        data: json!({"hint": hint.name, "path": path, "bytes": size, "content": body}),
        continue_hint: None,
        kept: None,
    })
}
