//! `fs.edit`: exact-text replacements in one file (PROTOCOL.md §9 (Tools), seed 000's `smart_edit` in Patch
//! mode), in two steps: [`plan`] reads the file through the sandbox, applies the edits in memory
//! (`edit/apply.rs`) and judges the result with the omission guard, writing nothing (the approval
//! question's preview is this plan); `apply` writes it back atomically through
//! [`Sandbox::write_file`], with the hash of what it read as the precondition, so a change made
//! between the read and the write is reported (`stale_file`), never overwritten.
//!
//! Decisions the contract leaves open (documented in PROTOCOL.md): the BOM is kept and never
//! part of the text edited; oldText/newText take the file's line endings (a mixed file: as
//! written, then LF, then CRLF); edits that change nothing succeed with no diff and write
//! nothing; a dry run is a read (no stale-read guard, allowed under `read-only`), judged by the
//! omission guard like a real edit.

pub mod apply;
pub mod closest;

use std::borrow::Cow;
use std::io::Read;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};
use similar::{DiffTag, TextDiff};

use self::apply::{Edit, EditFailure, EditedText, LineEndings};
use crate::protocol::{ErrorCode, ToolName};
use crate::sandbox::{LastComponent, Sandbox, WriteMode, sha256_hex};
use crate::tools::fs::omission;
use crate::tools::fs::read::MAX_READ_BYTES;
use crate::tools::preview::Preview;
use crate::tools::secrets::Secrets;
use crate::tools::tool::{
    ApprovalClass, Effects, SessionChange, Tool, ToolContext, plural, shorten_path,
};
use crate::tools::{ToolError, ToolOutput};

/// The UTF-8 byte order mark.
const BOM: &str = "\u{feff}";

/// Unchanged lines around each change in the diff.
const CONTEXT_LINES: usize = 3;

/// The arguments of `fs.edit` (see `protocol/schemas/fs.edit.json`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditArgs {
    /// The file.
    pub path: String,
    /// The replacements, in order.
    pub edits: Vec<EditArg>,
    /// The sha256 the current content must have.
    pub expected_sha256: Option<String>,
    /// Show the diff, change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// One replacement.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditArg {
    /// The exact text to replace.
    pub old_text: String,
    /// What to put in its place.
    pub new_text: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// The file as read: its hash, the BOM and the text after it.
struct Original {
    sha256: String,
    bom: bool,
    text: String,
}

/// What an edit would make of its file, before anything is written ([`plan`]).
struct EditPlan {
    /// The file as read.
    original: Original,
    /// The text after the edits.
    applied: EditedText,
    /// What the file would hold: the BOM, if it had one, and the edited text.
    new_bytes: Vec<u8>,
    /// The file's line endings, which the edits took.
    endings: LineEndings,
    /// Whether the text changes at all.
    changed: bool,
}

/// Runs `fs.edit`: its [`plan`], then [`apply`](fn@apply).
pub fn run(sandbox: &Sandbox, args: &EditArgs, secrets: &Secrets) -> Result<ToolOutput, ToolError> {
    let plan = plan(sandbox, args, secrets)?;
    apply(sandbox, args, plan)
}

/// Plans the edit, writing nothing: the file read through the sandbox (a protected file refused
/// first), `expectedSha256` checked, the edits applied in memory and the result judged by the
/// omission guard. What the approval question shows ([`FsEdit::preview`](Tool::preview)) and
/// what [`apply`](fn@apply) lands are this same plan.
fn plan(sandbox: &Sandbox, args: &EditArgs, secrets: &Secrets) -> Result<EditPlan, ToolError> {
    let path = args.path.as_str();
    // A protected file is refused before it is read: a dry run of an edit that can never be made
    // would only mislead.
    let resolved = sandbox.resolve(path, LastComponent::Follow)?;
    sandbox.protection().check(path, &resolved.absolute)?;
    let original = read_original(sandbox, path)?;
    if let Some(expected) = &args.expected_sha256
        && *expected != original.sha256
    {
        return Err(ToolError::new(
            ErrorCode::Sha256Mismatch,
            format!(
                "{path} has changed: its sha256 is {}, not the expected {expected}; nothing was changed",
                original.sha256
            ),
            Some(
                "read the file (fs.read shows its sha256) and base the edits on its current content; give expectedSha256 only as a read of this file showed it",
            ),
        ));
    }
    let endings = LineEndings::of(&original.text);
    let edits: Vec<Edit<'_>> = args
        .edits
        .iter()
        .map(|e| Edit {
            old: &e.old_text,
            new: &e.new_text,
            all: e.replace_all,
        })
        .collect();
    let applied = apply::apply(&original.text, endings, &edits, secrets)
        .map_err(|failure| explain_failure(path, &args.edits, failure))?;
    let new_bytes = if original.bom {
        [BOM, applied.text.as_str()].concat().into_bytes()
    } else {
        applied.text.clone().into_bytes()
    };
    refuse_omission(path, &original, applied.text.len(), args)?;
    let changed = applied.text != original.text;
    Ok(EditPlan {
        original,
        applied,
        new_bytes,
        endings,
        changed,
    })
}

