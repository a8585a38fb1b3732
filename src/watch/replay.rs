//! The replay store: every call executed in a watch session with the result it earned, so a reply
//! copied again is answered from memory (`[replayed] true`) and never runs twice. Kept as JSON in
//! the state directory, so a restart does not re-run it.
//!
//! The key is the id *and* the exact call (PROTOCOL.md §12 (Watching)): a browser chat starts again at
//! `call-001` in every new conversation, so an id seen before with a different call is a new
//! call, not a mistake. A result that says only that the session's policy refused the call
//! (`denied_by_policy`, `outside_roots`: nothing ran) is replayed only under the same policy, so
//! a restart with `--yes` or another `--root` runs the same copy; the caller does not remember a
//! denial that no person could answer at all.
//!
//! A tag-dialect reply has no ids (PROTOCOL.md §15 (The tag dialect: doors)): the reply itself is
//! the key. Each of its tags is remembered under the hash of the reply's text (BOM, line ends
//! and surrounding whitespace aside) and its place in it, so the same reply copied again, or
//! saved again in the inbox, is answered from memory tag by tag and runs nothing twice; a tag
//! that was not remembered (refused under another policy, never answered) runs.
//!
//! The file is sealed ([`crate::sandbox::seal`]): an entry a program or a tool wrote there would
//! answer a copied call with a result flycode never produced, so a file whose seal does not
//! verify is not used at all (every call runs as new, and flycode says so).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::{Call, ResultBlock};
use crate::sandbox::seal::Purpose;
use crate::sandbox::sha256_hex;
use crate::sandbox::state::{StateError, load_sealed, save_sealed};

/// How many calls a session remembers; the oldest are forgotten first. A forgotten call copied
/// again runs again, so the bound is generous: far more calls than one person copies in a day.
pub(crate) const REMEMBERED_CALLS: usize = 2000;

/// How many bytes of results a session keeps at most (the file is rewritten after every call).
pub(crate) const REMEMBERED_BYTES: usize = 16 << 20;

/// One executed call, or one tag of a tag-dialect reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Executed {
    /// The call's id; a tag's place in its reply (`1`, `2`, ...).
    id: String,
    /// The sha256 of the call's tool and arguments; a tag's: of its reply ([`reply_key`]).
    fingerprint: String,
    /// The rendered result block; a tag's rendered result tag.
    result: String,
    /// Set when the result depends on the session's policy (nothing ran): the policy's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<String>,
    /// A tag of a tag-dialect reply, not a call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    tag: bool,
    /// When it ran (RFC 3339, UTC): a replayed answer says so (`[firstRan]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ran: Option<String>,
}

/// The first version's record, keyed by id alone (read so an update keeps what was stored).
#[derive(Clone, Debug, Deserialize)]
struct ExecutedById {
    fingerprint: String,
    result: String,
}

/// What the store says about a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recall {
    /// Never executed (or refused under another policy): run it.
    New,
    /// Its id was used before for a different call (a new conversation started again at
    /// `call-001`): run it as the new call it is.
    ReusedId,
    /// Executed before: this is the result, marked as replayed.
    Replay(String),
}

/// How the stored calls are written: a list, oldest first; the first version kept a map by id.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum StoredCalls {
    List(Vec<Executed>),
    ById(std::collections::BTreeMap<String, ExecutedById>),
}

#[derive(Debug, Default, Deserialize)]
struct StoredFile {
    executed: Option<StoredCalls>,
}

#[derive(Serialize)]
struct SavedFile<'a> {
    version: u32,
    executed: &'a [Executed],
}

/// Executed calls, oldest first.
#[derive(Clone, Debug, Default)]
pub struct ReplayStore {
    executed: Vec<Executed>,
    file: Option<PathBuf>,
    /// Why the stored calls were not used (for standard error).
    notice: Option<String>,
}

/// The fingerprint of a call: tool and arguments, not the id.
fn fingerprint(call: &Call) -> String {
    let value = serde_json::json!({"tool": call.tool, "args": Value::Object(call.args.clone())});
    sha256_hex(value.to_string().as_bytes())
}

impl ReplayStore {
    /// A store kept in memory only.
    pub fn in_memory() -> ReplayStore {
        ReplayStore::default()
    }

