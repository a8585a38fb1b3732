//! The audit log: one JSON line per executed call (time, id, tool, arguments with content shown
//! as size and sha256, outcome, code, duration), appended to `audit.jsonl` in the state
//! directory. Each line is written with a single append, so concurrent writers never interleave.
//!
//! Each line ends with a `seal` ([`super::seal`], HMAC-SHA256 under the state directory's key)
//! over the line's bytes before it, so [`line_seal`] tells a line flycode wrote from one that
//! was changed or added by anything else. What it does not show: a line removed, the log cut
//! short or replaced by an older copy, or a genuine line copied twice (the seal covers a line,
//! not its place in the log). No tool may read or change the log (it is in the state
//! directory), and no contained program may, even when the state directory lies inside a root.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use super::content_hash::sha256_hex;
use super::mask::Secrets;
use super::seal::{Purpose, SealKey};
use super::state::state_dir;

/// What each line's seal is made for (the log's usual name, whatever the file is called now).
const SEAL_NAME: &str = "audit.jsonl";

/// How a line's seal is appended: `…,"seal":"HEX"}`.
const SEAL_FIELD: &str = ",\"seal\":\"";

/// What a line of the audit log says about its origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineSeal {
    /// flycode wrote it as it is.
    Verified,
    /// It has no seal (written by an older flycode, or by someone else).
    Missing,
    /// Its seal does not match: it was changed, or not written by flycode.
    Broken,
}

/// Whether `line` (without its newline) is one flycode wrote as it is, by its seal.
pub fn line_seal(line: &str) -> LineSeal {
    let Some((body, mac)) = split_seal(line) else {
        return LineSeal::Missing;
    };
    match SealKey::of_state_dir() {
        Ok(key) if key.verifies(Purpose::Audit, SEAL_NAME, body.as_bytes(), mac) => {
            LineSeal::Verified
        }
        _ => LineSeal::Broken,
    }
}

/// The line as it was before its seal (with its closing brace) and the seal.
fn split_seal(line: &str) -> Option<(String, &str)> {
    let at = line.rfind(SEAL_FIELD)?;
    let mac = line[at + SEAL_FIELD.len()..].strip_suffix("\"}")?;
    Some((format!("{}}}", &line[..at]), mac))
}

/// `line` (a JSON object) with its seal added before the closing brace.
fn sealed(key: &SealKey, line: String) -> String {
    let mac = key.seal(Purpose::Audit, SEAL_NAME, line.as_bytes());
    match line.strip_suffix('}') {
        Some(open) => format!("{open}{SEAL_FIELD}{mac}\"}}"),
        None => line,
    }
}

/// Arguments whose values are file contents: logged as size and hash only.
const CONTENT_KEYS: [&str; 2] = ["content", "rightContent"];

/// One executed call.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditEntry {
    /// When it ran.
    pub time: SystemTime,
    /// The call id, if any.
    pub id: Option<String>,
    /// The tool.
    pub tool: String,
    /// The arguments as logged: made by [`logged_args`] from the arguments as given.
    pub args: Map<String, Value>,
    /// `ok`, `failed` or `denied`.
    pub outcome: &'static str,
    /// The error code of a failure.
    pub code: Option<String>,
    /// How long it took.
    pub duration: Duration,
    /// Who let it run or refused it (`policy`, `person`, `yes-flag`, `session-tool`,
    /// `session-command`, `declined`, `interrupted`, `unanswered`), where known: PROTOCOL.md §10
    /// (Running calls), "Audit log".
    pub approval: Option<&'static str>,
}

/// The audit log file.
#[derive(Clone, Debug)]
pub struct AuditLog {
    path: PathBuf,
    /// Who sent the calls logged through this handle, where the door can tell (`flycode mcp
    /// --http`: the client's name and address), written as each line's `client`.
    client: Option<std::sync::Arc<AuditClient>>,
}

