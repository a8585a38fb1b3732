//! One-line summaries for the terminal (seed 001): what a call is about, `● fs.read (README.md)`,
//! and what it did, `└ Read 1.2 KiB (42 lines)`. Each tool says it (see
//! [`flycode_core::tools::registry`]); this module clips and escapes it for the terminal.

use std::path::PathBuf;

use crate::protocol::display::escape_for_terminal;
use flycode_core::tools::registry::Invocation;
use flycode_core::tools::secrets::Secrets;

pub use flycode_core::tools::process::human_duration;

/// The call's main argument, short (a path relative to the first root that holds it, the
/// command line of a process, the number of files of a batch), of a call its tool has already read, its secrets masked before it is cut
/// (cut first, the start of a key that crosses the cut would show).
pub fn invocation_subject(
    invocation: &Invocation<'_>,
    roots: &[PathBuf],
    secrets: &Secrets,
) -> String {
    let subject = invocation.subject(roots);
    escape_for_terminal(&clip(&secrets.mask(&subject), 80)).into_owned()
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::protocol::{Call, ErrorCode, ToolName};
    use flycode_core::tools::ToolOutput;
    use flycode_core::tools::registry::tool;
    use flycode_core::tools::tool::failure_line;

    /// The call's main argument, short: a path relative to the first root that holds it, the
    /// command line of a process, the number of files of a batch.
    fn call_subject(call: &Call, roots: &[PathBuf]) -> String {
        Invocation::new(call)
            .map(|invocation| invocation_subject(&invocation, roots, &Secrets::default()))
            .unwrap_or_default()
    }
    /// What a successful call did, e.g. `Read 1.2 KiB (42 lines)` or `Exit 0 · 1.3 s`.
    fn success_summary(name: ToolName, output: &ToolOutput) -> String {
        tool(name)
            .map(|tool| tool.summary(output))
            .unwrap_or_default()
    }
    /// What a failed call reported: `Failed: not_found · /w/a.txt does not exist`, or a program's
    /// exit status.
    fn failure_summary(
        name: ToolName,
        code: ErrorCode,
        message: &str,
        output: Option<&ToolOutput>,
    ) -> String {
        tool(name)
            .and_then(|tool| tool.failure_summary(code, output))
            .unwrap_or_else(|| failure_line(code.as_str(), message))
    }

    fn call(tool: ToolName, args: Value) -> Call {
        let Value::Object(args) = args else {
            unreachable!()
        };
        Call {
            id: Some("c1".into()),
            tool,
            args,
        }
    }

    fn output(data: Value, fields: &[(&str, &str)]) -> ToolOutput {
        ToolOutput {
            body: None,
            fields: fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            data,
            continue_hint: None,
            kept: None,
        }
    }

    #[test]
    fn subjects_are_paths_relative_to_the_root_or_commands() {
        let roots = [PathBuf::from("/w/app")];
        let read = call(ToolName::FsRead, json!({"path": "/w/app/src/main.rs"}));
        assert_eq!(call_subject(&read, &roots), "src/main.rs");
        let outside = call(ToolName::FsLs, json!({"path": "/elsewhere"}));
        assert_eq!(call_subject(&outside, &roots), "/elsewhere");
        let run = call(
            ToolName::ProcessRun,
            json!({"command": "cargo", "args": ["test", "-q"]}),
        );
        assert_eq!(call_subject(&run, &roots), "cargo test -q");
        let batch = call(
            ToolName::FsWriteBatch,
            json!({"files": [{"path": "/w/a", "content": ""}, {"path": "/w/b", "content": ""}, {"path": "/w/c", "content": ""}]}),
        );
        assert_eq!(call_subject(&batch, &roots), "3 files");
        let hostile = call(ToolName::ShellExec, json!({"command": "echo \u{1b}[2J"}));
        assert!(!call_subject(&hostile, &roots).contains('\u{1b}'));
    }

    #[test]
    fn a_secret_crossing_the_cut_is_masked_before_the_subject_is_cut() {
        let key = "sk-live-0123456789abcdefghij";
        let command = format!("{} {key}", "x".repeat(70));
        let run = call(ToolName::ShellExec, json!({"command": command}));
        let invocation = Invocation::new(&run).unwrap();
        let secrets = Secrets::from_values([key.to_owned()]);
        let subject = invocation_subject(&invocation, &[], &secrets);
        assert!(!subject.contains("sk-live"), "{subject}");
        assert!(subject.ends_with("***"), "{subject}");
    }

    #[test]
    fn summaries_say_what_each_tool_did() {
        let read = output(json!({"content": "a\nb\n"}), &[]);
        assert_eq!(
            success_summary(ToolName::FsRead, &read),
            "Read 4 B (2 lines)"
        );
        let search = output(json!({"filesMatched": 3}), &[("matches", "7")]);
        assert_eq!(
            success_summary(ToolName::FsSearch, &search),
            "Found 7 matches in 3 files"
        );
        let batch = output(
            json!({"files": [{"bytesWritten": 2048}, {"bytesWritten": 1024}]}),
            &[],
        );
        assert_eq!(
            success_summary(ToolName::FsWriteBatch, &batch),
            "Wrote 2 files (3.0 KiB)"
        );
        let run = output(json!({}), &[("exitCode", "0"), ("durationMs", "1320")]);
        assert_eq!(
            success_summary(ToolName::ProcessRun, &run),
            "Exit 0 · 1.3 s"
        );
        let diff = output(
            json!({"diff": "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n+z\n"}),
            &[],
        );
        assert_eq!(success_summary(ToolName::FsDiff, &diff), "+2 -1 lines");
    }

    #[test]
    fn failures_name_their_code() {
        assert_eq!(
            failure_summary(
                ToolName::FsRead,
                ErrorCode::NotFound,
                "/w/a does not exist\nmore",
                None
            ),
            "Failed: not_found · /w/a does not exist"
        );
        let failed_run = output(json!({}), &[("exitCode", "101"), ("durationMs", "40")]);
        assert_eq!(
            failure_summary(
                ToolName::ShellExec,
                ErrorCode::NonzeroExit,
                "exit 101",
                Some(&failed_run)
            ),
            "Exit 101 · 40 ms"
        );
    }
}
