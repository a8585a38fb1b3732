//! Approval policy (PROTOCOL.md §10 (Running calls)): which calls run at once, which ask the person first, which are
//! refused. Decided before anything runs, from the call alone.

use std::collections::BTreeMap;

use serde::Deserialize;

pub use super::process::is_shell_like;
use super::registry::Invocation;
use super::tool::{ApprovalClass, Effects};
use crate::protocol::{Call, ToolName};

/// The approval mode (`--approve`, `approval =` in flycode.toml).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Run everything (but the calls that always ask).
    Auto,
    /// Read at once; ask before running programs, removing, moving and chmodding.
    #[default]
    Ask,
    /// Refuse every tool that writes or runs.
    ReadOnly,
}

impl ApprovalMode {
    /// The mode as written in `flycode.toml` and after `--approve`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Auto => "auto",
            ApprovalMode::Ask => "ask",
            ApprovalMode::ReadOnly => "read-only",
        }
    }
}

/// A per-tool override from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolRule {
    /// Run without asking (the calls that always ask still ask).
    Allow,
    /// Always ask.
    Ask,
    /// Never run.
    Deny,
}

/// What policy says of a call: the part of the call service's
/// [`Ruling`](super::executor::Ruling) that the configuration decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// Run it.
    Run,
    /// Ask the person first, saying why.
    Ask {
        /// Why this call needs a yes.
        reason: String,
        /// Only a person at the terminal may answer, never `--yes`: the call would change what
        /// the agent is told (`AGENTS.md`, `FLYCODE.md`) or what a program loads
        /// (`LD_PRELOAD`...).
        in_person: bool,
    },
    /// Refuse it (`denied_by_policy`).
    Deny {
        /// Why, in words for the model (no flags: it cannot change them).
        reason: String,
        /// What the person could change to allow it.
        advice: String,
    },
}

/// The approval policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// The mode.
    pub approval: ApprovalMode,
    /// Per-tool overrides.
    pub overrides: BTreeMap<ToolName, ToolRule>,
    /// What the person could change to allow a call read-only mode refuses, where the door
    /// knows better than the flags (`flycode mcp --http` is read-only until the person allows
    /// changes: PROTOCOL.md §14, "Over HTTP").
    pub read_only_advice: Option<String>,
}

/// Files fed into every API-mode prompt: a write to them always asks.
const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "FLYCODE.md"];

/// The project folder of instructions (`.flycode/hints/NAME/HINT.md`, `.flycode/agents/NAME.md`):
/// what is inside becomes the model's instructions, so a change anywhere inside always asks.
const INSTRUCTION_FOLDER: &str = ".flycode";

/// Whether `path` (as written or resolved) names the instruction folder or something inside it.
fn is_in_instruction_folder(path: &str) -> bool {
    path.split(['/', '\\'])
        .any(|component| component.eq_ignore_ascii_case(INSTRUCTION_FOLDER))
}

