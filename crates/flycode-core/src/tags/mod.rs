//! Running a tag-dialect reply (PROTOCOL.md §15 (The tag dialect)): each tool tag mapped onto
//! its registry call ([`crate::protocol::tags::map`]) and run, in order, through the one call
//! service, then answered in the tag form. The doors (`exec`, `watch`, `run`) read replies and
//! hand their tags here; nothing here decides, asks or logs: the executor does.

pub mod convert;

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
    pub execution: Option<Box<Execution>>,
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

/// One tool tag, read and mapped onto what runs it: the first half of answering a tag. The
/// doors run the steps in order (`flycode run` runs consecutive read-only calls at once) and
/// turn each execution into the tag's answer with [`AnswerShape::finish`].
#[derive(Debug)]
pub enum TagStep {
    /// A registry call to run; `shape` makes its answer.
    Run {
        /// The call.
        call: Box<crate::protocol::Call>,
        /// How its execution becomes the tag's answer.
        shape: AnswerShape,
    },
    /// A writing `smart_edit`: its call is made when its turn comes (from the file as the
    /// tags before it left it), by [`TagDoor::write_step`].
    Write {
        /// The call's id.
        id: String,
        /// The file.
        path: String,
        /// Create, Append or Prepend.
        mode: SmartWriteMode,
        /// The text to write.
        text: String,
    },
    /// A `<create_agent>`: a sub-agent for the door's agent loop to run, or refused where
    /// the door has none.
    Child {
        /// The task, trimmed.
        task: String,
        /// The predefined agent it names, if any.
        name: Option<String>,
        /// The step's id.
        id: String,
    },
    /// Answered already: the tag could not become a call.
    Answered(TagAnswer),
}

/// How a call's execution becomes its tag's answer.
#[derive(Clone, Debug)]
pub enum AnswerShape {
    /// A `<bash_call>` or a builtin's result (`builtin` names it).
    Plain {
        /// The tag.
        kind: TagKind,
        /// The builtin's name (empty for other tags).
        builtin: String,
    },
    /// A `read_file` page.
    ReadFile {
        /// The first line asked for.
        start_line: u64,
        /// The `max_lines` asked for when it was over the page's cap.
        capped_from: Option<u64>,
    },
    /// A writing `smart_edit`.
    Write(SmartWriteMode),
}

impl AnswerShape {
    /// The tag's answer to `execution`.
    pub fn finish(&self, execution: Execution) -> TagAnswer {
        match self {
            AnswerShape::Plain { kind, builtin } => convert::answer_of(*kind, builtin, execution),
            AnswerShape::ReadFile {
                start_line,
                capped_from,
            } => convert::read_file_answer(execution, *start_line, *capped_from),
            AnswerShape::Write(mode) => convert::write_answer(execution, *mode),
        }
    }

    /// The tag's answer when its call did not run: `error`, in the form of its tag.
    pub fn refused(&self, error: &TagError) -> TagAnswer {
        match self {
            AnswerShape::Plain { kind, builtin } => TagAnswer::refused(*kind, builtin, error),
            AnswerShape::ReadFile { .. } => {
                TagAnswer::refused(TagKind::Builtin, "read_file", error)
            }
            AnswerShape::Write(_) => TagAnswer::refused(TagKind::Builtin, "smart_edit", error),
        }
    }
}

/// Reads the tool tags of replies into steps, and runs them in order through one executor
/// where no sub-agent runs (`exec`, `watch`).
pub struct TagDoor<'e, 'a> {
    executor: &'e Executor<'a>,
    /// The first allowed root, where relative builtin paths are taken.
    base: Option<String>,
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
        TagDoor { executor, base }
    }

    /// The first allowed root.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// Runs `tags` in order, each under the id `next_id` gives, and answers each; a
    /// `<create_agent>` is refused (no sub-agent runs at this door).
    pub fn answer(&self, tags: &[Tag], next_id: &mut dyn FnMut() -> String) -> Vec<TagAnswer> {
        tags.iter()
            .map(|tag| self.run(self.plan(tag, &next_id())))
            .collect()
    }

    /// Runs one step through the executor and answers it; a `<create_agent>` is refused.
    pub fn run(&self, step: TagStep) -> TagAnswer {
        match step {
            TagStep::Run { call, shape } => shape.finish(self.executor.execute(&call)),
            step @ TagStep::Write { .. } => match self.write_step(step) {
                Ok((call, shape)) => shape.finish(self.executor.execute(&call)),
                Err(answer) => *answer,
            },
            TagStep::Child { .. } => TagAnswer::refused(TagKind::CreateAgent, "", &no_children()),
            TagStep::Answered(answer) => answer,
        }
    }

    /// The step `tag` stands for, under the id `id`.
    pub fn plan(&self, tag: &Tag, id: &str) -> TagStep {
        let mapped = map_tag(tag, id, self.base());
        let action = match mapped.action {
            Ok(action) => action,
            Err(error) => {
                return TagStep::Answered(TagAnswer::refused(tag.kind, &mapped.builtin, &error));
            }
        };
        if tag.kind == TagKind::CreateAgent {
            return TagStep::Child {
                task: tag.body.trim().to_owned(),
                name: tag.attributes.first().map(|(_, value)| value.clone()),
                id: id.to_owned(),
            };
        }
        match action {
            TagAction::Call(call) => TagStep::Run {
                call: Box::new(call),
                shape: AnswerShape::Plain {
                    kind: tag.kind,
                    builtin: mapped.builtin,
                },
            },
            TagAction::ReadFile {
                call,
                start_line,
                capped_from,
            } => TagStep::Run {
                call: Box::new(call),
                shape: AnswerShape::ReadFile {
                    start_line,
                    capped_from,
                },
            },
            TagAction::Write { path, mode, text } => TagStep::Write {
                id: id.to_owned(),
                path,
                mode,
                text,
            },
        }
    }

    /// A writing `smart_edit`'s call, made from the file as it is now; its answer when the
    /// call cannot be made. Any other step is answered as not a write.
    pub fn write_step(
        &self,
        step: TagStep,
    ) -> Result<(crate::protocol::Call, AnswerShape), Box<TagAnswer>> {
        let TagStep::Write {
            id,
            path,
            mode,
            text,
        } = step
        else {
            return Err(Box::new(TagAnswer::refused(
                TagKind::Builtin,
                "smart_edit",
                &TagError::new(
                    crate::protocol::ErrorCode::InvalidArgs,
                    "not a writing smart_edit".into(),
                    "Send the tag again.".into(),
                ),
            )));
        };
        self.existing_text(&path)
            .and_then(|existing| write_call(&id, &path, mode, &text, existing.as_ref()))
            .map(|call| (call, AnswerShape::Write(mode)))
            .map_err(|error| Box::new(TagAnswer::refused(TagKind::Builtin, "smart_edit", &error)))
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
pub fn no_children() -> TagError {
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
