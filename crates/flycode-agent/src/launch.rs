//! Everything a run needs before its first request, put together from the resolved settings, the
//! configuration and the sandbox: the system prompt (with the user's role or prompt files), the
//! API client, where the run is recorded, and flycode's own files added to the protected paths.
//! Then the run itself: the run's door session and the executor it makes for the turn's calls,
//! the agent's memory, the loop.
//! The command line only parses, chooses a display and prints.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, mpsc};
use std::time::SystemTime;

use thiserror::Error;

use super::client::{ApiKey, ClientError, ClientSettings, Provider};
use super::context::SharedMemory;
use super::message::Message;
use super::prompt::{
    AssembledPrompt, PromptContext, PromptOverrides, SystemPromptSource, assemble_prompt,
};
use super::resume::{ResumeError, ResumeSource, Resumed, resume_notice};
use super::settings::{
    ResolvedSettings, RoleChoice, SettingFlags, SettingsError, SystemPromptChoice, resolve_settings,
};
use super::task::tags::{TagChildren, TagTree};
use super::task::{Tasks, child_transcript_path, http_provider};
use super::transcript::{TranscriptWriter, default_transcript_path};
use super::turn::{AgentRun, Conversation, RunKind, RunObserver, RunReport};
use crate::config::Config;
use crate::protocol::ToolSet;
use crate::protocol::dialect::Dialect;
use crate::protocol::prompt::PromptLanguage;
use crate::sandbox::state::state_dir;
use crate::sandbox::{Sandbox, Session};
use flycode_core::tools::Limits;
use flycode_core::tools::executor::{Approver, Door, DoorSession, Executor, NoStateDirectory};

/// Why a run cannot start (exit 2).
#[derive(Debug, Error)]
pub enum LaunchError {
    /// A setting is missing or wrong.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// `--transcript` names something that is not a regular file.
    #[error(
        "--transcript {} is not a regular file (a link, a directory or a device); name a new or regular file",
        path.display()
    )]
    TranscriptNotAFile {
        /// The path given.
        path: PathBuf,
    },
    /// A role or system prompt file cannot be read.
    #[error(
        "cannot read the {what} file {}: {source}; fix the path in flycode.toml or the flag",
        path.display()
    )]
    PromptFile {
        /// "role definition" or "system prompt".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The API client cannot be set up.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// `--resume` names no run that can go on.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// The run's audit log and undo store have no state directory to live in.
    #[error(transparent)]
    Session(#[from] NoStateDirectory),
}

/// Reads the run `--resume ARG` names (`latest`, or a transcript's path).
pub fn load_resumed(arg: &str) -> Result<Resumed, LaunchError> {
    let path = super::resume::locate(&ResumeSource::from_arg(arg))?;
    Ok(super::resume::load(&path)?)
}

/// Where a run starts from: its task, or an earlier run.
struct RunStart {
    conversation: Conversation,
    memory: SharedMemory,
    tasks_started: u32,
    continues: Option<PathBuf>,
}

/// A run ready to start.
pub struct Launch {
    /// The settings it runs with.
    pub settings: ResolvedSettings,
    /// The system prompt and the role definition.
    pub prompt: AssembledPrompt,
    /// Where the run is recorded: the state directory's `runs/`, and `--transcript`.
    pub transcripts: Vec<PathBuf>,
    provider: Box<dyn Provider>,
    sandbox: Sandbox,
    /// The run's door session: policy, limits, audit log, the undo recorder of the run's
    /// changes (PROTOCOL.md §16 (Undo and history)), stale-read memory, jobs and hints.
    session: DoorSession,
    prompt_context: PromptContext,
    max_reply_bytes: usize,
    /// How the model's replies are read and the results written.
    dialect: Dialect,
}

/// The protocol a run speaks with its model: the dialect, and the language of the tag
/// dialect's prompt (PROTOCOL.md §15 (The tag dialect: run)).
#[derive(Clone, Copy, Debug)]
pub struct Speaking {
    /// Flycode's call blocks or seed 000's tags.
    pub dialect: Dialect,
    /// The tag dialect's prompt language (the flycode dialect's agent prompt is English).
    pub language: PromptLanguage,
}

/// What the caller decides for one run: who answers approval questions, what stops it, and
/// whether text around a call block is accepted.
pub struct RunOptions<'a> {
    /// Answers the approval questions.
    pub approver: &'a dyn Approver,
    /// Set by Ctrl-C: stops the request, the running program and the calls not yet started.
    pub cancel: &'a Arc<AtomicBool>,
    /// Accept text around a call block (text mode).
    pub lenient: bool,
}

