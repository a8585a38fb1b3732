//! The record of a run: JSON Lines, one Chat Completions message a line, that `flycode validate`
//! accepts. It holds the latest request exactly as it was sent (system message and special
//! messages where that request had them) followed by the reply to it, and is rewritten
//! atomically after every reply and every result, so a run that is killed or cancelled leaves a
//! whole record of everything up to that point. Earlier requests differ from the latest only in
//! where their special messages sat: those are rebuilt for every request.

use std::path::{Path, PathBuf};

use super::message::Message;
use crate::sandbox::state::write_atomically;

/// Why a transcript could not be written (the run goes on with a warning: PROTOCOL.md §13 (The API loop)).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TranscriptError {
    /// A message could not be written as JSON (a fault of flycode).
    #[error("transcript: cannot encode a message as JSON: {0}")]
    Unencodable(serde_json::Error),
    /// A file could not be written.
    #[error("transcript {}: {error}; check that its folder is writable, or pass --transcript another path", path.display())]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// Where a run's transcript goes: the state directory's copy and the user's `--transcript`.
#[derive(Debug, Default)]
pub(crate) struct TranscriptWriter {
    paths: Vec<PathBuf>,
}

impl TranscriptWriter {
    /// Writes to every path of `paths` (none: records nothing).
    pub(crate) fn new(paths: Vec<PathBuf>) -> TranscriptWriter {
        TranscriptWriter { paths }
    }

    /// The files written.
    pub(crate) fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Replaces the record with `request` (as sent) followed by `after` (the replies and results
    /// since it was sent). Every path is attempted; the first failure is returned.
    pub(crate) fn save(
        &self,
        request: &[Message],
        after: &[Message],
    ) -> Result<(), TranscriptError> {
        if self.paths.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        for message in request.iter().chain(after) {
            let line = serde_json::to_string(message).map_err(TranscriptError::Unencodable)?;
            text.push_str(&line);
            text.push('\n');
        }
        let mut first_error = None;
        for path in &self.paths {
            if let Err(error) = write_atomically(path, text.as_bytes()) {
                first_error.get_or_insert(TranscriptError::Unwritable {
                    path: path.clone(),
                    error,
                });
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The default transcript path of a run started now: `runs/YYYYMMDDTHHMMSS-PID.jsonl` in the
/// state directory.
pub(crate) fn default_transcript_path(state_dir: &Path, started: std::time::SystemTime) -> PathBuf {
    let stamp: String = crate::protocol::time::format_rfc3339(started)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    state_dir
        .join("runs")
        .join(format!("{stamp}-{}.jsonl", std::process::id()))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    #[test]
    fn the_record_is_one_message_a_line_and_replaced_whole() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("deep/run.jsonl");
        let writer = TranscriptWriter::new(vec![path.clone()]);
        writer
            .save(&[Message::system("s"), Message::user("task")], &[])
            .unwrap();
        writer
            .save(
                &[Message::system("s"), Message::user("task")],
                &[Message::assistant("done", Vec::new())],
            )
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let roles: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["role"].to_string())
            .collect();
        assert_eq!(roles, ["\"system\"", "\"user\"", "\"assistant\""]);
    }

    #[test]
    fn default_paths_live_under_runs() {
        let path = default_transcript_path(Path::new("/state"), std::time::UNIX_EPOCH);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(path.starts_with("/state/runs"), "{}", path.display());
        assert!(
            name.starts_with("19700101T000000Z-") && name.ends_with(".jsonl"),
            "{name}"
        );
    }
}
