//! What a write would change, shown in the approval question (PROTOCOL.md §10 (Running calls),
//! "The diff in the question") and in `flycode mcp`'s approval form: for a tool that writes files'
//! content (`fs.write`, `fs.edit`, `fs.writeBatch`), the unified diff of each file's current
//! content, read through the sandbox, against what the call would leave, with flycode's secrets
//! masked, capped at [`PREVIEW_LINES`] lines, and the lines it adds and removes.
//!
//! Each tool makes its own ([`Tool::preview`](super::tool::Tool::preview)) from a plan of its
//! change, never by running itself: it only reads. Nothing is written, locked or remembered, and a
//! file the sandbox refuses (out of the roots, flycode's own, a special file) adds nothing to the
//! question. The call is judged and run afterwards exactly as it would have been without the
//! preview.

use std::io::Read;
use std::time::{Duration, Instant};

use similar::{DiffTag, TextDiff};

use super::secrets::Secrets;
use crate::protocol::ErrorCode;
use crate::sandbox::Sandbox;

/// The most diff lines a question shows; the rest is counted in a last line,
/// `… N more lines`.
pub const PREVIEW_LINES: usize = 40;

/// The largest file whose diff a question shows (1 MiB); a larger one gets a line saying so.
pub const PREVIEW_MAX_BYTES: u64 = 1024 * 1024;

/// How long the diff of one file may take before a coarser (still correct) diff is shown.
const DIFF_TIME: Duration = Duration::from_millis(500);

/// Unchanged lines around each change.
const CONTEXT_LINES: usize = 3;

/// What a call would change in files, masked: the diff of each file in lines, and the lines
/// added and removed where every file could be compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preview {
    /// The diff, in lines, without line ends; hidden characters are left as they are (the
    /// question escapes every line).
    lines: Vec<String>,
    /// Lines added and removed, where every file was compared (not one over 1 MiB, or not
    /// UTF-8 text).
    counts: Option<(usize, usize)>,
    /// How many files the call writes.
    files: usize,
}

impl Preview {
    /// The preview of one file: its diff in lines, and the lines added and removed, if known.
    pub fn file(lines: Vec<String>, counts: Option<(usize, usize)>) -> Preview {
        Preview {
            lines,
            counts,
            files: 1,
        }
    }

    /// The previews of several files written together, in turn (`None` when there are none).
    pub fn files(previews: impl IntoIterator<Item = Preview>) -> Option<Preview> {
        previews.into_iter().reduce(|mut all, one| {
            all.lines.extend(one.lines);
            all.counts = all
                .counts
                .zip(one.counts)
                .map(|((a, r), (more_a, more_r))| (a + more_a, r + more_r));
            all.files += one.files;
            all
        })
    }

    /// The diff as the question shows it: at most [`PREVIEW_LINES`] lines, then
    /// `… N more lines`.
    pub fn text(&self) -> String {
        let shown = self.lines.len().min(PREVIEW_LINES);
        let mut text = self.lines[..shown].join("\n");
        if self.lines.len() > PREVIEW_LINES {
            let more = self.lines.len() - PREVIEW_LINES;
            text.push_str(&format!(
                "\n… {more} more line{}",
                if more == 1 { "" } else { "s" }
            ));
        }
        text
    }

    /// The size of the change, `change: +3 -1 lines` (`… in 2 files` for several), where every
    /// file could be compared; `change: 2 files` for several files that could not all be.
    pub fn stat(&self) -> Option<String> {
        let files = if self.files > 1 {
            format!(" in {} files", self.files)
        } else {
            String::new()
        };
        match self.counts {
            Some((added, removed)) => Some(format!("change: +{added} -{removed} lines{files}")),
            None if self.files > 1 => Some(format!("change: {} files", self.files)),
            None => None,
        }
    }
}

/// A file as the preview found it.
enum Current {
    /// It holds these bytes.
    Bytes(Vec<u8>),
    /// There is no file yet: the write creates it.
    Missing,
    /// It is larger than [`PREVIEW_MAX_BYTES`].
    TooLarge(u64),
}