/// The client a call came from, as the audit log names it (PROTOCOL.md §14, "Over HTTP").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditClient {
    /// The name and version the client gave (`clientInfo`), if it gave one.
    pub name: Option<String>,
    /// The address it connected from.
    pub address: Option<String>,
}

impl AuditLog {
    /// The log in the state directory.
    pub fn default_location() -> Option<AuditLog> {
        state_dir().map(|dir| AuditLog {
            path: dir.join("audit.jsonl"),
            client: None,
        })
    }

    /// A log at `path`.
    pub fn at(path: &Path) -> AuditLog {
        AuditLog {
            path: path.to_owned(),
            client: None,
        }
    }

    /// The same log, each line naming `client` as who sent the call.
    #[must_use]
    pub fn for_client(mut self, client: AuditClient) -> AuditLog {
        self.client = Some(std::sync::Arc::new(client));
        self
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry, every field of it (id, tool, arguments, code) masked by `secrets`
    /// (PROTOCOL.md §9 (Secrets and masking)): the log is masked where it is written, so no caller can
    /// forget to.
    pub fn append(&self, entry: &AuditEntry, secrets: &Secrets) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut value = entry_json(entry);
        if let (Some(client), Value::Object(fields)) = (&self.client, &mut value) {
            fields.insert(
                "client".to_owned(),
                json!({"name": client.name, "address": client.address}),
            );
        }
        secrets.mask_value(&mut value);
        let mut line = value.to_string();
        // A log without a key still logs: the lines are then unsealed, and say so when checked.
        if let Ok(key) = SealKey::of_state_dir() {
            line = sealed(&key, line);
        }
        line.push('\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(line.as_bytes())
    }

    /// The last `count` entries, oldest first, and the lines that could not be read as one.
    ///
    /// A damaged line (not UTF-8, not a JSON object: a torn write, a disk error, an edit by
    /// hand) is skipped and reported by its line number, so one bad line never hides the rest.
    pub fn recent(&self, count: usize) -> std::io::Result<RecentEntries> {
        let mut recent = RecentEntries::default();
        if count == 0 {
            return Ok(recent);
        }
        let file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(recent),
            Err(error) => return Err(error),
        };
        let mut last = std::collections::VecDeque::with_capacity(count.min(1024));
        for (index, line) in BufReader::new(file).split(b'\n').enumerate() {
            let line = line?;
            let Some(text) = std::str::from_utf8(&line).ok() else {
                recent.note_damaged(index + 1);
                continue;
            };
            let entry = serde_json::from_str::<Value>(text)
                .ok()
                .filter(Value::is_object);
            let Some(entry) = entry else {
                recent.note_damaged(index + 1);
                continue;
            };
            let verified = line_seal(text) == LineSeal::Verified;
            if !verified {
                recent.note_unverified(index + 1);
            }
            if last.len() == count {
                last.pop_front();
            }
            last.push_back((entry, verified));
        }
        (recent.entries, recent.verified) = last.into_iter().unzip();
        Ok(recent)
    }
}

/// What [`AuditLog::recent`] read: the entries and where the log was damaged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentEntries {
    /// The entries, oldest first.
    pub entries: Vec<Value>,
    /// The 1-based numbers of the first [`RecentEntries::MAX_LISTED`] damaged lines.
    pub damaged_lines: Vec<usize>,
    /// How many lines were damaged in all.
    pub damaged_count: usize,
    /// For each of [`RecentEntries::entries`], whether its seal verifies (flycode wrote it as
    /// it is).
    pub verified: Vec<bool>,
    /// The 1-based numbers of the first [`RecentEntries::MAX_LISTED`] readable lines whose seal
    /// does not verify (changed, written by something else, or by a flycode before seals).
    pub unverified_lines: Vec<usize>,
    /// How many readable lines carry no valid seal in all.
    pub unverified_count: usize,
}

impl RecentEntries {
    /// How many damaged line numbers are kept: a log of garbage costs no more memory than this.
    pub const MAX_LISTED: usize = 20;

