//! One-line summaries for the terminal (seed 001): what a call is about, `● fs.read (README.md)`,
//! and what it did, `└ Read 1.2 KiB (42 lines)`. Pure functions over a call and its outcome.

use std::path::Path;

use serde_json::Value;

use crate::protocol::display::escape_for_terminal;
use crate::protocol::{Call, ToolName};
use crate::tools::ToolOutput;
use crate::tools::fs::ls::human_size;

/// The call's main argument, short: a path relative to the first root that holds it, the
/// command line of a process, the number of files of a batch.
pub fn call_subject(call: &Call, roots: &[impl AsRef<Path>]) -> String {
    let text = |key: &str| {
        call.args
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let path = |key: &str| shorten_path(text(key), roots);
    let subject = match call.tool {
        ToolName::FsMv => format!("{} → {}", path("fromPath"), path("toPath")),
        ToolName::FsDiff => match call.args.get("rightPath").and_then(Value::as_str) {
            Some(_) => format!("{} ↔ {}", path("leftPath"), path("rightPath")),
            None => path("leftPath"),
        },
        ToolName::FsSearch => format!("{:?} in {}", text("query"), path("path")),
        ToolName::FsChmod => format!("{} {}", path("path"), text("mode")),
        ToolName::FsWriteBatch => {
            let count = call
                .args
                .get("files")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            plural(count, "file")
        }
        ToolName::ProcessRun => {
            let mut words = vec![text("command").to_owned()];
            words.extend(
                call.args
                    .get("args")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned),
            );
            words.join(" ")
        }
        ToolName::ShellExec => text("command").to_owned(),
        ToolName::AgentTodo => {
            let count = call
                .args
                .get("items")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            plural(count, "item")
        }
        ToolName::AgentNote => first_line(text("note")),
        _ => path("path"),
    };
    escape_for_terminal(&clip(&subject, 80)).into_owned()
}

/// What a successful call did, e.g. `Read 1.2 KiB (42 lines)` or `Exit 0 · 1.3 s`.
pub fn success_summary(tool: ToolName, output: &ToolOutput) -> String {
    let data = &output.data;
    let number = |key: &str| data.get(key).and_then(Value::as_u64).unwrap_or(0);
    let field = |key: &str| {
        output
            .fields
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    };
    match tool {
        ToolName::FsRead => {
            let content = data
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let lines = content.lines().count();
            format!(
                "Read {} ({})",
                human_size(content.len() as u64),
                plural(lines, "line")
            )
        }
        ToolName::FsLs => {
            let count = data
                .get("entries")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            format!("Listed {}", plural(count, "entry"))
        }
        ToolName::FsSearch => {
            let matches = field("matches").and_then(|m| m.parse().ok()).unwrap_or(0);
            format!(
                "Found {} in {}",
                plural(matches, "match"),
                plural(number("filesMatched") as usize, "file")
            )
        }
        ToolName::FsWrite => format!("Wrote {}", human_size(number("bytesWritten"))),
        ToolName::FsWriteBatch => {
            let files = data.get("files").and_then(Value::as_array);
            let bytes: u64 = files
                .into_iter()
                .flatten()
                .filter_map(|f| f.get("bytesWritten").and_then(Value::as_u64))
                .sum();
            let count = files.map_or(0, Vec::len);
            format!("Wrote {} ({})", plural(count, "file"), human_size(bytes))
        }
        ToolName::FsMkdir => "Created".to_owned(),
        ToolName::FsRm => "Removed".to_owned(),
        ToolName::FsMv => "Moved".to_owned(),
        ToolName::FsChmod => format!(
            "Mode {} (was {})",
            data.get("mode").and_then(Value::as_str).unwrap_or("?"),
            data.get("previous").and_then(Value::as_str).unwrap_or("?")
        ),
        ToolName::FsDiff => match data.get("diff").and_then(Value::as_str) {
            Some(diff) => {
                let changed = |sign: char, other: &str| {
                    diff.lines()
                        .filter(|l| l.starts_with(sign) && !l.starts_with(other))
                        .count()
                };
                format!("+{} -{} lines", changed('+', "+++"), changed('-', "---"))
            }
            None => "No differences".to_owned(),
        },
        ToolName::ProcessRun | ToolName::ShellExec => process_summary(output),
        ToolName::AgentTodo | ToolName::AgentNote => output
            .body
            .as_deref()
            .map(first_line)
            .unwrap_or_else(|| "Saved".to_owned()),
    }
}

