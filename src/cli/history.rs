//! `flycode history`: the changes flycode made, newest first, one line each (PROTOCOL.md §16
//! (Undo and history)): id, time, door, call id, tool, paths, lines added and removed. A call
//! that ran a program is listed too, with the note that what it changed is not recorded.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::json;

use super::{Outcome, load_config};
use crate::protocol::display::escape_for_terminal;
use crate::sandbox::undo::{ChangeRecord, UndoStore, settle_interrupted};

/// `flycode history` arguments.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// How many changes to show, newest first.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub count: usize,
    /// Only changes to this path (or to something inside it).
    #[arg(long, value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// Only the changes of one run or session (the id `history` shows under `run`).
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Print the changes as JSON Lines.
    #[arg(long)]
    pub json: bool,
}

/// Runs `flycode history`.
pub(crate) fn run(args: &HistoryArgs) -> anyhow::Result<Outcome> {
    let config = load_config(&crate::config::Flags::default())?;
    let store = UndoStore::open_default(config.durability)
        .context("no state directory: set FLYCODE_STATE_DIR or HOME")?;
    // What a killed flycode left half done is finished or undone first, so that the records
    // are settled from whole files (PROTOCOL.md §11 Security, "After a crash").
    for line in crate::sandbox::journal::recover_interrupted(None) {
        eprintln!("flycode: {line}");
    }
    for line in settle_interrupted(&store, config.undo) {
        eprintln!("flycode: {line}");
    }
    let (records, notices) = store.records_listed_alone();
    for notice in notices {
        eprintln!("flycode: {}", escape_for_terminal(&notice));
    }
    let path = args.path.as_deref().map(absolute);
    let shown = records
        .iter()
        .rev()
        .filter(|record| args.run.as_ref().is_none_or(|run| &record.session == run))
        .filter(|record| path.as_ref().is_none_or(|path| touches(record, path)))
        .take(args.count);
    let mut any = false;
    for record in shown {
        any = true;
        if args.json {
            println!("{}", as_json(record));
        } else {
            println!("{}", escape_for_terminal(&line(record)));
        }
    }
    if !any && !args.json {
        if records.is_empty() {
            eprintln!(
                "flycode history: no change recorded yet in {}",
                escape_for_terminal(&store.dir().display().to_string())
            );
        } else {
            eprintln!("flycode history: no recorded change matches");
        }
    }
    Ok(Outcome::Success)
}

/// `path` made absolute against the current directory, its links resolved where it exists.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    let joined = std::env::current_dir()
        .map(|dir| dir.join(path))
        .unwrap_or_else(|_| path.to_owned());
    if let Ok(canonical) = crate::sandbox::host::canonicalize(&joined) {
        return canonical;
    }
    // Gone (removed, moved away): its folder's links resolved, the name kept.
    match (joined.parent(), joined.file_name()) {
        (Some(parent), Some(name)) => crate::sandbox::host::canonicalize(parent)
            .map(|parent| parent.join(name))
            .unwrap_or(joined),
        _ => joined,
    }
}

/// Whether the change touched `path`, something inside it, or a folder holding it.
fn touches(record: &ChangeRecord, path: &Path) -> bool {
    record.paths.iter().any(|change| {
        let changed = Path::new(&change.path);
        changed.starts_with(path) || path.starts_with(changed)
    })
}

/// `c-42  2026-11-26T15:20:11Z  exec  20261126T152011Z-4242  call c1  fs.write  /p/a.txt  +12 -3`.
fn line(record: &ChangeRecord) -> String {
    let time = crate::protocol::time::format_rfc3339(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(record.time),
    );
    let call = record
        .call
        .as_deref()
        .map_or_else(|| "-".to_owned(), |call| format!("call {call}"));
    let paths: Vec<&str> = record.paths.iter().map(|p| p.path.as_str()).collect();
    let what = if record.program {
        "(ran a program: what it changed is not recorded and cannot be undone)".to_owned()
    } else {
        format!(
            "{}  +{} -{}",
            paths.join(", "),
            record.added,
            record.removed
        )
    };
    let mut notes = String::new();
    if !record.undoes.is_empty() {
        notes.push_str(&format!("  (undoes {})", record.undoes.join(", ")));
    }
    if !record.complete {
        notes.push_str("  (under way, or interrupted)");
    } else if record.recovered {
        notes.push_str("  (interrupted; completed from what the files held)");
    }
    format!(
        "{}  {time}  {}  run {}  {call}  {}  {what}{notes}",
        record.id, record.door, record.session, record.tool
    )
}

fn as_json(record: &ChangeRecord) -> serde_json::Value {
    let time = crate::protocol::time::format_rfc3339(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(record.time),
    );
    json!({
        "id": record.id,
        "time": time,
        "door": record.door,
        "run": record.session,
        "call": record.call,
        "tool": record.tool,
        "paths": record.paths.iter().map(|p| &p.path).collect::<Vec<_>>(),
        "added": record.added,
        "removed": record.removed,
        "program": record.program,
        "undoes": record.undoes,
        "complete": record.complete,
        "recovered": record.recovered,
    })
}