impl Launch {
    /// Resolves the settings (`flags` over `env` over `config`'s `[agent]`), builds the prompt and
    /// the client, and protects the files that tell the agent what to do or record what it did.
    pub fn prepare(
        flags: &SettingFlags,
        config: &Config,
        sandbox: Sandbox,
        transcript: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        speaking: Speaking,
    ) -> Result<Launch, LaunchError> {
        let mut settings = resolve_settings(flags, &config.agent, env)?;
        if speaking.dialect == Dialect::Tags {
            // Tags are read from the reply's text: no function definitions are sent.
            settings.mode = super::prompt::CallingMode::Text;
        }
        let transcripts = run_transcripts(transcript)?;
        let sandbox = protect_own_files(sandbox, &settings, &transcripts);
        // `--tools` chooses the file tools; flycode.toml's `tools` is the chat front ends' set
        // (PROTOCOL.md §13 (The API loop: `flycode run`)).
        let tool_set = config
            .flags
            .tool_set
            .unwrap_or(ToolSet::Extended)
            .with_agent_tools();
        let (mut prompt, prompt_context) = build_prompt(&settings, &sandbox, tool_set)?;
        let provider = super::client::connect(&ClientSettings {
            provider: settings.provider,
            base_url: settings.base_url.clone(),
            api_key: settings.api_key.clone().map(ApiKey::new),
            connect_timeout: settings.connect_timeout,
            read_timeout: settings.read_timeout,
            max_retries: settings.max_retries,
            retry_base: settings.retry_base,
            max_reply_bytes: config.max_reply_bytes,
            first_byte_timeout: settings
                .bounds
                .first_byte_timeout(&settings.base_url, settings.read_timeout),
            turn_timeout: Some(settings.bounds.turn_timeout),
        })?;
        let session = DoorSession::open(
            Door::Run,
            config,
            run_limits(&settings, config, tool_set),
            Some(Session::in_memory()),
        )?;
        if speaking.dialect == Dialect::Tags {
            prompt.system = tags_system_prompt(
                &settings,
                speaking.language,
                sandbox.roots(),
                &session.limits().places,
            )?;
            // Seed 000's prompt is the agent's whole brief: no role definition but the
            // person's own (`--role`, `--role-file`).
            if settings.role == RoleChoice::Built {
                prompt.role_definition.clear();
            }
        }
        Ok(Launch {
            dialect: speaking.dialect,
            max_reply_bytes: config.max_reply_bytes,
            prompt_context,
            settings,
            prompt,
            transcripts,
            provider,
            sandbox,
            session,
        })
    }

    /// How many file changes the run's calls made (PROTOCOL.md §16 (Undo and history)): all of
    /// them are taken back by `flycode undo --run` with [`crate::sandbox::undo::session_id`].
    pub fn changes_recorded(&self) -> u64 {
        self.session.changes_recorded()
    }

    /// Works on `task` until the model answers, a budget runs out, the API fails, or Ctrl-C;
    /// every event goes to `observer`.
    pub fn run(
        &mut self,
        task: &str,
        options: &RunOptions<'_>,
        observer: &mut dyn RunObserver,
    ) -> RunReport {
        let start = RunStart {
            conversation: Conversation {
                history: vec![Message::user(task)],
                ..Conversation::default()
            },
            memory: SharedMemory::default(),
            tasks_started: 0,
            continues: None,
        };
        self.run_from(start, options, observer)
    }

    /// Goes on with `resumed` from its last complete turn, after a message telling the model so
    /// and, when given, `message` from the user (PROTOCOL.md §13 (The API loop: resume)).
    pub fn resume(
        &mut self,
        resumed: Resumed,
        message: Option<&str>,
        options: &RunOptions<'_>,
        observer: &mut dyn RunObserver,
    ) -> RunReport {
        // The earlier run's transcripts record other calls' content as this run's own do
        // (PROTOCOL.md §13 (The API loop: resume)).
        let parent_records = parent_records(&resumed.parent, self.settings.tasks.per_run);
        self.sandbox.add_records(&parent_records);
        let notice = resume_notice(&resumed);
        let mut history = resumed.history;
        history.push(Message::user(notice));
        history.extend(message.map(Message::user));
        let start = RunStart {
            conversation: Conversation {
                history,
                archive: resumed.archive,
                summary: resumed.summary,
                used_ids: resumed.used_ids,
            },
            memory: SharedMemory::restored(resumed.memory),
            tasks_started: resumed.tasks_started,
            continues: Some(resumed.parent),
        };
        self.run_from(start, options, observer)
    }