/// What a failed call reported: `Failed: not_found · /w/a.txt does not exist`, or a program's
/// exit status.
pub fn failure_summary(
    tool: ToolName,
    code: &str,
    message: &str,
    output: Option<&ToolOutput>,
) -> String {
    match (tool, output) {
        (ToolName::ProcessRun | ToolName::ShellExec, Some(output)) if code == "nonzero_exit" => {
            process_summary(output)
        }
        _ => format!(
            "Failed: {code} · {}",
            escape_for_terminal(&clip(&first_line(message), 100))
        ),
    }
}

fn process_summary(output: &ToolOutput) -> String {
    let field = |key: &str| {
        output
            .fields
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.clone())
    };
    let status = match (field("exitCode"), field("signal")) {
        (Some(code), _) => format!("Exit {code}"),
        (None, Some(signal)) => format!("Killed by signal {signal}"),
        (None, None) => "Ended".to_owned(),
    };
    match field("durationMs").and_then(|ms| ms.parse::<u64>().ok()) {
        Some(ms) => format!("{status} · {}", human_duration(ms)),
        None => status,
    }
}

/// `850 ms`, `1.3 s`, `2 min 5 s`.
pub fn human_duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

fn shorten_path(path: &str, roots: &[impl AsRef<Path>]) -> String {
    let as_path = Path::new(path);
    for root in roots {
        if let Ok(rest) = as_path.strip_prefix(root.as_ref()) {
            let rest = rest.display().to_string();
            return if rest.is_empty() {
                ".".to_owned()
            } else {
                rest
            };
        }
    }
    path.to_owned()
}

fn plural(count: usize, noun: &str) -> String {
    match (count, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "entry") => format!("{count} entries"),
        (_, "match") => format!("{count} matches"),
        _ => format!("{count} {noun}s"),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
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
    use serde_json::json;

    use super::*;

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
        }
    }

    #[test]
    fn subjects_are_paths_relative_to_the_root_or_commands() {
        let roots = ["/w/app"];
        let read = call(ToolName::FsRead, json!({"path": "/w/app/src/main.rs"}));
        assert_eq!(call_subject(&read, &roots), "src/main.rs");
        let outside = call(ToolName::FsLs, json!({"path": "/elsewhere"}));
        assert_eq!(call_subject(&outside, &roots), "/elsewhere");
        let run = call(
            ToolName::ProcessRun,
            json!({"command": "cargo", "args": ["test", "-q"]}),
        );
        assert_eq!(call_subject(&run, &roots), "cargo test -q");
        let batch = call(ToolName::FsWriteBatch, json!({"files": [{}, {}, {}]}));
        assert_eq!(call_subject(&batch, &roots), "3 files");
        let hostile = call(ToolName::ShellExec, json!({"command": "echo \u{1b}[2J"}));
        assert!(!call_subject(&hostile, &roots).contains('\u{1b}'));
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
                "not_found",
                "/w/a does not exist\nmore",
                None
            ),
            "Failed: not_found · /w/a does not exist"
        );
        let failed_run = output(json!({}), &[("exitCode", "101"), ("durationMs", "40")]);
        assert_eq!(
            failure_summary(
                ToolName::ShellExec,
                "nonzero_exit",
                "exit 101",
                Some(&failed_run)
            ),
            "Exit 101 · 40 ms"
        );
    }
}
