//! The change record of a call (PROTOCOL.md §16 (Undo and history)): before a call's change
//! lands, the door's [`Recorder`](crate::sandbox::undo::Recorder) stores what its paths hold
//! (before the tool runs, or, for a tool that stages its new contents first, beside it until
//! its first change to the roots); after it, what they hold now, and the change's id goes into
//! the result block (`[change] c-42`) and the terminal's line (`Wrote 12 lines · c-42`). A call
//! that runs a program gets a record without paths: what a program changes is not recorded.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Execution, Executor};
use crate::sandbox::landing;
use crate::sandbox::undo::{Named, Pending, UndoError};
use crate::tools::registry::Invocation;
use crate::tools::tool::SessionChange;

/// What recording a call came to before it ran.
pub(super) enum Started {
    /// Nothing to record (no recorder, a call that changes nothing).
    Nothing,
    /// The pre-images are stored.
    Recording(Box<Pending>),
    /// The call runs a program.
    Program,
    /// Recording failed: the call runs unrecorded, and says so.
    Failed(String),
}

impl Executor<'_> {
    /// Runs the tool (`run`) with its change recorded: the pre-images of what `invocation` is
    /// about to change are stored first, or, for a tool that stages its new contents before it
    /// changes anything, on a second thread while it stages, its first change to the roots
    /// waiting for the record ([`landing`]).
    pub(super) fn run_recorded<R>(
        &self,
        invocation: &Invocation<'_>,
        run: impl FnOnce() -> R,
    ) -> (R, Started) {
        let Some(recorder) = &self.recorder else {
            return (run(), Started::Nothing);
        };
        let effects = invocation.effects();
        if effects.program.is_some() {
            return (run(), Started::Program);
        }
        let named: Vec<Named<'_>> = effects
            .writes
            .iter()
            .map(|input| {
                let appended = effects.appends.contains(input);
                Named {
                    input,
                    whole: effects.whole,
                    deep: effects.whole,
                    // An appended file keeps its content, and refuses a second name.
                    replaced: effects.replaces && !appended,
                    appended,
                }
            })
            .chain(effects.creates.iter().map(|input| Named {
                input,
                whole: false,
                deep: false,
                replaced: false,
                appended: false,
            }))
            .collect();
        if named.is_empty() {
            return (run(), Started::Nothing);
        }
        let call = invocation.call();
        let record =
            || match recorder.begin(self.sandbox, call.tool.as_str(), call.id.as_deref(), &named) {
                Ok(pending) => Started::Recording(Box::new(pending)),
                // A path the sandbox refuses: the call fails on its own, with its own words.
                Err(UndoError::Sandbox(_)) => Started::Nothing,
                Err(error) => Started::Failed(error.to_string()),
            };
        if !effects.stages {
            let started = record();
            return (run(), started);
        }
        let gate = Arc::new(landing::LandingGate::default());
        std::thread::scope(|scope| {
            // On another processor where one is idle: the recording works while the tool
            // stages, not after it.
            let idle = crate::sandbox::beside::idle_processors();
            let recording =
                crate::sandbox::beside::spawn_beside(scope, "undo-record", idle, || {
                    let _open = gate.opener();
                    record()
                });
            // No thread to be had: record first, then run, as for the other tools.
            let Ok(recording) = recording else {
                let started = record();
                return (run(), started);
            };
            let result = landing::behind(Arc::clone(&gate), run);
            let started = recording.join().unwrap_or_else(|_| {
                Started::Failed("the recorder stopped unexpectedly".to_owned())
            });
            (result, started)
        })
    }

    /// Finishes the record begun for a call (after-images), and puts its id on the execution.
    pub(super) fn finish_change(
        &self,
        invocation: &Invocation<'_>,
        started: Started,
        execution: &mut Execution,
    ) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        let call = invocation.call();
        let id = match started {
            Started::Nothing => return,
            Started::Program => {
                // Noted for `history`; nothing of it can be undone, so no id is shown.
                let _ = recorder.program(call.tool.as_str(), call.id.as_deref());
                return;
            }
            Started::Failed(why) => {
                execution.summary = format!("{} · not recorded for undo: {why}", execution.summary);
                return;
            }
            Started::Recording(pending) => {
                match recorder.finish(*pending, &written(invocation, execution)) {
                    Ok(Some(id)) => id,
                    Ok(None) => return,
                    Err(error) => {
                        execution.summary =
                            format!("{} · not recorded for undo: {error}", execution.summary);
                        return;
                    }
                }
            }
        };
        execution
            .block
            .fields
            .push(("change".to_owned(), id.clone()));
        execution.summary = if execution.summary.is_empty() {
            id.clone()
        } else {
            format!("{} · {id}", execution.summary)
        };
        execution.change = Some(id);
    }
}

/// The sha256 of each file the call says it wrote (what it tells the session's stale-read guard,
/// [`SessionChange::Wrote`] and [`SessionChange::Appended`]), by the path it names: the
/// after-images take these rather than hashing the files again.
fn written(invocation: &Invocation<'_>, execution: &Execution) -> BTreeMap<String, String> {
    let Some(output) = &execution.output else {
        return BTreeMap::new();
    };
    invocation
        .bound()
        .session_changes(output)
        .into_iter()
        .filter_map(|change| match change {
            SessionChange::Wrote(path, sha256) | SessionChange::Appended(path, sha256) => {
                Some((path, sha256))
            }
            _ => None,
        })
        .filter(|(_, sha256)| sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect()
}
