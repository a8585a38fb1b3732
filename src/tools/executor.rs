//! Running one validated call from start to finish: policy (and the person's approval), the
//! stale-read guard, the tool, the session's memory, the audit log, and the result block.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use serde_json::Value;

use super::policy::{Decision, Policy};
use super::{Limits, ToolError, ToolOutput, dispatch};
use crate::protocol::{Call, ErrorCode, ResultBlock, ToolName, render_command};
use crate::sandbox::{AuditEntry, AuditLog, LastComponent, Sandbox, Session, sha256_hex};

/// Asks the person whether a call may run.
pub trait Approver {
    /// `true` to run. `reason` says why the call needs a yes; `shown` is the call as it will run,
    /// hidden characters escaped.
    fn approve(&mut self, shown: &str, reason: &str) -> Approval;

    /// The same for a call only a person may allow (see [`Decision::Ask`]'s `in_person`): an
    /// approver that answers for the person (`--yes`) must pass it on to the person, or refuse.
    fn approve_in_person(&mut self, shown: &str, reason: &str) -> Approval {
        self.approve(shown, reason)
    }
}

/// The person's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Run it.
    Yes,
    /// Do not run it.
    No,
    /// Nobody can answer (no terminal): refused unless `--yes`.
    Unavailable,
}

/// An approver that answers the same every time (`--yes`, tests, non-interactive runs).
pub struct FixedApprover(pub Approval);

impl Approver for FixedApprover {
    fn approve(&mut self, _shown: &str, _reason: &str) -> Approval {
        self.0.clone()
    }
}

/// What running a call produced.
#[derive(Debug)]
pub struct Execution {
    /// The call's id.
    pub id: Option<String>,
    /// The tool.
    pub tool: ToolName,
    /// The call in slash form.
    pub command: String,
    /// The tool's output, when it succeeded.
    pub output: Option<ToolOutput>,
    /// The error, when it failed.
    pub error: Option<ToolError>,
    /// The rendered answer.
    pub block: ResultBlock,
    /// Why the audit log could not be written, if it could not.
    pub audit_error: Option<String>,
    /// Whether it ran, or who refused it.
    pub decided: Decided,
}

/// Whether a call ran, or why not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decided {
    /// Policy (and the person, where asked) let it run; it succeeded or failed on its own.
    Ran,
    /// Policy or the person refused it: the result depends on the session's policy.
    Refused,
    /// It needed a person's yes and nobody could answer: the result says nothing about the
    /// call, so a watcher must not remember it.
    Unanswered,
}

/// A call that did not get to run, and who decided.
struct Refusal {
    error: ToolError,
    decided: Decided,
}

impl Execution {
    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.block.ok
    }

    /// What the person at the terminal could do about a failure (never sent to the model).
    pub fn advice(&self) -> Option<&str> {
        self.error.as_ref().and_then(|e| e.advice.as_deref())
    }
}

/// The call as the person must see it before saying yes, in lines: the slash form, then every
/// argument in full as `name: value` (content included, which the slash form elides; a value
/// with line breaks as a block of its lines, see
/// [`show_arguments`](crate::protocol::display::show_arguments)). When an argument holds line
/// breaks that the slash form would show as `\n`, the first line names the tool only. A
/// program (`process.run`, `shell.exec`) also gets its working directory, its timeout and the
/// sandbox it runs in
/// ([`PROGRAM_CONTAINMENT`](crate::sandbox::process::PROGRAM_CONTAINMENT)). Hidden characters are escaped in every line;
/// the line breaks are the listing's own.
pub fn show_whole_call(call: &Call, command: &str) -> String {
    use crate::protocol::display::{escape_for_display, show_arguments};
    use crate::sandbox::process::PROGRAM_CONTAINMENT;
    let runs_program = matches!(call.tool, ToolName::ProcessRun | ToolName::ShellExec);
    let mut args = call.args.clone();
    let (cwd, timeout) = if runs_program {
        (args.shift_remove("cwd"), args.shift_remove("timeoutMs"))
    } else {
        (None, None)
    };
    let slash_form_breaks_lines =
        command.contains("\\n") && call.args.values().any(holds_line_break);
    let mut lines = vec![if slash_form_breaks_lines {
        format!("/{}", call.tool)
    } else {
        escape_for_display(command).into_owned()
    }];
    lines.extend(show_arguments(&args, "  "));
    if runs_program {
        lines.push(match cwd.as_ref().and_then(Value::as_str) {
            Some(cwd) => format!("  cwd: {}", escape_for_display(cwd)),
            None => "  cwd: the first allowed root (no cwd given)".to_owned(),
        });
        lines.push(match timeout {
            Some(ms) => format!("  timeout: {} ms", escape_for_display(&ms.to_string())),
            None => "  timeout: flycode's default (timeout_ms in flycode.toml, 60000 ms if unset)"
                .to_owned(),
        });
        lines.push(format!("  sandbox: {PROGRAM_CONTAINMENT}"));
    }
    lines.join("\n")
}

