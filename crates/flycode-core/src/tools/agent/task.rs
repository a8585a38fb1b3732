//! `agent.task`: the main agent hands a read-only piece of work to a sub-agent (PROTOCOL.md §13 (The API loop: sub-agents)).
//! The tool only reads its arguments and hands them to the run's [`TaskRunner`](super::TaskRunner); the sub-agent's
//! loop, its quotas and its envelope live in `crate::agent::task`.

use std::path::PathBuf;

use serde_json::Value;

use super::super::tool::{ApprovalClass, Effects, Tool, ToolContext, first_line};
use super::super::{ToolError, ToolOutput};
use super::task_args::TaskArgs;
use crate::protocol::{ErrorCode, ToolName};

/// `agent.task` in the registry.
pub struct AgentTask;

impl Tool for AgentTask {
    type Args = TaskArgs;
    const NAME: ToolName = ToolName::AgentTask;

    /// A sub-agent only reads: tasks run beside other reads (PROTOCOL.md §13 (The API loop: parallel calls)).
    fn approval(&self) -> ApprovalClass {
        ApprovalClass::Read
    }

    fn effects<'a>(&self, _args: &'a TaskArgs) -> Effects<'a> {
        Effects::default()
    }

    fn subject(&self, args: &TaskArgs, _roots: &[PathBuf]) -> String {
        let kind = args.name.as_deref().unwrap_or(args.subagent_type.as_str());
        format!("{kind}: {}", first_line(&args.description))
    }

    fn summary(&self, output: &ToolOutput) -> String {
        envelope_line(&output.data)
    }

    fn failure_summary(&self, code: ErrorCode, output: Option<&ToolOutput>) -> Option<String> {
        let output = output?;
        (code != ErrorCode::QuotaExceeded).then(|| envelope_line(&output.data))
    }

    fn run(&self, context: &ToolContext<'_>, args: &TaskArgs) -> Result<ToolOutput, ToolError> {
        let runner = context.tasks.ok_or_else(|| {
            ToolError::new(
                ErrorCode::DeniedByPolicy,
                "agent.task was not run: sub-agents cannot start tasks of their own".to_owned(),
                Some("do the work yourself with the read-only tools, then call agent.complete"),
            )
        })?;
        runner.run_task(args, context.call_id)
    }
}

/// `ok · 7 calls · 3.2 s · light`: a task's outcome from its envelope.
pub fn envelope_line(envelope: &Value) -> String {
    let status = envelope["status"].as_str().unwrap_or("?");
    let calls = envelope["stats"]["tool_calls"].as_u64().unwrap_or(0);
    let millis = envelope["stats"]["duration_ms"].as_u64().unwrap_or(0);
    let model = envelope["data"]["model_used"].as_str().unwrap_or("?");
    let calls = if calls == 1 {
        "1 call".to_owned()
    } else {
        format!("{calls} calls")
    };
    #[allow(clippy::cast_precision_loss)] // a duration shown to a tenth of a second
    let seconds = millis as f64 / 1000.0;
    format!("{status} · {calls} · {seconds:.1} s · {model}")
}

#[cfg(test)]
mod tests {
    use super::super::task_args::{ModelChoice, SubagentType};
    use super::*;
    use serde_json::json;

    #[test]
    fn the_model_defaults_by_type_and_an_explicit_choice_wins() {
        let args: TaskArgs =
            serde_json::from_value(json!({"description": "abc", "prompt": "p"})).unwrap();
        assert_eq!(args.subagent_type, SubagentType::General);
        assert_eq!(args.model_choice(), ModelChoice::Main);
        let args: TaskArgs = serde_json::from_value(
            json!({"description": "abc", "prompt": "p", "subagentType": "explore"}),
        )
        .unwrap();
        assert_eq!(args.model_choice(), ModelChoice::Light);
        let args: TaskArgs = serde_json::from_value(
            json!({"description": "abc", "prompt": "p", "subagentType": "explore", "model": "main"}),
        )
        .unwrap();
        assert_eq!(args.model_choice(), ModelChoice::Main);
    }

    #[test]
    fn a_blank_prompt_or_title_is_refused_before_any_task_starts() {
        use crate::protocol::ToolName;
        use crate::protocol::args::validate_args;
        for args in [
            json!({"description": "Find it", "prompt": "   \n"}),
            json!({"description": "   ", "prompt": "find where sessions expire"}),
        ] {
            let error = validate_args(ToolName::AgentTask, args.clone()).unwrap_err();
            assert!(
                error.to_string().contains("has the wrong form"),
                "{args}: {error}"
            );
        }
        assert!(
            validate_args(
                ToolName::AgentTask,
                json!({"description": "Find it", "prompt": "find where sessions expire"})
            )
            .is_ok()
        );
    }

    #[test]
    fn the_outcome_line_reads_the_envelope() {
        let envelope = json!({
            "status": "ok",
            "data": {"model_used": "light"},
            "stats": {"tool_calls": 7, "duration_ms": 3210},
        });
        assert_eq!(envelope_line(&envelope), "ok · 7 calls · 3.2 s · light");
    }
}
