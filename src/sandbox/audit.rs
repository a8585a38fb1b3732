//! The audit log: one JSON line per executed call (time, id, tool, arguments with content shown
//! as size and sha256, outcome, code, duration), appended to `audit.jsonl` in the state
//! directory. Each line is written with a single append, so concurrent writers never interleave.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use super::state::state_dir;
use super::write::sha256_hex;

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
}

/// The audit log file.
#[derive(Clone, Debug)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    /// The log in the state directory.
    pub fn default_location() -> Option<AuditLog> {
        state_dir().map(|dir| AuditLog {
            path: dir.join("audit.jsonl"),
        })
    }

    /// A log at `path`.
    pub fn at(path: &Path) -> AuditLog {
        AuditLog {
            path: path.to_owned(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry.
    pub fn append(&self, entry: &AuditEntry) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut line = entry_json(entry).to_string();
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
            let entry = std::str::from_utf8(&line)
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .filter(Value::is_object);
            let Some(entry) = entry else {
                recent.note_damaged(index + 1);
                continue;
            };
            if last.len() == count {
                last.pop_front();
            }
            last.push_back(entry);
        }
        recent.entries = last.into_iter().collect();
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
}

impl RecentEntries {
    /// How many damaged line numbers are kept: a log of garbage costs no more memory than this.
    pub const MAX_LISTED: usize = 20;

    fn note_damaged(&mut self, line: usize) {
        self.damaged_count += 1;
        if self.damaged_lines.len() < Self::MAX_LISTED {
            self.damaged_lines.push(line);
        }
    }
}

fn entry_json(entry: &AuditEntry) -> Value {
    json!({
        "time": crate::protocol::time::format_rfc3339(entry.time),
        "id": entry.id,
        "tool": entry.tool,
        "args": entry.args,
        "outcome": entry.outcome,
        "code": entry.code,
        "durationMs": u64::try_from(entry.duration.as_millis()).unwrap_or(u64::MAX),
    })
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
            log.append(&AuditEntry {
                time: SystemTime::UNIX_EPOCH,
                id: Some(format!("call-{n}")),
                tool: "fs.write".into(),
                args: logged_args(args.as_object().unwrap(), &|text| Cow::Borrowed(text)),
                outcome: "ok",
                code: None,
                duration: Duration::from_millis(3),
            })
            .unwrap();
        }
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(!text.contains("secret") && !text.contains("abc"), "{text}");
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
    }
}