/// Environment variables that change what a program loads or runs: the dynamic loader's, shells'
/// start-up files and function imports, interpreters' option and library variables, git's
/// configuration injection, and `PATH`.
pub fn is_dangerous_env(name: &str) -> bool {
    const EXACT: [&str; 20] = [
        "BASH_ENV",
        "ENV",
        "PATH",
        "IFS",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "PROMPT_COMMAND",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
    ];
    const PREFIXES: [&str; 4] = ["LD_", "DYLD_", "GIT_", "BASH_FUNC_"];
    EXACT.contains(&name) || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

impl Policy {
    /// Judges `call`, judging instruction files by the text of its paths.
    /// Arguments the tool cannot read are refused (the executor never runs them).
    pub fn judge(&self, call: &Call) -> Judgement {
        self.judge_resolved(call, &[])
    }

    /// Judges `call`; `resolved` are its paths after links and `..` were
    /// resolved, so `AGENTS.md/.` or a link to `AGENTS.md` is recognised too.
    pub fn judge_resolved(&self, call: &Call, resolved: &[std::path::PathBuf]) -> Judgement {
        match Invocation::new(call) {
            Ok(invocation) => self.judge_invocation(&invocation, resolved),
            Err(error) => Judgement::Deny {
                reason: error.message,
                advice: "the call's arguments could not be read".to_owned(),
            },
        }
    }

    /// Judges a call whose tool has read its arguments, asking the tool what the
    /// call reads, changes and runs.
    pub fn judge_invocation(
        &self,
        invocation: &Invocation<'_>,
        resolved: &[std::path::PathBuf],
    ) -> Judgement {
        let named = invocation.call().tool;
        let tool = invocation.bound().judged_as();
        let effects = invocation.effects();
        if self.approval == ApprovalMode::ReadOnly && effects.is_mutating() {
            return Judgement::Deny {
                reason: format!("{named} writes or runs, and this session is read-only"),
                advice: self.read_only_advice.clone().unwrap_or_else(|| "flycode runs read-only (--approve read-only, or approval = \"read-only\" in flycode.toml); restart it with --approve ask to allow changes".to_owned()),
            };
        }
        let rule = self
            .overrides
            .get(&tool)
            .or_else(|| self.overrides.get(&named));
        if rule == Some(&ToolRule::Deny) {
            return Judgement::Deny {
                reason: format!("{tool} is denied by the configuration"),
                advice: deny_advice(tool),
            };
        }
        if let Some(reason) = always_ask(&effects, resolved) {
            return Judgement::Ask {
                reason,
                in_person: true,
            };
        }
        let asks_by_default = super::registry::tool(tool)
            .is_some_and(|judged| judged.approval() == ApprovalClass::AsksFirst);
        match (rule, self.approval) {
            (Some(ToolRule::Allow), _) | (None, ApprovalMode::Auto) => Judgement::Run,
            (Some(ToolRule::Ask), _) => Judgement::Ask {
                reason: format!("the configuration asks before {tool}"),
                in_person: false,
            },
            (None, _) if asks_by_default => Judgement::Ask {
                reason: format!("{tool} asks first"),
                in_person: false,
            },
            (None, _) => Judgement::Run,
            (Some(ToolRule::Deny), _) => Judgement::Deny {
                reason: format!("{tool} is denied by the configuration"),
                advice: deny_advice(tool),
            },
        }
    }
}

/// Where the person allows a tool that `[tools]` denies.
fn deny_advice(tool: ToolName) -> String {
    format!(
        "flycode.toml denies it ([tools] \"{tool}\" = \"deny\"); change that line to \"ask\" or \"allow\" to let it run"
    )
}

/// Calls that ask even under `auto`: writes to instruction files or into the instruction
/// folder, dangerous environments.
fn always_ask(effects: &Effects<'_>, resolved: &[std::path::PathBuf]) -> Option<String> {
    if let Some(path) = effects
        .changed()
        .map(str::to_owned)
        .chain(resolved.iter().map(|p| p.to_string_lossy().into_owned()))
        .find(|path| is_in_instruction_folder(path))
    {
        return Some(format!(
            "{path} is in a .flycode folder, whose hints and agents become the model's instructions"
        ));
    }
    if !effects.writes.is_empty() {
        // Judged by the text (`AGENTS.md/.` included) and by the resolved path (a link named
        // otherwise that points at AGENTS.md).
        let written = effects
            .writes
            .iter()
            .map(|path| {
                let trimmed = path.trim_end_matches(['/', '\\', '.']);
                trimmed
                    .rsplit(['/', '\\'])
                    .next()
                    .unwrap_or(trimmed)
                    .to_owned()
            })
            .chain(
                resolved
                    .iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
            );
        for name in written {
            if INSTRUCTION_FILES
                .iter()
                .any(|f| f.eq_ignore_ascii_case(&name))
            {
                return Some(format!("{name} is fed into every API-mode prompt"));
            }
        }
    }
    if let Some(program) = &effects.program
        && let Some(name) = program.env.keys().find(|k| is_dangerous_env(k))
    {
        return Some(format!(
            "the environment sets {name}, which changes what the program loads or runs"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A valid call of `tool`: `args` over the least its schema requires.
    fn call(tool: ToolName, args: Value) -> Call {
        let least = match tool {
            ToolName::FsSearch => json!({"path": "/a", "query": "x"}),
            ToolName::FsWrite => json!({"path": "/a", "mode": "overwrite", "content": ""}),
            ToolName::FsMv => json!({"fromPath": "/a", "toPath": "/b"}),
            ToolName::FsChmod => json!({"path": "/a", "mode": "644"}),
            ToolName::FsWriteBatch => json!({"files": [{"path": "/a", "content": ""}]}),
            ToolName::FsDiff => json!({"leftPath": "/a", "rightContent": ""}),
            ToolName::ProcessRun | ToolName::ShellExec => json!({"command": "ls"}),
            ToolName::AgentTodo => json!({"items": []}),
            ToolName::AgentNote => json!({"note": "n"}),
            ToolName::MemoryQuery => json!({"query": "q"}),
            ToolName::HintLoad => json!({"name": "h"}),
            ToolName::HintUnload => json!({}),
            _ => json!({"path": "/a"}),
        };
        let mut merged = least.as_object().cloned().unwrap();
        for (key, value) in args.as_object().cloned().unwrap_or_default() {
            merged.insert(key, value);
        }
        if let Some(files) = merged.get_mut("files").and_then(Value::as_array_mut) {
            for file in files.iter_mut().filter_map(Value::as_object_mut) {
                file.entry("content").or_insert(json!(""));
            }
        }
        Call {
            id: Some("c".into()),
            tool,
            args: merged,
        }
    }

    fn policy(approval: ApprovalMode) -> Policy {
        Policy {
            approval,
            ..Policy::default()
        }
    }

    fn is_ask(judgement: &Judgement) -> bool {
        matches!(judgement, Judgement::Ask { .. })
    }

    #[test]
    fn ask_mode_runs_reads_and_asks_before_running_removing_moving_chmodding() {
        let ask = policy(ApprovalMode::Ask);
        assert_eq!(
            ask.judge(&call(ToolName::FsRead, json!({"path": "/a"}))),
            Judgement::Run
        );
        assert_eq!(
            ask.judge(&call(ToolName::FsWrite, json!({"path": "/a"}))),
            Judgement::Run
        );
        for tool in [
            ToolName::ProcessRun,
            ToolName::ShellExec,
            ToolName::FsRm,
            ToolName::FsMv,
            ToolName::FsChmod,
        ] {
            assert!(is_ask(&ask.judge(&call(tool, json!({})))), "{tool}");
        }
    }

    #[test]
    fn read_only_refuses_every_writing_or_running_tool() {
        let read_only = policy(ApprovalMode::ReadOnly);
        let reads = [
            ToolName::FsLs,
            ToolName::FsRead,
            ToolName::FsSearch,
            ToolName::FsDiff,
            ToolName::MemoryQuery,
            ToolName::HintLoad,
            ToolName::HintUnload,
            ToolName::HintResource,
            ToolName::AgentTodo,
            ToolName::AgentNote,
        ];
        for tool in ToolName::WITH_AGENT_TOOLS {
            let decision = read_only.judge(&call(tool, json!({})));
            assert_eq!(
                matches!(decision, Judgement::Deny { .. }),
                !reads.contains(&tool),
                "{tool}"
            );
        }
    }

    #[test]
    fn a_door_that_made_the_session_read_only_says_how_to_allow_changes() {
        let by_flag = policy(ApprovalMode::ReadOnly);
        let by_door = Policy {
            read_only_advice: Some("restart it with --allow-changes".to_owned()),
            ..policy(ApprovalMode::ReadOnly)
        };
        let write = call(ToolName::FsWrite, json!({"path": "/a", "content": "x"}));
        let advice = |policy: &Policy| match policy.judge(&write) {
            Judgement::Deny { advice, .. } => advice,
            other => panic!("{other:?}"),
        };
        assert!(advice(&by_flag).contains("--approve ask"));
        assert_eq!(advice(&by_door), "restart it with --allow-changes");
    }
    #[test]
    fn some_calls_ask_even_under_auto() {
        let auto = policy(ApprovalMode::Auto);
        assert_eq!(
            auto.judge(&call(ToolName::ShellExec, json!({"command": "ls"}))),
            Judgement::Run
        );
        assert!(is_ask(&auto.judge(&call(
            ToolName::FsWrite,
            json!({"path": "/w/AGENTS.md"})
        ))));
        assert!(is_ask(&auto.judge(&call(
            ToolName::FsWriteBatch,
            json!({"files": [{"path": "/w/a"}, {"path": "/w/flycode.md"}]})
        ))));
        assert!(is_ask(&auto.judge(&call(
            ToolName::FsMv,
            json!({"fromPath": "/w/x", "toPath": "/w/FLYCODE.md"})
        ))));
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "BASH_ENV",
            "ENV",
        ] {
            let decision = auto.judge(&call(
                ToolName::ProcessRun,
                json!({"command": "ls", "env": {name: "x"}}),
            ));
            assert!(is_ask(&decision), "{name}");
        }
        assert_eq!(
            auto.judge(&call(ToolName::FsRead, json!({"path": "/w/AGENTS.md"}))),
            Judgement::Run
        );
        for (tool, args) in [
            (
                ToolName::FsWrite,
                json!({"path": "/w/.flycode/hints/x/HINT.md"}),
            ),
            (ToolName::FsMkdir, json!({"path": "/w/.Flycode/agents"})),
            (ToolName::FsRm, json!({"path": "/w/.flycode"})),
            (
                ToolName::FsMv,
                json!({"fromPath": "/w/x.md", "toPath": "/w/.flycode/agents/x.md"}),
            ),
        ] {
            let decision = auto.judge(&call(tool, args));
            assert!(
                matches!(
                    decision,
                    Judgement::Ask {
                        in_person: true,
                        ..
                    }
                ),
                "{tool}: {decision:?}"
            );
        }
        assert_eq!(
            auto.judge(&call(
                ToolName::FsWrite,
                json!({"path": "/w/.flycode-notes"})
            )),
            Judgement::Run
        );
    }

    #[test]
    fn shell_wrappers_are_judged_as_shell() {
        let mut overrides = BTreeMap::new();
        overrides.insert(ToolName::ShellExec, ToolRule::Deny);
        overrides.insert(ToolName::ProcessRun, ToolRule::Allow);
        let strict = Policy {
            approval: ApprovalMode::Ask,
            overrides,
            ..Policy::default()
        };
        assert_eq!(
            strict.judge(&call(
                ToolName::ProcessRun,
                json!({"command": "git", "args": ["status"]})
            )),
            Judgement::Run
        );
        for (program, args) in [
            ("bash", json!(["-c", "rm -rf /"])),
            ("/usr/bin/python3", json!(["-c", "print(1)"])),
            ("node", json!(["-e", "1"])),
            ("env", json!(["sh"])),
        ] {
            let decision = strict.judge(&call(
                ToolName::ProcessRun,
                json!({"command": program, "args": args}),
            ));
            assert!(matches!(decision, Judgement::Deny { .. }), "{program}");
        }
    }

    #[test]
    fn overrides_win_over_the_mode() {
        let mut overrides = BTreeMap::new();
        overrides.insert(ToolName::FsWrite, ToolRule::Ask);
        overrides.insert(ToolName::FsRm, ToolRule::Allow);
        let configured = Policy {
            approval: ApprovalMode::Ask,
            overrides,
            ..Policy::default()
        };
        assert!(is_ask(
            &configured.judge(&call(ToolName::FsWrite, json!({"path": "/a"})))
        ));
        assert_eq!(
            configured.judge(&call(ToolName::FsRm, json!({"path": "/a"}))),
            Judgement::Run
        );
    }
}