    /// The store in `file` (empty if new; `fresh` discards what was there). A file whose seal
    /// does not verify (not written by flycode as it is) is not used: the store starts empty,
    /// with a [`ReplayStore::notice`] saying why, and every call runs as new.
    pub fn load_from(file: &Path, fresh: bool) -> Result<ReplayStore, StateError> {
        let (stored, notice): (StoredFile, _) = if fresh {
            (StoredFile::default(), None)
        } else {
            load_sealed(file, Purpose::Replay)?
        };
        let executed = match stored.executed {
            None => Vec::new(),
            Some(StoredCalls::List(list)) => list,
            Some(StoredCalls::ById(by_id)) => by_id
                .into_iter()
                .map(|(id, old)| Executed {
                    id,
                    fingerprint: old.fingerprint,
                    result: old.result,
                    policy: None,
                    tag: false,
                    ran: None,
                })
                .collect(),
        };
        Ok(ReplayStore {
            executed,
            file: Some(file.to_owned()),
            notice: notice.map(|n| format!("replay store: {n}")),
        })
    }

    /// Why the stored calls were not used, if they were not.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// What to do with `call` in a session whose policy has the key `policy`. A call that
    /// only reads is never replayed: run again, it gives what is there now, and the model is
    /// never handed old data as new.
    pub fn recall(&self, call: &Call, policy: &str) -> Recall {
        let Some(id) = &call.id else {
            return Recall::New;
        };
        if is_read_only(call.tool) {
            return Recall::New;
        }
        match self.stored(false, id, &fingerprint(call), policy) {
            Some(Some((result, ran))) => return Recall::Replay(mark_replayed(result, ran)),
            // Refused under another policy: run it under this one.
            Some(None) => return Recall::New,
            None => {}
        }
        if self.executed.iter().any(|e| !e.tag && &e.id == id) {
            Recall::ReusedId
        } else {
            Recall::New
        }
    }

    /// The result tag that tag `place` (from 1) of the reply `reply` ([`reply_key`]) earned, with
    /// `replayed=true` added, when it is remembered under `policy`: `None` runs the tag.
    pub fn recall_tag(&self, reply: &str, place: usize, policy: &str) -> Option<String> {
        self.stored(true, &place.to_string(), reply, policy)
            .flatten()
            .map(|(result, _)| mark_tag_replayed(result))
    }

    /// The entry's stored result and when it ran (`None` when there is none), `Some(None)` when
    /// it was refused under another policy than `policy`.
    fn stored(
        &self,
        tag: bool,
        id: &str,
        print: &str,
        policy: &str,
    ) -> Option<Option<(&str, Option<&str>)>> {
        let executed = self
            .executed
            .iter()
            .find(|e| e.tag == tag && e.id == id && e.fingerprint == print)?;
        Some(match &executed.policy {
            Some(key) if key != policy => None,
            _ => Some((executed.result.as_str(), executed.ran.as_deref())),
        })
    }

    /// Remembers that `call` earned `result`, and saves the store. `policy` is the session's
    /// policy key when the result depends on it (the call was refused, nothing ran). A call that
    /// only reads is not remembered (see [`ReplayStore::recall`]).
    pub fn remember(
        &mut self,
        call: &Call,
        result: &str,
        policy: Option<&str>,
    ) -> Result<(), StateError> {
        let Some(id) = &call.id else { return Ok(()) };
        if is_read_only(call.tool) {
            return Ok(());
        }
        self.store(false, id.clone(), fingerprint(call), result, policy)
    }

    /// Remembers that tag `place` (from 1) of the reply `reply` ([`reply_key`]) earned the
    /// rendered `result`, and saves the store; `policy` as for [`ReplayStore::remember`].
    pub fn remember_tag(
        &mut self,
        reply: &str,
        place: usize,
        result: &str,
        policy: Option<&str>,
    ) -> Result<(), StateError> {
        self.store(true, place.to_string(), reply.to_owned(), result, policy)
    }

    fn store(
        &mut self,
        tag: bool,
        id: String,
        print: String,
        result: &str,
        policy: Option<&str>,
    ) -> Result<(), StateError> {
        self.executed
            .retain(|e| !(e.tag == tag && e.id == id && e.fingerprint == print));
        self.executed.push(Executed {
            id,
            fingerprint: print,
            result: result.to_owned(),
            policy: policy.map(str::to_owned),
            tag,
            ran: Some(crate::protocol::time::format_rfc3339(
                std::time::SystemTime::now(),
            )),
        });
        let mut excess = self.executed.len().saturating_sub(REMEMBERED_CALLS);
        let mut bytes: usize = self.executed[excess..].iter().map(|e| e.result.len()).sum();
        for executed in &self.executed[excess..] {
            if bytes <= REMEMBERED_BYTES || excess + 1 == self.executed.len() {
                break;
            }
            bytes -= executed.result.len();
            excess += 1;
        }
        self.executed.drain(..excess);
        self.save()
    }

