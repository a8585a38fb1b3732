//! `flycode log`: the most recent audit-log entries.

use std::io::Write;

use super::{LogArgs, Outcome};
use crate::sandbox::AuditLog;

/// Runs `flycode log`.
pub fn run(args: &LogArgs) -> anyhow::Result<Outcome> {
    let log = AuditLog::default_location()
        .ok_or_else(|| anyhow::anyhow!("no state directory: set FLYCODE_STATE_DIR or HOME"))?;
    if args.count == 0 {
        // Asked for no entries: nothing at all, not even "no calls logged yet".
        return Ok(Outcome::Success);
    }
    let entries = log.recent(args.count)?;
    let mut stdout = std::io::stdout().lock();
    if entries.is_empty() && !args.json {
        writeln!(stdout, "no calls logged yet in {}", log.path().display())?;
    }
    for entry in entries {
        if args.json {
            writeln!(stdout, "{entry}")?;
            continue;
        }
        let text = |key: &str| entry[key].as_str().unwrap_or("-").to_owned();
        let code = entry["code"]
            .as_str()
            .map(|c| format!(" {c}"))
            .unwrap_or_default();
        let line = format!(
            "{}  {}  {}  {}{code}  {}ms  {}",
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
