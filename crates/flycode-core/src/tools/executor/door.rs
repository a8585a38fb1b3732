//! A door's session: what lives as long as the door serves calls, opened once, through one
//! constructor ([`DoorSession::open`]), by every door that runs calls (`exec`, `watch`, `run`,
//! `mcp`; `check` and `validate` run nothing and open none).
//!
//! It holds the door's policy and limits (and with them flycode's secrets), the audit log
//! (PROTOCOL.md §10 (Running calls), the audit log), the undo recorder (PROTOCOL.md §16 (Undo and
//! history)), the stale-read memory (PROTOCOL.md §10 (Stale-read guard)), the background jobs
//! (PROTOCOL.md §10 (Running calls: background jobs), every door but `exec`) and the hints its
//! calls loaded (PROTOCOL.md §9 (hint.load)). The audit log and the undo recorder are not
//! optional: a session cannot be opened without them, and a door's executors are made only from
//! its session ([`DoorSession::executor`]), so no door can forget either. A sub-agent's executor
//! is a restriction of its parent's ([`Executor::subagent`], [`Executor::tag_agent`]).
//!
//! The sandbox is given to [`DoorSession::executor`] rather than kept: `flycode mcp` narrows it
//! to the client's roots call by call (PROTOCOL.md §14 (The MCP server), roots).

use std::sync::Mutex;

use super::{Approver, Door, Executor, Shelf, lock};
use crate::config::Config;
use crate::sandbox::session::SessionError;
use crate::sandbox::undo::{Recorder, UndoStore};
use crate::sandbox::{AuditLog, Sandbox, Session};
use crate::tools::Limits;
use crate::tools::hint::HintShelf;
use crate::tools::jobs::JobTable;
use crate::tools::policy::Policy;

/// What one door keeps while it serves calls. See the module's documentation.
pub struct DoorSession {
    door: Door,
    policy: Policy,
    limits: Limits,
    /// Where every call is logged.
    audit: AuditLog,
    /// Records every change a call makes.
    undo: Recorder,
    /// The stale-read guard's memory, where the door keeps one (`exec` only with `--session`).
    memory: Option<Mutex<Session>>,
    /// The session's background jobs (none in `exec`, which answers one reply and ends).
    jobs: Option<JobTable>,
    /// The hints the door's calls loaded.
    hints: HintShelf,
}

/// A door cannot keep its audit log and undo store: there is no state directory.
#[derive(Debug, thiserror::Error)]
#[error(
    "no state directory for the audit log and the undo store of flycode {door}: set FLYCODE_STATE_DIR, XDG_STATE_HOME or HOME"
)]
pub struct NoStateDirectory {
    /// The door's name.
    pub door: &'static str,
}

impl DoorSession {
    /// Opens `door`'s session under `config`: its policy, `limits` (the configuration's as the
    /// door adjusts them: its tool set, its secrets), the audit log and the undo store in the
    /// state directory (the store keeps `config`'s durability and `[undo]` limits), `memory`
    /// for the stale-read guard, the door's background jobs (every door but `exec`) and an empty
    /// hint shelf.
    pub fn open(
        door: Door,
        config: &Config,
        limits: Limits,
        memory: Option<Session>,
    ) -> Result<DoorSession, NoStateDirectory> {
        let no_state = || NoStateDirectory {
            door: door.as_str(),
        };
        let audit = AuditLog::default_location().ok_or_else(no_state)?;
        let store = UndoStore::open_default(config.durability).ok_or_else(no_state)?;
        let jobs = (door != Door::Exec).then(|| limits.job_table());
        let undo = Recorder::new(store, door.as_str(), config.undo);
        // A door that serves many calls keeps the store's limit as it goes (F7).
        let undo = match door {
            Door::Exec => undo,
            _ => undo.pruning_as_it_goes(),
        };
        Ok(DoorSession {
            undo,
            audit,
            door,
            policy: config.policy.clone(),
            limits,
            memory: memory.map(Mutex::new),
            jobs,
            hints: HintShelf::default(),
        })
    }

    /// The door's executor of calls in `sandbox` (the door's, or, for `mcp`, narrowed to the
    /// client's roots), asking `approver` where a call asks: the session's policy, limits,
    /// audit log, undo recorder, stale-read memory, jobs and hints.
    pub fn executor<'s>(
        &'s self,
        sandbox: &'s Sandbox,
        approver: &'s dyn Approver,
    ) -> Executor<'s> {
        Executor {
            sandbox,
            policy: &self.policy,
            session: self.memory.as_ref(),
            audit: Some(self.audit.clone()),
            limits: self.limits.clone(),
            approver,
            notebook: None,
            tasks: None,
            restriction: None,
            door: self.door,
            jobs: self.jobs.as_ref(),
            recorder: Some(self.undo.clone()),
            hints: Shelf::Shared(&self.hints),
            condenser: None,
            text_only: false,
        }
    }

    /// The door.
    pub fn door(&self) -> Door {
        self.door
    }

    /// The limits calls run within (their secrets: [`Limits::secrets`]).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The session's background jobs (none in `exec`).
    pub fn jobs(&self) -> Option<&JobTable> {
        self.jobs.as_ref()
    }

    /// How many file changes the door's calls made (PROTOCOL.md §16 (Undo and history)).
    pub fn changes_recorded(&self) -> u64 {
        self.undo.recorded()
    }

    /// Saves the stale-read memory, where it is a named session's (`--session NAME`); a
    /// memory of this process only has nothing to save.
    pub fn save_memory(&self) -> Result<(), SessionError> {
        match &self.memory {
            Some(memory) => lock(memory).save(),
            None => Ok(()),
        }
    }
}