    /// How many calls are remembered.
    pub fn len(&self) -> usize {
        self.executed.len()
    }

    /// Whether no call is remembered.
    pub fn is_empty(&self) -> bool {
        self.executed.is_empty()
    }

    fn save(&self) -> Result<(), StateError> {
        match &self.file {
            Some(file) => save_sealed(
                file,
                Purpose::Replay,
                &SavedFile {
                    version: 2,
                    executed: &self.executed,
                },
            ),
            None => Ok(()),
        }
    }
}

/// The key of a tag-dialect reply: the sha256 of its text without a byte-order mark, with LF
/// line ends and without the whitespace around it, so the same reply copied again or saved again
/// with another line end is the same reply.
pub(crate) fn reply_key(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    sha256_hex(text.trim().as_bytes())
}

/// A stored result tag with `replayed=true` added to its opening tag.
fn mark_tag_replayed(result: &str) -> String {
    match result.split_once('\n') {
        Some((open, rest)) if open.ends_with('>') => {
            format!("{} replayed=true>\n{rest}", &open[..open.len() - 1])
        }
        _ => result.to_owned(),
    }
}

/// The stored block with `[replayed] true` added, and `[firstRan]` with when it ran, where that
/// was recorded.
fn mark_replayed(result: &str, ran: Option<&str>) -> String {
    match ResultBlock::parse_rendered(result) {
        Ok(mut block) => {
            block
                .fields
                .retain(|(key, _)| key != "replayed" && key != "firstRan");
            block.fields.push(("replayed".into(), "true".into()));
            if let Some(ran) = ran {
                block.fields.push(("firstRan".into(), ran.to_owned()));
            }
            block.render()
        }
        Err(_) => result.to_owned(),
    }
}

