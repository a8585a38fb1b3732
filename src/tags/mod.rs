//! Running a tag-dialect reply (PROTOCOL.md §15 (The tag dialect)): each tool tag mapped onto
//! its registry call ([`crate::protocol::tags::map`]) and run, in order, through the one call
//! service, then answered in the tag form. The doors (`exec`, `watch`, `run`) read replies and
//! hand their tags here; nothing here decides, asks or logs: the executor does.

mod convert;

use std::io::Read;

use crate::protocol::tags::map::{ExistingText, write_call};
use crate::protocol::tags::{
    ResultTag, SmartWriteMode, Tag, TagAction, TagError, TagKind, TagResult, map_tag,
};
use crate::sandbox::{SandboxError, sha256_hex};
use crate::tools::ToolError;
use crate::tools::executor::{Execution, Executor};

pub use convert::{bash_result, builtin_result, child_result};

/// The largest file a writing `smart_edit` reads to keep its byte-order mark and line ends.
const MAX_EDITED_BYTES: u64 = 64 * 1024 * 1024;

/// What one tool tag came to.
#[derive(Debug)]
pub struct TagAnswer {
    /// The result, in the tag form.
    pub result: TagResult,
    /// Whether it succeeded.
    pub ok: bool,
    /// The call's execution, when one ran (or was refused by the call service).
    pub execution: Option<Execution>,
}

impl TagAnswer {
    /// A tag that could not become a call: its error, in the form of its tag.
    pub fn refused(kind: TagKind, builtin: &str, error: &TagError) -> TagAnswer {
        let mut result = TagResult::failure(
            &result_name(kind, builtin),
            error.code,
            &error.message,
            &error.hint,
        );
        if kind == TagKind::BashCall {
            result.tag = ResultTag::BashCall;
            result.attributes = vec![
                ("exit_code".into(), "-1".into()),
                ("duration_ms".into(), "0".into()),
            ];
        }
        TagAnswer {
            result,
            ok: false,
            execution: None,
        }
    }
}

/// The `name` of a builtin result: the builtin's name, or the tag's.
fn result_name(kind: TagKind, builtin: &str) -> String {
    if builtin.is_empty() {
        kind.name().to_owned()
    } else {
        builtin.to_owned()
    }
}

/// Runs sub-agents for `<create_agent>` where a door has them (`flycode run`).
pub trait ChildAgents {
    /// Runs `task` as a sub-agent (the predefined agent `name`, if given) to its end, and
    /// answers with its `<child_summary>`.
    fn run_child(&self, task: &str, name: Option<&str>, id: &str) -> TagAnswer;
}

/// Runs the tool tags of replies through one executor.
pub struct TagDoor<'e, 'a> {
    executor: &'e Executor<'a>,
    /// The first allowed root, where relative builtin paths are taken.
    base: Option<String>,
    children: Option<&'e dyn ChildAgents>,
}

impl<'e, 'a> TagDoor<'e, 'a> {
    /// A door running calls through `executor`; relative paths are taken inside its first
    /// root.
    pub fn new(executor: &'e Executor<'a>) -> TagDoor<'e, 'a> {
        let base = executor
            .sandbox()
            .roots()
            .first()
            .map(|root| root.display().to_string());
        TagDoor {
            executor,
            base,
            children: None,
        }
    }

    /// `<create_agent>` runs a sub-agent through `children` (instead of `agent.task`).
    pub fn with_children(mut self, children: &'e dyn ChildAgents) -> Self {
        self.children = Some(children);
        self
    }

    /// The first allowed root.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// Runs `tags` in order, each under the id `next_id` gives, and answers each.
    pub fn answer(&self, tags: &[Tag], next_id: &mut dyn FnMut() -> String) -> Vec<TagAnswer> {
        tags.iter()
            .map(|tag| self.answer_one(tag, &next_id()))
            .collect()
    }