/// Lands `plan`: writes the new bytes where the text changes and this is no dry run, if the
/// file still holds what the plan read; the result.
fn apply(sandbox: &Sandbox, args: &EditArgs, plan: EditPlan) -> Result<ToolOutput, ToolError> {
    let sha256 = if plan.changed && !args.dry_run {
        write(sandbox, &args.path, &plan.new_bytes, &plan.original.sha256)?
    } else {
        sha256_hex(&plan.new_bytes)
    };
    Ok(output(
        args,
        &plan,
        Written {
            sha256,
            bytes: plan.new_bytes.len(),
        },
    ))
}

/// Reads the file: a regular UTF-8 text file that exists (fs.edit never creates one).
fn read_original(sandbox: &Sandbox, path: &str) -> Result<Original, ToolError> {
    let mut file = sandbox.open_for_reading(path).map_err(|error| {
        let code = error.code();
        let mut error = ToolError::from(error);
        match code {
            ErrorCode::NotFound => {
                error.hint = Some(
                    "fs.edit changes existing files only; create a file with fs.write".to_owned(),
                );
            }
            ErrorCode::IsDirectory | ErrorCode::SpecialFile => {
                error.hint = Some("fs.edit changes regular text files only".to_owned());
            }
            _ => {}
        }
        error
    })?;
    let size = file.metadata().map_or(0, |m| m.len());
    if size > MAX_READ_BYTES {
        return Err(ToolError::new(
            ErrorCode::TooLarge,
            format!("{path} is {size} bytes, more than fs.edit loads ({MAX_READ_BYTES})"),
            Some("edit a file this large with a program through process.run (sed, a script)"),
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(ErrorCode::IoError, format!("{path}: {e}"), None))?;
    let sha256 = sha256_hex(&bytes);
    let mut text = String::from_utf8(bytes).map_err(|e| {
        ToolError::new(
            ErrorCode::BinaryContent,
            format!(
                "{path} is not UTF-8 text (invalid byte at offset {}); fs.edit changes text files only, nothing was changed",
                e.utf8_error().valid_up_to()
            ),
            Some(
                "change a binary or otherwise encoded file with a program through process.run, or replace it whole with fs.write",
            ),
        )
    })?;
    // The BOM is taken off in place: a megabyte file is not copied for it.
    let bom = text.starts_with(BOM);
    if bom {
        text.drain(..BOM.len());
    }
    Ok(Original { sha256, bom, text })
}

/// A `no_match` or `ambiguous_match`, naming the edit; the closest lines go in the body.
fn explain_failure(path: &str, edits: &[EditArg], failure: EditFailure) -> ToolError {
    // Later edits apply to what the earlier ones made.
    let where_ = |index: usize| match index {
        0 => path.to_owned(),
        1 => format!("{path} after edits[0]"),
        _ => format!("{path} after edits[0] to edits[{}]", index - 1),
    };
    match failure {
        EditFailure::Ambiguous {
            index,
            count,
            lines,
        } => explain_ambiguous(index, count, &lines, &where_(index)),
        EditFailure::Secret { index } => ToolError::new(
            ErrorCode::DeniedByPolicy,
            format!(
                "edits[{index}].oldText overlaps a secret's text in {} (a value flycode masks as ***); an edit may not change part of a secret, since that would show the rest of it; nothing was changed",
                where_(index)
            ),
            Some(
                "leave the masked text whole: edit around it, or ask the user to change the secret themselves",
            ),
        ),
        EditFailure::NoMatch { index, closest } => {
            let lines = edits
                .get(index)
                .map_or(0, |e| e.old_text.lines().count().max(1));
            explain_no_match(index, lines, &where_(index), closest)
        }
    }
}

/// `ambiguous_match`: where the first occurrences are.
fn explain_ambiguous(index: usize, count: usize, lines: &[usize], where_: &str) -> ToolError {
    let shown = lines
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let which = if lines.len() < count {
        format!("the first {} at lines {shown}", lines.len())
    } else {
        format!("at lines {shown}")
    };
    ToolError::new(
        ErrorCode::AmbiguousMatch,
        format!(
            "edits[{index}].oldText occurs {count} times in {where_} ({which}); it must occur exactly once; nothing was changed"
        ),
        Some(
            "add neighbouring lines to oldText so that it occurs once, or set replaceAll: true to replace every occurrence",
        ),
    )
}

/// `no_match` for an oldText of `lines` lines: the most similar lines of the file named in the
/// message and shown in the body, or that none resembles it.
fn explain_no_match(
    index: usize,
    lines: usize,
    where_: &str,
    closest: Option<closest::Closest>,
) -> ToolError {
    let mut message = format!(
        "edits[{index}].oldText ({}) does not occur in {where_} (0 matches); nothing was changed",
        plural(lines, "line"),
    );
    let Some(closest) = closest else {
        message.push_str("; no line of the file resembles it");
        return ToolError::new(
            ErrorCode::NoMatch,
            message,
            Some("read the file (fs.read) and copy oldText from it exactly"),
        );
    };
    let range = closest.range();
    let (lines_are, read_with, differ) = if closest.lines.len() == 1 {
        ("line is", "line", "differs")
    } else {
        ("lines are", "lines", "differ")
    };
    message.push_str(&format!(
        "; the most similar {lines_are} {range}, shown below{}",
        if closest.whitespace_only {
            format!(", and {differ} from oldText only in whitespace or indentation")
        } else {
            String::new()
        }
    ));
    let mut error = ToolError::new(
        ErrorCode::NoMatch,
        message,
        Some(&format!(
            "copy oldText exactly from the file, whitespace and indentation included (fs.read with {read_with} {range})"
        )),
    );
    error.output = Some(Box::new(ToolOutput {
        body: Some(closest.render()),
        fields: Vec::new(),
        data: json!({
            "edit": index,
            "closestLines": range,
            "closest": closest.lines,
            "whitespaceOnly": closest.whitespace_only,
        }),
        continue_hint: None,
        kept: None,
    }));
    error
}

/// The omission guard on the edited file (see [`omission::judge_edit`]).
fn refuse_omission(
    path: &str,
    original: &Original,
    new_len: usize,
    args: &EditArgs,
) -> Result<(), ToolError> {
    let pairs = args
        .edits
        .iter()
        .map(|e| (e.old_text.as_str(), e.new_text.as_str()));
    let Some((index, found)) = omission::judge_edit(original.text.as_bytes(), new_len, pairs)
    else {
        return Ok(());
    };
    Err(ToolError::new(
        ErrorCode::OmissionPlaceholder,
        format!(
            "{path}: the edits would shrink the file from {} to {new_len} bytes, and line {} of edits[{index}].newText is a placeholder ({:?}), not the text it stands for; nothing was changed",
            original.text.len(),
            found.line,
            found.text
        ),
        Some(
            "copy the real text instead of a placeholder, and leave the parts that do not change out of the edits",
        ),
    ))
}

/// Writes the new bytes, if the file still holds what was read.
fn write(sandbox: &Sandbox, path: &str, bytes: &[u8], read: &str) -> Result<String, ToolError> {
    let outcome = sandbox
        .write_file(path, bytes, WriteMode::Overwrite, Some(read))?
        .map_err(|mismatch| {
            ToolError::new(
                ErrorCode::StaleFile,
                format!(
                    "{path} changed while it was being edited: its sha256 is now {}; nothing was changed",
                    mismatch.actual
                ),
                Some("read the file again and repeat the edits on its current content"),
            )
        })?;
    Ok(outcome.sha256)
}

/// What the edit wrote (or, in a dry run, would write).
struct Written {
    sha256: String,
    bytes: usize,
}

/// The diff of a plan, as the result's body shows it.
struct EditDiff {
    /// The unified diff (or the line saying there is none).
    body: String,
    added: usize,
    removed: usize,
    /// The changed lines of the new text (0-based, end exclusive), where a line changed.
    new_lines: Option<(usize, usize)>,
}

impl EditPlan {
    /// The plan's diff of the file named `path`.
    fn diff(&self, path: &str) -> EditDiff {
        let old = display_text(&self.original.text);
        let new = display_text(&self.applied.text);
        let diff = TextDiff::from_lines(old.as_ref(), new.as_ref());
        let (mut added, mut removed) = (0, 0);
        let mut new_lines: Option<(usize, usize)> = None;
        for op in diff.ops() {
            let (tag, old_range, new_range) = op.as_tag_tuple();
            if tag == DiffTag::Equal {
                continue;
            }
            removed += old_range.len();
            added += new_range.len();
            let (start, _) = new_lines.unwrap_or((new_range.start, 0));
            new_lines = Some((start, new_range.end.max(start + 1)));
        }
        let body = if !self.changed {
            "no changes: every edit leaves the text as it was; nothing was written\n".to_owned()
        } else if new_lines.is_none() {
            "(only line endings changed, which a line diff does not show)\n".to_owned()
        } else {
            diff.unified_diff()
                .context_radius(CONTEXT_LINES)
                .header(path, path)
                .to_string()
        };
        EditDiff {
            body,
            added,
            removed,
            new_lines,
        }
    }
}

/// The result: the unified diff as the body.
fn output(args: &EditArgs, plan: &EditPlan, written: Written) -> ToolOutput {
    let EditDiff {
        body,
        added,
        removed,
        new_lines,
    } = plan.diff(&args.path);
    let continue_hint = match (args.dry_run, new_lines) {
        (true, _) => "nothing was changed (dryRun); dry-run fewer edits at a time to see each diff"
            .to_owned(),
        (false, Some((start, end))) => format!(
            "the edits were applied; read the changed lines with fs.read lines {}-{end}",
            start + 1
        ),
        (false, None) => "the edits were applied; read the file with fs.read".to_owned(),
    };
    let replacements = plan.applied.replacements;
    let mut fields = vec![
        ("replacements".to_owned(), replacements.to_string()),
        ("bytes".to_owned(), written.bytes.to_string()),
        ("sha256".to_owned(), written.sha256.clone()),
    ];
    if args.dry_run {
        fields.push(("dryRun".to_owned(), "true".to_owned()));
    }
    ToolOutput {
        data: json!({
            "path": args.path,
            "sha256": written.sha256,
            "replacements": replacements,
            "dryRun": args.dry_run,
            "changed": plan.changed,
            "bytes": written.bytes,
            "linesAdded": added,
            "linesRemoved": removed,
            "lineEndings": plan.endings.as_str(),
            "bom": plan.original.bom,
            "diff": body,
        }),
        body: Some(body),
        fields,
        continue_hint: Some(continue_hint),
        kept: None,
    }
}

/// The text as the diff shows it: line ends without their `\r`, so a CRLF file's diff reads
/// like any other.
fn display_text(text: &str) -> Cow<'_, str> {
    if memchr::memchr(b'\r', text.as_bytes()).is_some() {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// `fs.edit` in the registry.
pub struct FsEdit;

impl Tool for FsEdit {
    type Args = EditArgs;
    const NAME: ToolName = ToolName::FsEdit;

    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Write
    }

    /// A dry run only reads.
    fn effects<'a>(&self, args: &'a EditArgs) -> Effects<'a> {
        if args.dry_run {
            Effects::reading([args.path.as_str()])
        } else {
            Effects::writing([args.path.as_str()])
                .replacing_files()
                .staging_first()
        }
    }

    fn guarded_paths<'a>(&self, args: &'a EditArgs) -> Vec<&'a str> {
        if args.expected_sha256.is_some() || args.dry_run {
            Vec::new()
        } else {
            vec![args.path.as_str()]
        }
    }

    fn session_changes<'a>(
        &self,
        args: &'a EditArgs,
        output: &ToolOutput,
    ) -> Vec<SessionChange<'a>> {
        let wrote = !args.dry_run && output.data["changed"] == Value::Bool(true);
        output.data["sha256"]
            .as_str()
            .filter(|_| wrote)
            .map(|hash| SessionChange::Wrote(args.path.clone(), hash.to_owned()))
            .into_iter()
            .collect()
    }

    fn subject(&self, args: &EditArgs, roots: &[PathBuf]) -> String {
        shorten_path(&args.path, roots)
    }

    fn summary(&self, output: &ToolOutput) -> String {
        let data = &output.data;
        let number = |key: &str| data.get(key).and_then(Value::as_u64).unwrap_or(0);
        let places = plural(
            usize::try_from(number("replacements")).unwrap_or(0),
            "place",
        );
        if data.get("changed") == Some(&Value::Bool(false)) {
            return format!("No change ({places} matched)");
        }
        let verb = if data.get("dryRun") == Some(&Value::Bool(true)) {
            "Would edit"
        } else {
            "Edited"
        };
        format!(
            "{verb} {places} (+{} −{} lines)",
            number("linesAdded"),
            number("linesRemoved")
        )
    }

    /// The diff of the planned edit, masked as composed text as its result is (PROTOCOL.md §9
    /// (Secrets and masking)); nothing is written.
    fn preview(&self, args: &EditArgs, sandbox: &Sandbox, secrets: &Secrets) -> Option<Preview> {
        let diff = plan(sandbox, args, secrets).ok()?.diff(&args.path);
        let lines = secrets
            .mask(&diff.body)
            .lines()
            .map(str::to_owned)
            .collect();
        Some(Preview::file(lines, Some((diff.added, diff.removed))))
    }

    fn run(&self, context: &ToolContext<'_>, args: &EditArgs) -> Result<ToolOutput, ToolError> {
        run(context.sandbox, args, &context.limits.secrets())
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests;