/// What the file at `path` holds now; `None` where the sandbox refuses it (or it cannot be read).
fn current(sandbox: &Sandbox, path: &str) -> Option<Current> {
    let mut file = match sandbox.open_for_reading(path) {
        Ok(file) => file,
        Err(error) if error.code() == ErrorCode::NotFound => return Some(Current::Missing),
        Err(_) => return None,
    };
    let size = file.metadata().ok()?.len();
    if size > PREVIEW_MAX_BYTES {
        return Some(Current::TooLarge(size));
    }
    let mut bytes = Vec::new();
    file.by_ref()
        .take(PREVIEW_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > PREVIEW_MAX_BYTES {
        return Some(Current::TooLarge(bytes.len() as u64));
    }
    Some(Current::Bytes(bytes))
}

/// The preview of writing `content` to the file at `path` (appending it, with `append`): what
/// `fs.write` and each entry of `fs.writeBatch` show. `None` where the sandbox refuses the file.
pub fn file_write(
    sandbox: &Sandbox,
    secrets: &Secrets,
    path: &str,
    content: &str,
    append: bool,
) -> Option<Preview> {
    let (old, new, old_name) = match current(sandbox, path)? {
        Current::TooLarge(size) => {
            return Some(Preview::file(
                vec![format!(
                    "{path}: {size} bytes now, more than the question compares ({PREVIEW_MAX_BYTES}): no diff shown"
                )],
                None,
            ));
        }
        Current::Missing => (Vec::new(), content.as_bytes().to_vec(), "/dev/null"),
        Current::Bytes(old) => {
            let new = if append {
                [old.as_slice(), content.as_bytes()].concat()
            } else {
                content.as_bytes().to_vec()
            };
            (old, new, path)
        }
    };
    let (Some(old), Some(new)) = (masked_text(old, secrets), masked_text(new, secrets)) else {
        return Some(Preview::file(
            vec![format!("{path}: not UTF-8 text now: no diff shown")],
            None,
        ));
    };
    if old == new {
        return Some(Preview::file(
            vec![format!("{path}: no change (it already holds this content)")],
            Some((0, 0)),
        ));
    }
    let (lines, counts) = unified(&old, &new, old_name, path);
    Some(Preview::file(lines, Some(counts)))
}

/// `bytes` with their secrets masked byte for byte (PROTOCOL.md §9 (Secrets and masking)), as
/// text; `None` when they are not UTF-8.
fn masked_text(mut bytes: Vec<u8>, secrets: &Secrets) -> Option<String> {
    std::str::from_utf8(&bytes).ok()?;
    secrets.mask_bytes(&mut bytes);
    Some(
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// The unified diff of `old` against `new`, in lines, without line ends, and the lines added
/// and removed.
fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> (Vec<String>, (usize, usize)) {
    let diff = TextDiff::configure()
        .deadline(Instant::now() + DIFF_TIME)
        .diff_lines(old, new);
    let lines = diff
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .header(old_name, new_name)
        .to_string()
        .lines()
        .map(str::to_owned)
        .collect();
    (lines, line_counts(&diff))
}

/// The lines a diff adds and removes.
fn line_counts(diff: &TextDiff<'_, '_, str>) -> (usize, usize) {
    diff.ops()
        .iter()
        .map(|op| op.as_tag_tuple())
        .filter(|(tag, _, _)| *tag != DiffTag::Equal)
        .fold((0, 0), |(added, removed), (_, old, new)| {
            (added + new.len(), removed + old.len())
        })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::{Call, ToolName};
    use crate::sandbox::Roots;
    use crate::tools::registry::Invocation;
    use serde_json::Value;

    struct Fixture {
        _temp: tempfile::TempDir,
        root: std::path::PathBuf,
        sandbox: Sandbox,
    }

    fn fixture() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap().join("root");
        std::fs::create_dir(&root).unwrap();
        let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
        Fixture {
            _temp: temp,
            root,
            sandbox,
        }
    }

    fn call(tool: ToolName, args: Value) -> Call {
        Call {
            id: Some("c".into()),
            tool,
            args: args.as_object().cloned().unwrap(),
        }
    }

    /// The call's preview as the tool plans it.
    fn preview_of(call: &Call, sandbox: &Sandbox, secrets: &Secrets) -> Option<Preview> {
        Invocation::new(call)
            .unwrap()
            .bound()
            .preview(sandbox, secrets)
    }

    /// The question's diff.
    fn write_preview(call: &Call, sandbox: &Sandbox, secrets: &Secrets) -> Option<String> {
        preview_of(call, sandbox, secrets).map(|preview| preview.text())
    }

    #[test]
    fn an_overwrite_shows_the_changed_lines_against_the_file() {
        let f = fixture();
        let path = f.root.join("a.txt");
        std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
        let preview = write_preview(
            &call(
                ToolName::FsWrite,
                json!({"path": path, "mode": "overwrite", "content": "one\nTWO\nthree\n"}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        let name = path.display();
        assert_eq!(
            preview,
            format!("--- {name}\n+++ {name}\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three")
        );
    }

    #[test]
    fn a_new_file_is_all_added_and_an_append_adds_at_the_end() {
        let f = fixture();
        let new = f.root.join("sub/new.txt");
        let preview = write_preview(
            &call(
                ToolName::FsWrite,
                json!({"path": new, "mode": "overwrite", "content": "a\nb\n"}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        assert_eq!(
            preview,
            format!(
                "--- /dev/null\n+++ {}\n@@ -0,0 +1,2 @@\n+a\n+b",
                new.display()
            )
        );
        let log = f.root.join("log.txt");
        std::fs::write(&log, "1\n2\n3\n4\n5\n").unwrap();
        let preview = write_preview(
            &call(
                ToolName::FsWrite,
                json!({"path": log, "mode": "append", "content": "6\n"}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        assert!(
            preview.ends_with("@@ -3,3 +3,4 @@\n 3\n 4\n 5\n+6"),
            "{preview}"
        );
    }

    #[test]
    fn a_long_diff_is_cut_at_forty_lines_and_counts_the_rest() {
        let f = fixture();
        let path = f.root.join("big.txt");
        let content: String = (0..100).map(|n| format!("line {n}\n")).collect();
        let preview = write_preview(
            &call(
                ToolName::FsWrite,
                json!({"path": path, "mode": "overwrite", "content": content}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        let lines: Vec<&str> = preview.lines().collect();
        // 3 header lines and 100 added lines: 40 shown, 63 counted.
        assert_eq!(lines.len(), PREVIEW_LINES + 1, "{preview}");
        assert_eq!(lines[PREVIEW_LINES], "… 63 more lines");
    }

    #[test]
    fn a_file_the_sandbox_refuses_adds_nothing() {
        let f = fixture();
        let outside = f.root.parent().unwrap().join("outside.txt");
        std::fs::write(&outside, "secret plans\n").unwrap();
        let preview = write_preview(
            &call(
                ToolName::FsWrite,
                json!({"path": outside, "mode": "overwrite", "content": "x\n"}),
            ),
            &f.sandbox,
            &Secrets::default(),
        );
        assert_eq!(preview, None);
        let link = f.root.join("link.txt");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let preview = write_preview(
            &call(
                ToolName::FsWrite,
                json!({"path": link, "mode": "overwrite", "content": "x\n"}),
            ),
            &f.sandbox,
            &Secrets::default(),
        );
        assert_eq!(preview, None);
    }

    #[test]
    fn an_edit_shows_its_planned_diff_and_changes_nothing() {
        let f = fixture();
        let path = f.root.join("main.rs");
        std::fs::write(&path, "fn main() {\n    println!(\"hi\");\n}\n").unwrap();
        let preview = write_preview(
            &call(
                ToolName::FsEdit,
                json!({"path": path, "edits": [{"oldText": "\"hi\"", "newText": "\"hello\""}]}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        assert!(
            preview.contains("-    println!(\"hi\");\n+    println!(\"hello\");"),
            "{preview}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "fn main() {\n    println!(\"hi\");\n}\n"
        );
    }

    #[test]
    fn a_batch_shows_each_file() {
        let f = fixture();
        let a = f.root.join("a.txt");
        let b = f.root.join("b.txt");
        std::fs::write(&a, "old\n").unwrap();
        let preview = write_preview(
            &call(
                ToolName::FsWriteBatch,
                json!({"files": [{"path": a, "content": "new\n"}, {"path": b, "content": "b\n"}]}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        assert!(preview.contains("-old\n+new"), "{preview}");
        assert!(
            preview.contains(&format!("--- /dev/null\n+++ {}", b.display())),
            "{preview}"
        );
    }

    #[test]
    fn secrets_in_the_file_and_in_the_content_are_masked() {
        let f = fixture();
        let key = "sk-preview-secret-0123456789";
        let secrets = Secrets::from_values([key.to_owned()]);
        let path = f.root.join(".env");
        std::fs::write(&path, format!("A=1\nKEY={key}\nB=2\n")).unwrap();
        let preview = write_preview(
            &call(
                ToolName::FsWrite,
                json!({"path": path, "mode": "overwrite", "content": format!("A=2\nKEY={key}\nB=2\n")}),
            ),
            &f.sandbox,
            &secrets,
        )
        .unwrap();
        assert!(!preview.contains(key), "{preview}");
        assert!(
            preview.contains(&format!(" KEY={}", "*".repeat(key.len()))),
            "{preview}"
        );
        let edit = write_preview(
            &call(
                ToolName::FsEdit,
                json!({"path": path, "edits": [{"oldText": "B=2", "newText": "B=3"}]}),
            ),
            &f.sandbox,
            &secrets,
        )
        .unwrap();
        assert!(!edit.contains(key), "{edit}");
        assert!(edit.contains("+B=3"), "{edit}");
    }

    #[test]
    fn the_size_of_the_change_counts_the_lines_of_every_file() {
        let f = fixture();
        let a = f.root.join("a.txt");
        std::fs::write(&a, "one\ntwo\nthree\n").unwrap();
        let write = preview_of(
            &call(
                ToolName::FsWrite,
                json!({"path": a, "mode": "overwrite", "content": "one\n2\nthree\nfour\n"}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        assert_eq!(write.stat().as_deref(), Some("change: +2 -1 lines"));
        let edit = preview_of(
            &call(
                ToolName::FsEdit,
                json!({"path": a, "edits": [{"oldText": "two\nthree\n", "newText": "2\n"}]}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        assert_eq!(edit.stat().as_deref(), Some("change: +1 -2 lines"));
        let batch = preview_of(
            &call(
                ToolName::FsWriteBatch,
                json!({"files": [{"path": a, "content": "one\n"}, {"path": f.root.join("b.txt"), "content": "b\nc\n"}]}),
            ),
            &f.sandbox,
            &Secrets::default(),
        )
        .unwrap();
        assert_eq!(
            batch.stat().as_deref(),
            Some("change: +2 -2 lines in 2 files")
        );
        // An edit that would fail shows nothing.
        let failing = call(
            ToolName::FsEdit,
            json!({"path": a, "edits": [{"oldText": "absent", "newText": "x"}]}),
        );
        assert_eq!(preview_of(&failing, &f.sandbox, &Secrets::default()), None);
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\ntwo\nthree\n");
    }

    #[test]
    fn other_tools_have_no_preview() {
        let f = fixture();
        let preview = write_preview(
            &call(ToolName::ShellExec, json!({"command": "make"})),
            &f.sandbox,
            &Secrets::default(),
        );
        assert_eq!(preview, None);
    }
}
