//! The stale-read guard (PROTOCOL.md §10 (Stale-read guard)) as the call service keeps it: a
//! file the session read must not have changed before a call changes it, and what a call read
//! or wrote is remembered.

use std::path::PathBuf;

use super::{Executor, lock};
use crate::protocol::ErrorCode;
use crate::sandbox::LastComponent;
use crate::tools::registry::Invocation;
use crate::tools::tool::SessionChange;
use crate::tools::{ToolError, ToolOutput};

impl Executor<'_> {
    /// A file the model read that changed since may not be changed without expectedSha256.
    pub(super) fn check_stale(&self, invocation: &Invocation<'_>) -> Result<(), ToolError> {
        let Some(session) = self.session else {
            return Ok(());
        };
        for input in invocation.bound().guarded_paths() {
            let Ok(path) = self.sandbox.resolve(input, LastComponent::Follow) else {
                continue;
            };
            let (seen, distrusted) = {
                let session = lock(session);
                let seen = session.remembered(&path.absolute).map(str::to_owned);
                (seen, session.is_distrusted())
            };
            let Some(seen) = seen else {
                // The session's memory was lost (its file was not flycode's): an existing file
                // it cannot vouch for must be read again first.
                if distrusted && path.exists && self.current_hash(input).is_some() {
                    return Err(ToolError::new(
                        ErrorCode::StaleFile,
                        format!(
                            "{input} may have changed since it was read: this session's memory of earlier reads could not be trusted and was dropped"
                        ),
                        Some(
                            "read it again first (or pass expectedSha256 with the current hash, where the tool takes one)",
                        ),
                    ));
                }
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
        let mut file = self.sandbox.open_for_reading(input).ok()?;
        crate::sandbox::content_hash::current_sha256(&mut file).ok()
    }

    pub(super) fn update_session(&self, invocation: &Invocation<'_>, output: &ToolOutput) {
        let Some(session) = self.session else {
            return;
        };
        let resolved = |input: &str| -> Option<PathBuf> {
            self.sandbox
                .resolve(input, LastComponent::Follow)
                .ok()
                .map(|p| p.absolute)
        };
        for change in invocation.bound().session_changes(output) {
            match change {
                SessionChange::Read(input) => {
                    if let (Some(path), Some(hash)) = (resolved(input), self.current_hash(input)) {
                        lock(session).remember(&path, &hash);
                    }
                }
                SessionChange::Wrote(input, hash) | SessionChange::Saw(input, hash) => {
                    if let Some(path) = resolved(&input) {
                        lock(session).remember(&path, &hash);
                    }
                }
                // PROTOCOL.md §10 (Stale-read guard): an append carries what the session knew
                // forward; it never makes the session know a file it did not.
                SessionChange::Appended(input, hash) => {
                    if let Some(path) = resolved(&input) {
                        let mut session = lock(session);
                        if session.remembered(&path).is_some() {
                            session.remember(&path, &hash);
                        }
                    }
                }
                // A missing last component still resolves, to the name it had.
                SessionChange::Forget(input) => {
                    if let Some(path) = resolved(input) {
                        lock(session).forget(&path);
                    }
                }
            }
        }
    }
}