    fn note_unverified(&mut self, line: usize) {
        self.unverified_count += 1;
        if self.unverified_lines.len() < Self::MAX_LISTED {
            self.unverified_lines.push(line);
        }
    }

    fn note_damaged(&mut self, line: usize) {
        self.damaged_count += 1;
        if self.damaged_lines.len() < Self::MAX_LISTED {
            self.damaged_lines.push(line);
        }
    }
}

fn entry_json(entry: &AuditEntry) -> Value {
    let mut line = json!({
        "time": flycode_protocol::time::format_rfc3339(entry.time),
        "id": entry.id,
        "tool": entry.tool,
        "args": entry.args,
        "outcome": entry.outcome,
        "code": entry.code,
        "durationMs": u64::try_from(entry.duration.as_millis()).unwrap_or(u64::MAX),
    });
    if let (Some(approval), Value::Object(fields)) = (entry.approval, &mut line) {
        fields.insert("approval".to_owned(), Value::from(approval));
    }
    line
}

/// How secrets are masked in text (`Secrets::mask`), for [`logged_args`].
pub type Mask<'m> = &'m dyn for<'t> Fn(&'t str) -> Cow<'t, str>;

/// The arguments as the log holds them: content as `{bytes, sha256}` of the content with its
/// secrets masked (a hash of the raw content would let someone confirm a guessed secret),
/// environment values as their length, the rest as given (the caller masks those). The log never
/// holds file contents or secrets, and content without a secret is never copied to be logged.
pub fn logged_args(args: &Map<String, Value>, mask: Mask<'_>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in args {
        let shown = match (key.as_str(), value) {
            (k, Value::String(text)) if CONTENT_KEYS.contains(&k) => {
                let masked = mask(text);
                json!({"bytes": masked.len(), "sha256": sha256_hex(masked.as_bytes())})
            }
            ("env", Value::Object(env)) => Value::Object(
                env.iter()
                    .map(|(name, v)| {
                        (
                            name.clone(),
                            json!(format!("<{} bytes>", v.as_str().map_or(0, str::len))),
                        )
                    })
                    .collect(),
            ),
            ("files", Value::Array(files)) => Value::Array(
                files
                    .iter()
                    .map(|f| {
                        f.as_object()
                            .map_or(Value::Null, |f| Value::Object(logged_args(f, mask)))
                    })
                    .collect(),
            ),
            _ => value.clone(),
        };
        out.insert(key.clone(), shown);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_appended_and_contents_never_logged() {
        let temp = tempfile::tempdir().unwrap();
        let log = AuditLog::at(&temp.path().join("state/audit.jsonl"));
        for n in 0..3 {
            let args =
                json!({"path": "/w/a", "content": format!("secret {n}"), "env": {"TOKEN": "abc"}});
            log.append(
                &AuditEntry {
                    time: SystemTime::UNIX_EPOCH,
                    id: Some(format!("call-{n}")),
                    tool: "fs.write".into(),
                    args: logged_args(args.as_object().unwrap(), &|text| Cow::Borrowed(text)),
                    outcome: "ok",
                    code: None,
                    duration: Duration::from_millis(3),
                    approval: None,
                },
                &Secrets::default(),
            )
            .unwrap();
        }
        let text = std::fs::read_to_string(log.path()).unwrap();
        // Quoted: a hex hash or seal may hold the letters "abc" by chance.
        assert!(
            !text.contains("secret") && !text.contains("\"abc\""),
            "{text}"
        );
        let recent = log.recent(2).unwrap().entries;
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[1]["id"], "call-2");
        assert_eq!(recent[1]["args"]["content"]["bytes"], 8);
        assert_eq!(recent[1]["args"]["env"]["TOKEN"], "<3 bytes>");
        assert_eq!(recent[1]["time"], "1970-01-01T00:00:00Z");
        assert_eq!(recent[1]["durationMs"], 3);
        assert_eq!(log.recent(0).unwrap(), RecentEntries::default());
        // Content is hashed with its secrets masked: the hash cannot confirm a guessed secret.
        let args = json!({"content": "key=hunter22"});
        let logged = logged_args(args.as_object().unwrap(), &|text| {
            Cow::Owned(text.replace("hunter22", "***"))
        });
        assert_eq!(logged["content"]["sha256"], sha256_hex(b"key=***"));
        assert_eq!(logged["content"]["bytes"], 7);
    }

    #[test]
    fn a_changed_or_forged_line_is_told_from_one_flycode_wrote() {
        let temp = tempfile::tempdir().unwrap();
        let log = AuditLog::at(&temp.path().join("audit.jsonl"));
        log.append(
            &AuditEntry {
                time: SystemTime::UNIX_EPOCH,
                id: Some("c1".into()),
                tool: "fs.read".into(),
                args: Map::new(),
                outcome: "ok",
                code: None,
                duration: Duration::from_millis(1),
                approval: None,
            },
            &Secrets::default(),
        )
        .unwrap();
        let text = std::fs::read_to_string(log.path()).unwrap();
        let line = text.trim_end();
        assert_eq!(line_seal(line), LineSeal::Verified, "{line}");
        let value: Value = serde_json::from_str(line).unwrap();
        assert_eq!(value["id"], "c1");
        assert!(value["seal"].is_string());
        assert_eq!(
            line_seal(&line.replace("\"ok\"", "\"failed\"")),
            LineSeal::Broken
        );
        let unsealed = entry_json(&AuditEntry {
            time: SystemTime::UNIX_EPOCH,
            id: None,
            tool: "fs.rm".into(),
            args: Map::new(),
            outcome: "ok",
            code: None,
            duration: Duration::ZERO,
            approval: None,
        })
        .to_string();
        assert_eq!(line_seal(&unsealed), LineSeal::Missing);
        let forged = sealed(&SealKey::from_bytes([9; 32]), unsealed);
        assert_eq!(line_seal(&forged), LineSeal::Broken);
    }

    #[test]
    fn every_field_of_an_entry_is_masked_where_it_is_written() {
        let temp = tempfile::tempdir().unwrap();
        let log = AuditLog::at(&temp.path().join("audit.jsonl"));
        let key = "sk-live-0123456789abcdef";
        let secrets = Secrets::from_values([key.to_owned()]);
        let args = json!({"path": format!("/w/{key}"), key: 1});
        log.append(
            &AuditEntry {
                time: SystemTime::UNIX_EPOCH,
                id: Some(format!("id-{key}")),
                tool: key.into(),
                args: args.as_object().unwrap().clone(),
                outcome: "failed",
                code: Some(key.into()),
                duration: Duration::ZERO,
                approval: None,
            },
            &secrets,
        )
        .unwrap();
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(!text.contains("sk-live"), "{text}");
        let entry = &log.recent(1).unwrap().entries[0];
        assert_eq!(entry["id"], "id-***");
        assert_eq!(entry["args"]["path"], "/w/***");
        assert_eq!(entry["code"], "***");
    }

    #[test]
    fn damaged_lines_are_skipped_and_counted() {
        let temp = tempfile::tempdir().unwrap();
        let log = AuditLog::at(&temp.path().join("audit.jsonl"));
        let mut text = b"{\"id\":\"a\"}\n\xff\xfe torn\n[1]\n{\"id\":\"b\"}\n{\"id\":".to_vec();
        text.extend(b"\n{\"id\":\"c\"}\n");
        std::fs::write(log.path(), text).unwrap();
        let recent = log.recent(2).unwrap();
        let ids: Vec<_> = recent.entries.iter().map(|e| e["id"].clone()).collect();
        assert_eq!(ids, [json!("b"), json!("c")]);
        assert_eq!(recent.damaged_lines, [2, 3, 5]);
        assert_eq!(recent.damaged_count, 3);
        // Written by hand, so none carries flycode's seal.
        assert_eq!(recent.verified, [false, false]);
        assert_eq!(recent.unverified_lines, [1, 4, 6]);
        assert_eq!(recent.unverified_count, 3);
    }
}