    fn run_from(
        &mut self,
        start: RunStart,
        options: &RunOptions<'_>,
        observer: &mut dyn RunObserver,
    ) -> RunReport {
        let memory = start.memory;
        let (relay, relayed) = mpsc::channel();
        let condenser = super::recall::LightCondenser::new(
            &self.settings,
            self.max_reply_bytes,
            &self.transcripts,
            options.cancel,
        );
        // The run is the session of its background jobs (PROTOCOL.md §10 (Running calls:
        // background jobs)): they end when it returns, Ctrl-C included.
        if let Some(jobs) = self.session.jobs() {
            jobs.set_announce(Box::new(|notice| eprintln!("flycode: [jobs] {notice}")));
        }
        let tasks = Tasks {
            service: run_service(&self.session, &self.sandbox, options, &condenser),
            settings: &self.settings,
            prompt_context: self.prompt_context.clone(),
            transcripts: self.transcripts.clone(),
            cancel: options.cancel,
            providers: &http_provider,
            relay,
            lenient: options.lenient,
            max_reply_bytes: self.max_reply_bytes,
            started: Mutex::new(start.tasks_started),
        };
        let mut transcript = TranscriptWriter::new(self.transcripts.clone())
            .with_roots(self.sandbox.roots())
            .with_endpoint(super::transcript::EndpointRecord {
                provider: self.settings.provider.as_str().to_owned(),
                base_url: self.settings.base_url.clone(),
                model: self.settings.model.clone(),
                dialect: (self.dialect == Dialect::Tags).then(|| "tags".to_owned()),
            });
        if let Some(parent) = start.continues {
            transcript = transcript.continuing(parent);
        }
        // The tag dialect's `<create_agent>`s: the run's top agent's children.
        let tree = TagTree {
            tasks: &tasks,
            system: self.prompt.system.clone().unwrap_or_default(),
        };
        let children = TagChildren::top(&tree, self.transcripts.clone());
        let mut run = AgentRun {
            provider: self.provider.as_mut(),
            executor: run_service(&self.session, &self.sandbox, options, &condenser)
                .for_agent(&memory, Some(&tasks)),
            dialect: self.dialect,
            tag_children: (self.dialect == Dialect::Tags).then_some(&children),
            settings: &self.settings,
            lenient: options.lenient,
            prompt: self.prompt.clone(),
            transcript,
            cancel: options.cancel,
            memory: &memory,
            kind: RunKind::Main,
            relay: Some(&relayed),
            compactor: tasks.compactor(),
        };
        let report = run.run_history(start.conversation, observer);
        drop(run);
        if let Some(jobs) = self.session.jobs() {
            jobs.end_session();
        }
        report
    }
}

/// The executor of a run's calls: the run's session in its sandbox, asking `options`' approver,
/// stopped by its Ctrl-C, with the light model condensing `memory.query`'s findings.
fn run_service<'s>(
    session: &'s DoorSession,
    sandbox: &'s Sandbox,
    options: &RunOptions<'s>,
    condenser: &'s dyn flycode_core::tools::memory::Condenser,
) -> Executor<'s> {
    session
        .executor(sandbox, options.approver)
        .cancelled_by(Arc::clone(options.cancel))
        .condensing_with(condenser)
}

/// The tag dialect's system prompt: seed 000's own in `language`, or the person's file
/// (`--system-prompt-file`, its `{tree_info}`, `{predefined_section}` and `{hint_metadata}`
/// filled as seed 000's are), or none.
fn tags_system_prompt(
    settings: &ResolvedSettings,
    language: PromptLanguage,
    roots: &[PathBuf],
    places: &flycode_core::tools::places::Places,
) -> Result<Option<String>, LaunchError> {
    Ok(match &settings.system_prompt {
        SystemPromptChoice::Built => Some(super::tags_prompt::render_tags_prompt(
            language, roots, places,
        )),
        SystemPromptChoice::File(path) => {
            let template = read_prompt_file(path, "system prompt")?;
            Some(super::tags_prompt::render_tags_template(
                &template, language, roots, places,
            ))
        }
        SystemPromptChoice::None => None,
    })
}