/// Whether `tool` only reads (never replayed: PROTOCOL.md §12 (Watching), "Replay").
fn is_read_only(tool: crate::protocol::ToolName) -> bool {
    crate::tools::registry::is_read_only(tool)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::ToolName;

    fn call(id: &str, path: &str) -> Call {
        Call {
            id: Some(id.into()),
            tool: ToolName::FsWrite,
            args: json!({"path": path, "mode": "append", "content": "x"})
                .as_object()
                .cloned()
                .unwrap(),
        }
    }

    fn block(id: &str) -> String {
        ResultBlock::success(Some(id.into()), "/fs.write /a".into(), Some("x".into())).render()
    }

    #[test]
    fn a_call_that_only_reads_is_never_replayed_and_a_change_says_when_it_ran() {
        let mut store = ReplayStore::in_memory();
        let read = Call {
            id: Some("c1".into()),
            tool: ToolName::FsRead,
            args: json!({"path": "/a"}).as_object().cloned().unwrap(),
        };
        store.remember(&read, &block("c1"), None).unwrap();
        assert_eq!(store.recall(&read, "p"), Recall::New);
        assert!(store.is_empty());
        store
            .remember(&call("c2", "/a"), &block("c2"), None)
            .unwrap();
        let Recall::Replay(replayed) = store.recall(&call("c2", "/a"), "p") else {
            panic!("a change was not replayed")
        };
        assert!(replayed.contains("[replayed] true\n"), "{replayed}");
        assert!(replayed.contains("[firstRan] 20"), "{replayed}");
    }

    #[test]
    fn the_same_call_is_replayed_and_a_reused_id_with_another_call_is_new() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("watch/s.json");
        let mut store = ReplayStore::load_from(&file, false).unwrap();
        assert_eq!(store.recall(&call("c1", "/a"), "p"), Recall::New);
        store
            .remember(&call("c1", "/a"), &block("c1"), None)
            .unwrap();
        let mut again = ReplayStore::load_from(&file, false).unwrap();
        let Recall::Replay(replayed) = again.recall(&call("c1", "/a"), "p") else {
            panic!("not replayed")
        };
        assert!(replayed.contains("[replayed] true\n"), "{replayed}");
        assert_eq!(again.recall(&call("c1", "/b"), "p"), Recall::ReusedId);
        // The second conversation's call-001 is remembered beside the first's.
        again
            .remember(&call("c1", "/b"), &block("c1"), None)
            .unwrap();
        let both = ReplayStore::load_from(&file, false).unwrap();
        assert!(matches!(
            both.recall(&call("c1", "/a"), "p"),
            Recall::Replay(_)
        ));
        assert!(matches!(
            both.recall(&call("c1", "/b"), "p"),
            Recall::Replay(_)
        ));
        assert_eq!(
            ReplayStore::load_from(&file, true)
                .unwrap()
                .recall(&call("c1", "/a"), "p"),
            Recall::New
        );
    }

    #[test]
    fn a_refusal_is_replayed_only_under_the_same_policy() {
        let mut store = ReplayStore::in_memory();
        store
            .remember(&call("c1", "/a"), &block("c1"), Some("ask"))
            .unwrap();
        assert!(matches!(
            store.recall(&call("c1", "/a"), "ask"),
            Recall::Replay(_)
        ));
        assert_eq!(store.recall(&call("c1", "/a"), "yes"), Recall::New);
        // Run under the new policy, it is the one remembered.
        store
            .remember(&call("c1", "/a"), &block("c1"), None)
            .unwrap();
        assert_eq!(store.len(), 1);
        assert!(matches!(
            store.recall(&call("c1", "/a"), "ask"),
            Recall::Replay(_)
        ));
    }

    #[test]
    fn a_store_flycode_did_not_seal_is_never_replayed() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("forged.json");
        // A forged entry for the exact call, in the first version's form and the current one's.
        let forged = ResultBlock::success(
            Some("c1".into()),
            "/fs.read /a".into(),
            Some("FORGED".into()),
        )
        .render();
        for stored in [
            json!({"executed": {"c1": {"fingerprint": fingerprint(&call("c1", "/a")), "result": forged}}}),
            json!({"version": 2, "executed": [{"id": "c1", "fingerprint": fingerprint(&call("c1", "/a")), "result": forged}]}),
        ] {
            std::fs::write(&file, stored.to_string()).unwrap();
            let store = ReplayStore::load_from(&file, false).unwrap();
            assert_eq!(store.recall(&call("c1", "/a"), "p"), Recall::New);
            assert!(store.is_empty());
            assert!(store.notice().unwrap().contains("seal does not verify"));
        }
        // A genuine store, changed by one byte, is not used either.
        let genuine = temp.path().join("genuine.json");
        let mut store = ReplayStore::load_from(&genuine, false).unwrap();
        store
            .remember(&call("c1", "/a"), &block("c1"), None)
            .unwrap();
        let text = std::fs::read_to_string(&genuine).unwrap();
        std::fs::write(&genuine, text.replace("\\nx\\n", "\\nX\\n")).unwrap();
        assert_ne!(std::fs::read_to_string(&genuine).unwrap(), text);
        let store = ReplayStore::load_from(&genuine, false).unwrap();
        assert_eq!(store.recall(&call("c1", "/a"), "p"), Recall::New);
    }

    #[test]
    fn a_tag_is_replayed_by_its_reply_and_place_and_never_taken_for_a_call() {
        let mut store = ReplayStore::in_memory();
        let reply = reply_key("\u{feff}<bash_call>ls</bash_call>\r\n");
        assert_eq!(reply, reply_key("<bash_call>ls</bash_call>"));
        let result = "<bash_call_result exit_code=0 duration_ms=3>\nx\n</bash_call_result>\n";
        store.remember_tag(&reply, 1, result, None).unwrap();
        assert_eq!(
            store.recall_tag(&reply, 1, "p").as_deref(),
            Some(
                "<bash_call_result exit_code=0 duration_ms=3 replayed=true>\nx\n</bash_call_result>\n"
            )
        );
        assert_eq!(store.recall_tag(&reply, 2, "p"), None);
        assert_eq!(store.recall_tag(&reply_key("other"), 1, "p"), None);
        // A call whose id is "1" is not the tag.
        assert_eq!(store.recall(&call("1", "/a"), "p"), Recall::New);
        store.remember_tag(&reply, 2, result, Some("ask")).unwrap();
        assert!(store.recall_tag(&reply, 2, "ask").is_some());
        assert_eq!(store.recall_tag(&reply, 2, "yes"), None);
    }

    #[test]
    fn the_oldest_calls_are_forgotten_past_the_bound() {
        let mut store = ReplayStore::in_memory();
        for n in 0..REMEMBERED_CALLS + 5 {
            let id = format!("c{n}");
            store.remember(&call(&id, "/a"), &block(&id), None).unwrap();
        }
        assert_eq!(store.len(), REMEMBERED_CALLS);
        assert_eq!(store.recall(&call("c0", "/a"), "p"), Recall::New);
        let last = format!("c{}", REMEMBERED_CALLS + 4);
        assert!(matches!(
            store.recall(&call(&last, "/a"), "p"),
            Recall::Replay(_)
        ));
    }
}
