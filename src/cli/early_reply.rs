//! `flycode exec`'s reply, read first (before the guardian is started): a reply that can start
//! no program needs no guardian, and `exec` then skips the two extra processes (PROTOCOL.md §11
//! (Security), "No program outlives flycode": "A one-shot `exec` that runs no program").
//!
//! The decision is made on the very bytes the call is then read from, never on a second read, and
//! fails closed twice: a reply that could name a program tool in any way the parsers accept is
//! guarded, and a process that decided to go unguarded cannot start a program at all
//! ([`crate::sandbox::process::guard::run_no_programs`]).

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use super::ExecArgs;
use crate::config::reply_limit::ReplyTooLarge;

/// Replies up to this size are read before the split; a longer one is guarded, its bytes
/// passed on to the worker.
const EARLY_BYTES: usize = 1 << 20;

/// What was read of the reply before the guardian.
pub(crate) enum EarlyReply {
    /// Nothing: the reply comes from `--slash`, or from a terminal (the person types it to the
    /// worker), or a file that is too large to read early.
    NotRead,
    /// The whole reply (standard input to its end, or the file named).
    Whole {
        /// Its bytes.
        bytes: Vec<u8>,
        /// Where it came from: a file (its name) or standard input (`None`).
        file: Option<PathBuf>,
    },
    /// The start of a standard input longer than [`EARLY_BYTES`]: the rest is still to be read.
    Started(Vec<u8>),
}

impl EarlyReply {
    /// Reads the reply `args` names, where it can be read before the split.
    pub(crate) fn read(args: &ExecArgs) -> anyhow::Result<EarlyReply> {
        if args.slash.is_some() {
            return Ok(EarlyReply::NotRead);
        }
        match &args.input {
            Some(path) if path.as_os_str() != "-" => {
                // An error is the worker's to report, with its own words.
                let Ok(mut file) = crate::sandbox::host::open(path) else {
                    return Ok(EarlyReply::NotRead);
                };
                let mut bytes = Vec::new();
                let read = (&mut file)
                    .take(EARLY_BYTES as u64 + 1)
                    .read_to_end(&mut bytes);
                if read.is_err() || bytes.len() > EARLY_BYTES {
                    return Ok(EarlyReply::NotRead);
                }
                Ok(EarlyReply::Whole {
                    bytes,
                    file: Some(path.clone()),
                })
            }
            _ if std::io::stdin().is_terminal() => Ok(EarlyReply::NotRead),
            _ => {
                let mut bytes = Vec::new();
                std::io::stdin()
                    .lock()
                    .take(EARLY_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|error| {
                        anyhow::Error::new(error).context("cannot read standard input")
                    })?;
                if bytes.len() > EARLY_BYTES {
                    Ok(EarlyReply::Started(bytes))
                } else {
                    Ok(EarlyReply::Whole { bytes, file: None })
                }
            }
        }
    }

    /// Whether the call this reply holds could start a program, so that `exec` must be
    /// guarded: unless the whole reply is known and names no program tool.
    pub(crate) fn may_start_program(&self, slash: Option<&str>) -> bool {
        match (self, slash) {
            (EarlyReply::Whole { bytes, .. }, _) => names_a_program_tool(bytes),
            (EarlyReply::NotRead, Some(line)) => names_a_program_tool(line.as_bytes()),
            _ => true,
        }
    }

    /// What standard input held and the worker must be given again (read from standard input
    /// and guarded): the bytes, and whether the rest of standard input follows them.
    pub(crate) fn for_the_worker(&self) -> Option<(&[u8], bool)> {
        match self {
            EarlyReply::Whole { bytes, file: None } => Some((bytes, false)),
            EarlyReply::Started(bytes) => Some((bytes, true)),
            EarlyReply::Whole { file: Some(_), .. } | EarlyReply::NotRead => None,
        }
    }

    /// The reply, held to `limit` (`max_reply_bytes`) as [`super::read_input`] holds it: what
    /// was read early, with the rest of standard input where it was not all read, or, where
    /// nothing was, read now from `input` (a file, or standard input).
    pub(crate) fn into_reply(
        self,
        input: Option<&PathBuf>,
        limit: usize,
    ) -> anyhow::Result<Result<String, ReplyTooLarge>> {
        match self {
            EarlyReply::Whole { bytes, file } => {
                if bytes.len() > limit {
                    let size = file.as_ref().map(|_| bytes.len() as u64);
                    return Ok(Err(ReplyTooLarge { size, limit }));
                }
                let name = file.map_or_else(
                    || "standard input".to_owned(),
                    |path| path.display().to_string(),
                );
                super::reply_text(bytes, &name).map(Ok)
            }
            EarlyReply::Started(start) => {
                let whole = std::io::Cursor::new(start).chain(std::io::stdin().lock());
                match crate::config::reply_limit::read_reply(whole, limit, None).map_err(
                    |error| anyhow::Error::new(error).context("cannot read standard input"),
                )? {
                    Ok(bytes) => super::reply_text(bytes, "standard input").map(Ok),
                    Err(too_large) => Ok(Err(too_large)),
                }
            }
            EarlyReply::NotRead => super::read_input(input, limit),
        }
    }
}

/// Whether `reply` could name a tool that starts a program, however a parser reads it: the
/// words of `process.run`, `shell.exec`, the `job.*` tools, `agent.task` and `<bash_call>` in
/// any case and spelling (`shell_exec`, `/shell.exec`), or a JSON `\u` escape, which could spell
/// any of them.
fn names_a_program_tool(reply: &[u8]) -> bool {
    const WORDS: [&[u8]; 5] = [b"process", b"shell", b"bash", b"job", b"agent"];
    let lower = reply.to_ascii_lowercase();
    WORDS
        .iter()
        .any(|word| lower.windows(word.len()).any(|window| window == *word))
        || lower.windows(2).any(|window| window == b"\\u")
}

#[cfg(test)]
mod tests {
    use super::names_a_program_tool;

    #[test]
    fn a_reply_is_guarded_when_it_could_name_a_program_tool_in_any_spelling() {
        for reply in [
            r#"{"id":"a","tool":"shell.exec","args":{"command":"ls"}}"#,
            r#"{"id":"a","tool":"Process.Run","args":{}}"#,
            "/shell.exec ls",
            "<bash_call>ls</bash_call>",
            r#"{"id":"a","tool":"job.start"}"#,
            r#"{"id":"a","tool":"\u0073hell.exec"}"#,
            r#"{"id":"a","tool":"agent.task"}"#,
        ] {
            assert!(names_a_program_tool(reply.as_bytes()), "{reply}");
        }
        for reply in [
            r#"{"id":"a","tool":"fs.read","args":{"path":"/r/README.md"}}"#,
            "/fs.ls /r",
            "<builtin>\nread_file\npath: a.txt\n</builtin>",
        ] {
            assert!(!names_a_program_tool(reply.as_bytes()), "{reply}");
        }
    }
}