fn read_prompt_file(path: &Path, what: &'static str) -> Result<String, LaunchError> {
    crate::sandbox::host::read_to_string(path).map_err(|source| LaunchError::PromptFile {
        what,
        path: path.to_owned(),
        source,
    })
}

fn build_prompt(
    settings: &ResolvedSettings,
    sandbox: &Sandbox,
    tools: ToolSet,
) -> Result<(AssembledPrompt, PromptContext), LaunchError> {
    let role = match &settings.role {
        RoleChoice::Built => None,
        RoleChoice::Text(text) => Some(text.clone()),
        RoleChoice::File(path) => Some(read_prompt_file(path, "role definition")?),
    };
    let system = match &settings.system_prompt {
        SystemPromptChoice::Built => SystemPromptSource::Built,
        SystemPromptChoice::File(path) => {
            SystemPromptSource::Custom(read_prompt_file(path, "system prompt")?)
        }
        SystemPromptChoice::None => SystemPromptSource::None,
    };
    let today = crate::protocol::time::format_rfc3339(SystemTime::now());
    let context = PromptContext {
        working_directory: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        model_name: settings.model.clone(),
        os_info: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        current_date: today.get(..10).unwrap_or_default().to_owned(),
        roots: sandbox
            .roots()
            .iter()
            .map(|r| r.display().to_string())
            .collect(),
        mode: settings.mode,
        tools,
        profile: settings.prompt_profile,
        insight: settings.insight,
    };
    let prompt = assemble_prompt(&context, &PromptOverrides { role, system });
    Ok((prompt, context))
}

/// The run's transcripts: the default one in the state folder and the one `--transcript`
/// names, which must not be anything but a file.
fn run_transcripts(transcript: Option<&Path>) -> Result<Vec<PathBuf>, LaunchError> {
    if let Some(path) = transcript
        && let Ok(metadata) = crate::sandbox::host::symlink_metadata(path)
        && !metadata.file_type().is_file()
    {
        return Err(LaunchError::TranscriptNotAFile {
            path: path.to_owned(),
        });
    }
    let mut transcripts: Vec<PathBuf> = state_dir()
        .map(|dir| default_transcript_path(&dir))
        .into_iter()
        .collect();
    transcripts.extend(transcript.map(Path::to_path_buf));
    Ok(transcripts)
}

/// A resumed run's parent transcript and every transcript its sub-agents could have written.
fn parent_records(parent: &Path, per_run: u32) -> Vec<PathBuf> {
    std::iter::once(parent.to_path_buf())
        .chain((1..=per_run).map(|n| child_transcript_path(parent, &format!("task-{n}"))))
        .collect()
}

/// `sandbox`, with the files that tell the agent what to do or record what it did protected.
fn protect_own_files(
    sandbox: Sandbox,
    settings: &ResolvedSettings,
    transcripts: &[PathBuf],
) -> Sandbox {
    // What the agent is told and what records it are flycode's own: no tool may change them.
    // Every transcript a sub-agent of this run could write is flycode's too.
    let child_transcripts = transcripts.iter().flat_map(|parent| {
        (1..=settings.tasks.per_run)
            .map(move |n| child_transcript_path(parent, &format!("task-{n}")))
    });
    let own_files: Vec<PathBuf> = [settings.role.file(), settings.system_prompt.file()]
        .into_iter()
        .chain(settings.subagent_roles.iter().map(RoleChoice::file))
        .flatten()
        .map(Path::to_path_buf)
        .collect();
    // The transcripts record other calls' content: no tool may read them either.
    let records: Vec<PathBuf> = transcripts
        .iter()
        .cloned()
        .chain(child_transcripts)
        .collect();
    let protection = sandbox
        .protection()
        .clone()
        .with_own_files(&own_files)
        .with_records(&records);
    sandbox.with_protection(protection)
}

/// The run's limits: the configuration's, with the chosen tool set and the API keys that
/// came from variables of the user's choosing counted as secrets.
fn run_limits(settings: &ResolvedSettings, config: &Config, tool_set: ToolSet) -> Limits {
    Limits {
        // A key in a variable of the user's choosing is as secret as FLYCODE_API_KEY, and so
        // is the light model's.
        // So is every variable the configuration names for a key, used or not.
        extra_secrets: settings
            .api_key_source
            .iter()
            .chain(settings.light.iter().flat_map(|l| &l.api_key_source))
            .cloned()
            .chain(config.agent.key_variables())
            .collect(),
        tool_set,
        ..config.limits()
    }
}
