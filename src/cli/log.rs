//! `flycode log`: the most recent audit-log entries. A damaged line of the log is skipped and
//! named on standard error; the good entries are still shown and the exit status stays 0
//! (PROTOCOL.md §10, Audit log).

use std::io::Write;

use super::{LogArgs, Outcome};
use crate::sandbox::{AuditLog, RecentEntries};

/// Runs `flycode log`.
pub(crate) fn run(args: &LogArgs) -> anyhow::Result<Outcome> {
    let log = AuditLog::default_location()
        .ok_or_else(|| anyhow::anyhow!("no state directory: set FLYCODE_STATE_DIR or HOME"))?;
    if args.count == 0 {
        // Asked for no entries: nothing at all, not even "no calls logged yet".
        return Ok(Outcome::Success);
    }
    let recent = log.recent(args.count)?;
    if recent.damaged_count > 0 {
        eprintln!("{}", damaged_note(&recent, &log));
    }
    if recent.unverified_count > 0 {
        eprintln!("{}", unverified_note(&recent, &log));
    }
    let mut stdout = std::io::stdout().lock();
    if recent.entries.is_empty() && !args.json {
        writeln!(stdout, "no calls logged yet in {}", log.path().display())?;
    }
    for (entry, verified) in recent.entries.iter().zip(&recent.verified) {
        if args.json {
            writeln!(stdout, "{entry}")?;
            continue;
        }
        let text = |key: &str| entry[key].as_str().unwrap_or("-").to_owned();
        let code = entry["code"]
            .as_str()
            .map(|c| format!(" {c}"))
            .unwrap_or_default();
        let mark = if *verified { "" } else { "  (unverified)" };
        // Who let it run or refused it (PROTOCOL.md §10 (Running calls), "Audit log").
        let by = entry["approval"]
            .as_str()
            .map(|by| format!(" ({by})"))
            .unwrap_or_default();
        let line = format!(
            "{}  {}  {}  {}{code}{by}  {}ms  {}{mark}",
            text("time"),
            text("id"),
            text("tool"),
            text("outcome"),
            entry["durationMs"],
            entry["args"]
        );
        writeln!(
            stdout,
            "{}",
            crate::protocol::display::escape_for_display(&line)
        )?;
    }
    Ok(Outcome::Success)
}

/// `flycode log: 2 lines of /s/audit.jsonl carry no valid seal (...): 4, 9; ...`.
fn unverified_note(recent: &RecentEntries, log: &AuditLog) -> String {
    let mut numbers: Vec<String> = recent
        .unverified_lines
        .iter()
        .map(ToString::to_string)
        .collect();
    let unlisted = recent.unverified_count - recent.unverified_lines.len();
    if unlisted > 0 {
        numbers.push(format!("and {unlisted} more"));
    }
    let (lines, carry) = if recent.unverified_count == 1 {
        ("line", "carries")
    } else {
        ("lines", "carry")
    };
    format!(
        "flycode log: {} {lines} of {} {carry} no valid seal (changed, written by something other than flycode, or by a flycode before seals): {}; they are shown marked (unverified)",
        recent.unverified_count,
        crate::protocol::display::escape_for_display(&log.path().display().to_string()),
        numbers.join(", ")
    )
}

/// `flycode log: skipped 2 damaged lines of /s/audit.jsonl (not a JSON object each): 4, 9`.
fn damaged_note(recent: &RecentEntries, log: &AuditLog) -> String {
    let mut numbers: Vec<String> = recent
        .damaged_lines
        .iter()
        .map(ToString::to_string)
        .collect();
    let unlisted = recent.damaged_count - recent.damaged_lines.len();
    if unlisted > 0 {
        numbers.push(format!("and {unlisted} more"));
    }
    let lines = if recent.damaged_count == 1 {
        "line"
    } else {
        "lines"
    };
    format!(
        "flycode log: skipped {} damaged {lines} of {} (not a JSON object each): {}; the other entries are shown",
        recent.damaged_count,
        crate::protocol::display::escape_for_display(&log.path().display().to_string()),
        numbers.join(", ")
    )
}
