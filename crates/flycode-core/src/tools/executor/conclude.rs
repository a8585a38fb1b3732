//! The one exit of every call, run or refused: flycode's secrets masked
//! (PROTOCOL.md §9 (Secrets and masking)), the one audit line (PROTOCOL.md §10 (Running calls),
//! the audit log), and the result block. No door logs a call or masks an execution again.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use super::{Decided, Decider, Execution, Executor, lock};
use crate::protocol::{Call, ErrorCode, ResultBlock, render_command};
use crate::sandbox::{AuditEntry, AuditLog};
use crate::tools::secrets::Secrets;
use crate::tools::tool::{RegisteredTool, failure_line};
use crate::tools::{ToolError, ToolOutput};

/// The audit log could not be written: the call's own outcome stands, and the doors warn with
/// this text (PROTOCOL.md §10 (Running calls), the audit log).
#[derive(Debug, thiserror::Error)]
#[error("audit log {}: {source}", path.display())]
struct AuditWriteError {
    /// The log's file.
    path: PathBuf,
    /// Why it could not be written.
    source: std::io::Error,
}

/// One audit-log line at a time, in the whole process.
static LOGGING: Mutex<()> = Mutex::new(());

impl Executor<'_> {
    /// Logs what became of a call and renders its result block. flycode's secrets are masked
    /// first, in the result, in the call as logged and shown, and in the finished block (its id
    /// too), so no value of one reaches the model, a transcript or the audit log. `started` is
    /// when the call began to run: the wait for the person is not in its duration.
    pub(super) fn conclude(
        &self,
        call: &Call,
        started: Instant,
        mut result: Result<ToolOutput, ToolError>,
        (decided, by): (Decided, Option<Decider>),
        tool: Option<&'static dyn RegisteredTool>,
    ) -> Execution {
        let secrets = self.limits.secrets();
        crate::tools::secrets::MaskTools::mask_result(&secrets, &mut result);
        let command = secrets
            .mask(&render_command(call.tool, &call.args))
            .into_owned();
        let duration = started.elapsed();
        let mut audit_error = None;
        if let Some(audit) = &self.audit {
            let outcome = match (&result, decided) {
                (Ok(_), _) => "ok",
                (Err(_), Decided::Ran) => "failed",
                (Err(_), Decided::Refused | Decided::Unanswered) => "denied",
            };
            let code = result.as_ref().err().map(|e| e.code);
            audit_error = log_call(audit, &secrets, call, outcome, code, duration, by)
                .err()
                .map(|error| error.to_string());
        }
        let (mut block, summary) = self.render(call, &command, &mut result, tool);
        // PROTOCOL.md §10 (Running calls: background jobs): jobs that ended since the model
        // last heard are told in the session's next result block (the main agent's: a
        // sub-agent's results do not take them).
        if self.restriction.is_none()
            && let Some(notices) = self.jobs.and_then(|jobs| jobs.take_notices())
        {
            block.fields.push(("jobs".to_owned(), notices));
        }
        let (output, error) = match result {
            Ok(output) => (Some(output), None),
            Err(error) => (None, Some(error)),
        };
        secrets.mask_block(&mut block);
        let summary = secrets.mask(&summary).into_owned();
        Execution {
            id: block.id.clone(),
            tool: call.tool,
            command,
            output,
            error,
            block,
            summary,
            audit_error,
            decided,
            duration,
            waited: std::time::Duration::ZERO,
            change: None,
        }
    }

    /// The result block and the terminal's one-line summary.
    fn render(
        &self,
        call: &Call,
        command: &str,
        result: &mut Result<ToolOutput, ToolError>,
        tool: Option<&'static dyn RegisteredTool>,
    ) -> (ResultBlock, String) {
        match result {
            Ok(output) => {
                let summary = tool.map(|tool| tool.summary(output)).unwrap_or_default();
                // Moved, not copied: a 1 MB read's body is in the block from here on.
                let mut block =
                    ResultBlock::success(call.id.clone(), command.to_owned(), output.body.take());
                block.fields = output.fields.clone();
                let block = block.capped(self.limits.output_cap, output.continue_hint.as_deref());
                (block, summary)
            }
            Err(error) => {
                let mut block = ResultBlock::failure(
                    call.id.clone(),
                    command.to_owned(),
                    error.code,
                    error.message.clone(),
                    error.hint.clone(),
                );
                // A program's output matters most when it failed.
                if let Some(output) = &error.output {
                    block.fields = output.fields.clone();
                    block.body = output.body.clone();
                    block = block.capped(self.limits.output_cap, output.continue_hint.as_deref());
                }
                let summary = tool
                    .and_then(|tool| tool.failure_summary(error.code, error.output.as_deref()))
                    .unwrap_or_else(|| failure_line(error.code.as_str(), &error.message));
                (block, summary)
            }
        }
    }
}

/// Appends what became of `call` to the audit log, its arguments as
/// [`crate::sandbox::audit::logged_args`] shows them and every field masked: the one way a call
/// reaches the log. `by` says who let it run or refused it (`approval`), where known. Why the
/// log could not be written, if it could not.
fn log_call(
    audit: &AuditLog,
    secrets: &Secrets,
    call: &Call,
    outcome: &'static str,
    code: Option<ErrorCode>,
    duration: std::time::Duration,
    by: Option<Decider>,
) -> Result<(), AuditWriteError> {
    let args = crate::sandbox::audit::logged_args(&call.args, &|text| secrets.mask(text));
    let entry = AuditEntry {
        time: SystemTime::now(),
        id: call.id.clone(),
        tool: call.tool.as_str().to_owned(),
        args,
        outcome,
        code: code.map(|code| code.as_str().to_owned()),
        duration,
        approval: by.map(Decider::as_str),
    };
    let _one_line_at_a_time = lock(&LOGGING);
    // A log that cannot be written must not hide the call's own outcome.
    audit
        .append(&entry, secrets)
        .map_err(|source| AuditWriteError {
            path: audit.path().to_path_buf(),
            source,
        })
}