    fn answer_one(&self, tag: &Tag, id: &str) -> TagAnswer {
        let mapped = map_tag(tag, id, self.base());
        if tag.kind == TagKind::CreateAgent && mapped.action.is_ok() {
            let Some(children) = self.children else {
                return TagAnswer::refused(tag.kind, "", &no_children());
            };
            let name = tag.attributes.first().map(|(_, value)| value.as_str());
            return children.run_child(tag.body.trim(), name, id);
        }
        let action = match mapped.action {
            Ok(action) => action,
            Err(error) => return TagAnswer::refused(tag.kind, &mapped.builtin, &error),
        };
        match action {
            TagAction::Call(call) => {
                let execution = self.executor.execute(&call);
                convert::answer_of(tag.kind, &mapped.builtin, execution)
            }
            TagAction::ReadFile {
                call,
                start_line,
                capped_from,
            } => {
                let execution = self.executor.execute(&call);
                convert::read_file_answer(execution, start_line, capped_from)
            }
            TagAction::Write { path, mode, text } => {
                match self
                    .existing_text(&path)
                    .and_then(|existing| write_call(id, &path, mode, &text, existing.as_ref()))
                {
                    Ok(call) => {
                        let execution = self.executor.execute(&call);
                        convert::write_answer(execution, mode)
                    }
                    Err(error) => TagAnswer::refused(tag.kind, &mapped.builtin, &error),
                }
            }
        }
    }

    /// The text a writing `smart_edit` keeps the byte-order mark and line ends of: `None` when
    /// the file does not exist yet. Read through the sandbox (inside the roots, never through a
    /// link out); the write that follows is the call the service decides and logs.
    fn existing_text(&self, path: &str) -> Result<Option<ExistingText>, TagError> {
        let file = match self.executor.sandbox().open_for_reading(path) {
            Ok(file) => file,
            Err(SandboxError::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(tag_error(ToolError::from(error))),
        };
        let mut bytes = Vec::new();
        file.take(MAX_EDITED_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| {
                TagError::new(
                    crate::protocol::ErrorCode::IoError,
                    format!("{path} could not be read: {error}"),
                    "Try again, or use mode: Patch.".into(),
                )
            })?;
        if bytes.len() as u64 > MAX_EDITED_BYTES {
            return Err(TagError::new(
                crate::protocol::ErrorCode::TooLarge,
                format!("{path} is larger than 64 MiB"),
                "Edit it with mode: Patch.".into(),
            ));
        }
        let sha256 = sha256_hex(&bytes);
        let Ok(mut text) = String::from_utf8(bytes) else {
            return Err(TagError::new(
                crate::protocol::ErrorCode::BinaryContent,
                format!("{path} is not UTF-8 text"),
                "smart_edit writes text files only.".into(),
            ));
        };
        let bom = text.starts_with('\u{feff}');
        if bom {
            text.drain(..'\u{feff}'.len_utf8());
        }
        Ok(Some(ExistingText { text, bom, sha256 }))
    }
}

/// `<create_agent>` where no sub-agent can run (`exec`, `watch`).
fn no_children() -> TagError {
    TagError::new(
        crate::protocol::ErrorCode::DeniedByPolicy,
        "<create_agent> starts a sub-agent only in `flycode run`; this door (exec, watch) runs none".into(),
        "Do the work yourself with <bash_call> and <builtin> tags.".into(),
    )
}

fn tag_error(error: ToolError) -> TagError {
    TagError::new(
        error.code,
        error.message,
        error.hint.unwrap_or_else(|| "Check the path.".into()),
    )
}

/// The answers as the model reads them, one after the other, flycode's secrets masked.
pub fn render_answers(results: &[&TagResult], secrets: &crate::tools::secrets::Secrets) -> String {
    let text: Vec<String> = results.iter().map(|result| result.render()).collect();
    secrets.mask(&text.join("\n")).into_owned()
}

/// Which mode a writing `smart_edit` was, as its result names it.
fn mode_name(mode: SmartWriteMode) -> &'static str {
    match mode {
        SmartWriteMode::Create => "Create",
        SmartWriteMode::Append => "Append",
        SmartWriteMode::Prepend => "Prepend",
    }
}