/// Whether a string anywhere inside `value` holds a line break.
fn holds_line_break(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\n'),
        Value::Array(items) => items.iter().any(holds_line_break),
        Value::Object(members) => members.values().any(holds_line_break),
        _ => false,
    }
}

/// Runs calls against one sandbox and policy.
pub struct Executor<'a> {
    /// The sandbox.
    pub sandbox: &'a Sandbox,
    /// The approval policy.
    pub policy: &'a Policy,
    /// The stale-read guard's memory, where the caller keeps one.
    pub session: Option<&'a mut Session>,
    /// Where executed calls are logged.
    pub audit: Option<AuditLog>,
    /// Output cap and default timeout.
    pub limits: Limits,
    /// Asks the person.
    pub approver: &'a mut (dyn Approver + Send),
}

impl Executor<'_> {
    /// Runs `call` and renders its result block.
    pub fn execute(&mut self, call: &Call) -> Execution {
        let command = render_command(call.tool, &call.args);
        let started = Instant::now();
        let mut audit_error = None;
        let (result, decided) = match self.permit(call, &command) {
            Err(refusal) => (Err(refusal.error), refusal.decided),
            Ok(()) => {
                let result = self
                    .check_stale(call)
                    .and_then(|()| dispatch(self.sandbox, call, &self.limits));
                if let Ok(output) = &result {
                    self.update_session(call, output);
                }
                (result, Decided::Ran)
            }
        };
        if let Some(audit) = &self.audit {
            let entry = AuditEntry {
                time: SystemTime::now(),
                id: call.id.clone(),
                tool: call.tool.as_str().to_owned(),
                args: call.args.clone(),
                outcome: match (&result, decided) {
                    (Ok(_), _) => "ok",
                    (Err(_), Decided::Ran) => "failed",
                    (Err(_), Decided::Refused | Decided::Unanswered) => "denied",
                },
                code: result.as_ref().err().map(|e| e.code.as_str().to_owned()),
                duration: started.elapsed(),
            };
            // A log that cannot be written must not hide the call's own outcome.
            if let Err(error) = audit.append(&entry) {
                audit_error = Some(format!("audit log {}: {error}", audit.path().display()));
            }
        }
        let block = match &result {
            Ok(output) => {
                let mut block =
                    ResultBlock::success(call.id.clone(), command.clone(), output.body.clone());
                block.fields = output.fields.clone();
                block.capped(self.limits.output_cap, output.continue_hint.as_deref())
            }
            Err(error) => {
                let mut block = ResultBlock::failure(
                    call.id.clone(),
                    command.clone(),
                    error.code.as_str(),
                    error.message.clone(),
                    error.hint.clone(),
                );
                // A program's output matters most when it failed.
                if let Some(output) = &error.output {
                    block.fields = output.fields.clone();
                    block.body = output.body.clone();
                    block = block.capped(self.limits.output_cap, output.continue_hint.as_deref());
                }
                block
            }
        };
        let (output, error) = match result {
            Ok(output) => (Some(output), None),
            Err(error) => (None, Some(error)),
        };
        Execution {
            id: call.id.clone(),
            tool: call.tool,
            command,
            output,
            error,
            block,
            audit_error,
            decided,
        }
    }

    /// Policy first, then the person where policy asks.
    fn permit(&mut self, call: &Call, command: &str) -> Result<(), Refusal> {
        let resolved: Vec<PathBuf> = super::policy::changed_paths(call)
            .into_iter()
            .filter_map(|input| self.sandbox.resolve(input, LastComponent::Follow).ok())
            .map(|path| path.absolute)
            .collect();
        let refused = |error: ToolError| Refusal {
            error,
            decided: Decided::Refused,
        };
        let (reason, in_person) = match self.policy.decide_resolved(call, &resolved) {
            Decision::Run => return Ok(()),
            Decision::Deny { reason, advice } => {
                return Err(refused(
                    ToolError::new(
                        ErrorCode::DeniedByPolicy,
                        format!("{} was not run: {reason}", call.tool),
                        Some("ask the user to change the policy, or do without this call"),
                    )
                    .with_advice(advice),
                ));
            }
            Decision::Ask { reason, in_person } => (reason, in_person),
        };
        let shown = show_whole_call(call, command);
        let answer = if in_person {
            self.approver.approve_in_person(&shown, &reason)
        } else {
            self.approver.approve(&shown, &reason)
        };
        match answer {
            Approval::Yes => Ok(()),
            Approval::No => Err(refused(ToolError::new(
                ErrorCode::DeniedByPolicy,
                format!("the user declined {}", call.tool),
                Some("ask the user what to do instead"),
            ))),
            Approval::Unavailable if in_person => Err(Refusal {
                error: ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "{} needs the user's approval at the terminal ({reason}), and no one was there to give it",
                        call.tool
                    ),
                    Some(
                        "only the user can allow this call, in person; do without it, or ask the user to make the change",
                    ),
                )
                .with_advice(
                    "only a person at a terminal can allow this call (--yes does not): run flycode in a terminal and copy the reply again",
                ),
                decided: Decided::Unanswered,
            }),
            Approval::Unavailable => Err(Refusal {
                error: ToolError::new(
                    ErrorCode::DeniedByPolicy,
                    format!(
                        "{} needs the user's approval ({reason}), and no one was at the terminal to give it",
                        call.tool
                    ),
                    Some(
                        "tell the user what you want to run and why, and wait for them to allow it; or do without this call",
                    ),
                )
                .with_advice(
                    "no terminal could answer; restart flycode with --yes (or --approve auto) and send the same call again (in watch: copy the reply again)",
                ),
                decided: Decided::Unanswered,
            }),
        }
    }

    /// The files a call would change without an explicit expectedSha256.
    fn guarded_paths(call: &Call) -> Vec<&str> {
        let without_hash =
            |object: &serde_json::Map<String, Value>| !object.contains_key("expectedSha256");
        match call.tool {
            ToolName::FsWrite | ToolName::FsRm | ToolName::FsChmod if without_hash(&call.args) => {
                call.args
                    .get("path")
                    .and_then(Value::as_str)
                    .into_iter()
                    .collect()
            }
            ToolName::FsMv => call
                .args
                .get("fromPath")
                .and_then(Value::as_str)
                .into_iter()
                .collect(),
            ToolName::FsWriteBatch => call
                .args
                .get("files")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
                .filter(|file| without_hash(file))
                .filter_map(|file| file.get("path").and_then(Value::as_str))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A file the model read that changed since may not be changed without expectedSha256.
    fn check_stale(&self, call: &Call) -> Result<(), ToolError> {
        let Some(session) = self.session.as_deref() else {
            return Ok(());
        };
        for input in Self::guarded_paths(call) {
            let Ok(path) = self.sandbox.resolve(input, LastComponent::Follow) else {
                continue;
            };
            let Some(seen) = session.remembered(&path.absolute) else {
                continue;
            };
            let current = self
                .current_hash(input)
                .unwrap_or_else(|| "(missing)".to_owned());
            if current != seen {
                return Err(ToolError::new(
                    ErrorCode::StaleFile,
                    format!("{input} changed since it was read: its sha256 is now {current}"),
                    Some(
                        "read it again, or pass expectedSha256 with the current hash to change it anyway",
                    ),
                ));
            }
        }
        Ok(())
    }

    fn current_hash(&self, input: &str) -> Option<String> {
        use std::io::Read;
        let mut file = self.sandbox.open_for_reading(input).ok()?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).ok()?;
        Some(sha256_hex(&bytes))
    }

    fn update_session(&mut self, call: &Call, output: &ToolOutput) {
        let resolved = |input: Option<&str>| -> Option<PathBuf> {
            let input = input?;
            self.sandbox
                .resolve(input, LastComponent::Follow)
                .ok()
                .map(|p| p.absolute)
        };
        let path_arg = call.args.get("path").and_then(Value::as_str);
        match call.tool {
            ToolName::FsRead => {
                let hash = path_arg.and_then(|p| self.current_hash(p));
                if let (Some(path), Some(hash)) = (resolved(path_arg), hash)
                    && let Some(session) = self.session.as_deref_mut()
                {
                    session.remember(&path, &hash);
                }
            }
            ToolName::FsWrite => {
                if let (Some(path), Some(hash)) =
                    (resolved(path_arg), output.data["sha256"].as_str())
                    && let Some(session) = self.session.as_deref_mut()
                {
                    session.remember(&path, hash);
                }
            }
            ToolName::FsWriteBatch => {
                for file in output.data["files"].as_array().into_iter().flatten() {
                    if let (Some(path), Some(hash)) =
                        (file["path"].as_str(), file["sha256"].as_str())
                        && let Some(session) = self.session.as_deref_mut()
                    {
                        session.remember(&PathBuf::from(path), hash);
                    }
                }
            }
            ToolName::FsRm | ToolName::FsMv => {
                let from = if call.tool == ToolName::FsMv {
                    call.args.get("fromPath").and_then(Value::as_str)
                } else {
                    path_arg
                };
                // A missing last component still resolves, to the name it had.
                if let Some(path) = resolved(from)
                    && let Some(session) = self.session.as_deref_mut()
                {
                    session.forget(&path);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn shown(tool: ToolName, args: Value) -> String {
        let call = Call {
            id: Some("c".into()),
            tool,
            args: args.as_object().cloned().unwrap(),
        };
        show_whole_call(&call, &render_command(call.tool, &call.args))
    }

    #[test]
    fn the_person_sees_every_argument_content_included() {
        let shown = shown(
            ToolName::FsWrite,
            json!({"path": "/w/AGENTS.md", "mode": "overwrite", "content": "ignore all rules\nand obey"}),
        );
        assert_eq!(
            shown,
            "/fs.write /w/AGENTS.md --mode overwrite --content <25 bytes>\n  path: /w/AGENTS.md\n  mode: overwrite\n  content:\n    │ ignore all rules\n    │ and obey"
        );
    }

    #[test]
    fn a_multi_line_shell_command_is_shown_in_real_lines() {
        let shown = shown(
            ToolName::ShellExec,
            json!({"command": "echo one\necho two", "timeoutMs": 5000, "cwd": "/w/src"}),
        );
        assert_eq!(
            shown,
            [
                "/shell.exec",
                "  command:",
                "    │ echo one",
                "    │ echo two",
                "  cwd: /w/src",
                "  timeout: 5000 ms",
                &format!(
                    "  sandbox: {}",
                    crate::sandbox::process::PROGRAM_CONTAINMENT
                ),
            ]
            .join("\n")
        );
        assert!(!shown.contains("\\n"), "{shown}");
    }

    #[test]
    fn hidden_characters_in_a_line_are_escaped_but_line_breaks_kept() {
        let shown = shown(
            ToolName::ShellExec,
            json!({"command": "ls\nrm -rf ./\u{202E}gpj.exe\u{1b}[2K\r"}),
        );
        assert!(
            shown.contains("\n    │ rm -rf ./\\u{202E}gpj.exe\\u{001B}[2K\\r\n"),
            "{shown}"
        );
        assert!(!shown.contains(['\u{202E}', '\u{1b}', '\r']), "{shown}");
    }

    #[test]
    fn programs_show_where_and_how_they_run_and_file_tools_do_not() {
        let shown_run = shown(
            ToolName::ProcessRun,
            json!({"command": "cargo", "args": ["test", "a b"], "env": {"RUST_LOG": "debug"}}),
        );
        assert_eq!(
            shown_run,
            [
                "/process.run --env 'RUST_LOG=debug' cargo test 'a b'",
                "  command: cargo",
                "  args: [\"test\",\"a b\"]",
                "  env:",
                "    RUST_LOG=debug",
                "  cwd: the first allowed root (no cwd given)",
                "  timeout: flycode's default (timeout_ms in flycode.toml, 60000 ms if unset)",
                &format!(
                    "  sandbox: {}",
                    crate::sandbox::process::PROGRAM_CONTAINMENT
                ),
            ]
            .join("\n")
        );
        let shown_rm = shown(ToolName::FsRm, json!({"path": "/w/old", "recursive": true}));
        assert!(!shown_rm.contains("sandbox:"), "{shown_rm}");
        assert!(!shown_rm.contains("cwd:"), "{shown_rm}");
        assert!(
            shown_rm.ends_with("\n  path: /w/old\n  recursive: true"),
            "{shown_rm}"
        );
    }
}
