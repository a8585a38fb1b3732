//! The replay store: every call id executed in a watch session with the result it earned, so a
//! reply copied again is answered from memory (`[replayed] true`) and never runs twice. Kept as
//! JSON in the state directory when the session has a name, so a restart does not re-run it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::{Call, ResultBlock};
use crate::sandbox::sha256_hex;
use crate::sandbox::state::{load_json, save_json};

/// One executed call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Executed {
    /// The sha256 of the call's tool and arguments: the same id for another call is not a replay.
    fingerprint: String,
    /// The rendered result block.
    result: String,
}

/// What the store says about a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recall {
    /// Never executed: run it.
    New,
    /// Executed before: this is the result, marked as replayed.
    Replay(String),
    /// The id was used for a different call.
    Conflict,
}

/// Executed calls by id.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReplayStore {
    executed: BTreeMap<String, Executed>,
    #[serde(skip)]
    file: Option<PathBuf>,
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

    /// The store in `file` (empty if new; `fresh` discards what was there).
    pub fn load_from(file: &Path, fresh: bool) -> Result<ReplayStore, String> {
        let mut store: ReplayStore = if fresh {
            ReplayStore::default()
        } else {
            load_json(file)?
        };
        store.file = Some(file.to_owned());
        Ok(store)
    }

    /// What to do with `call`.
    pub fn recall(&self, call: &Call) -> Recall {
        let Some(id) = &call.id else {
            return Recall::New;
        };
        match self.executed.get(id) {
            None => Recall::New,
            Some(executed) if executed.fingerprint == fingerprint(call) => {
                Recall::Replay(mark_replayed(&executed.result))
            }
            Some(_) => Recall::Conflict,
        }
    }

    /// Remembers that `call` was executed with `result`, and saves the store.
    pub fn remember(&mut self, call: &Call, result: &str) -> Result<(), String> {
        let Some(id) = &call.id else { return Ok(()) };
        self.executed.insert(
            id.clone(),
            Executed {
                fingerprint: fingerprint(call),
                result: result.to_owned(),
            },
        );
        self.save()
    }

    fn save(&self) -> Result<(), String> {
        match &self.file {
            Some(file) => save_json(file, self),
            None => Ok(()),
        }
    }
}

/// The stored block with `[replayed] true` added.
fn mark_replayed(result: &str) -> String {
    match ResultBlock::parse_rendered(result) {
        Ok(mut block) => {
            block.fields.retain(|(key, _)| key != "replayed");
            block.fields.push(("replayed".into(), "true".into()));
            block.render()
        }
        Err(_) => result.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::ToolName;

    fn call(id: &str, path: &str) -> Call {
        Call {
            id: Some(id.into()),
            tool: ToolName::FsRead,
            args: json!({"path": path}).as_object().cloned().unwrap(),
        }
    }

    #[test]
    fn a_call_is_replayed_and_an_id_reused_for_another_call_is_a_conflict() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("watch/s.json");
        let mut store = ReplayStore::load_from(&file, false).unwrap();
        let block = ResultBlock::success(Some("c1".into()), "/fs.read /a".into(), Some("x".into()))
            .render();
        assert_eq!(store.recall(&call("c1", "/a")), Recall::New);
        store.remember(&call("c1", "/a"), &block).unwrap();
        let again = ReplayStore::load_from(&file, false).unwrap();
        let Recall::Replay(replayed) = again.recall(&call("c1", "/a")) else {
            panic!("not replayed")
        };
        assert!(replayed.contains("[replayed] true\n"), "{replayed}");
        assert_eq!(again.recall(&call("c1", "/b")), Recall::Conflict);
        assert_eq!(
            ReplayStore::load_from(&file, true)
                .unwrap()
                .recall(&call("c1", "/a")),
            Recall::New
        );
    }
}
