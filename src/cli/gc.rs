//! `flycode gc`: removes the state directory's run files older than `[state] keep_days`
//! (PROTOCOL.md §10 (Running calls: the state directory)), and says what it removed and how
//! many bytes.

use std::time::{Duration, SystemTime};

use anyhow::Context;

use super::{GcArgs, Outcome, load_config};
use crate::protocol::display::escape_for_terminal;
use crate::sandbox::state::state_dir;
use crate::sandbox::state_gc::{GarbageKind, collect_garbage};
use crate::tools::fs::ls::human_size;

/// Runs `flycode gc`.
pub(crate) fn run(args: &GcArgs) -> anyhow::Result<Outcome> {
    let config = load_config(&crate::config::Flags::default())?;
    let state = state_dir().context("no state directory: set FLYCODE_STATE_DIR or HOME")?;
    let days = config.keep_days;
    let cutoff = SystemTime::now()
        .checked_sub(Duration::from_secs(u64::from(days) * 86_400))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let collected = collect_garbage(&state, cutoff, args.dry_run);
    if !args.dry_run
        && let Some(store) = crate::sandbox::undo::UndoStore::open_default(config.durability)
    {
        let pruned = crate::sandbox::undo::prune(&store, config.undo, SystemTime::now());
        report_pruned(&pruned, config.undo, "flycode gc: ");
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for garbage in &collected.removed {
        println!(
            "{verb} {} ({})",
            escape_for_terminal(&garbage.path.display().to_string()),
            human_size(garbage.bytes)
        );
    }
    for (path, problem) in &collected.failed {
        eprintln!(
            "flycode gc: cannot remove {}: {problem}",
            escape_for_terminal(&path.display().to_string())
        );
    }
    let bytes: u64 = collected.removed.iter().map(|g| g.bytes).sum();
    let kinds: Vec<String> = GarbageKind::ALL
        .iter()
        .filter_map(|kind| {
            let n = collected.removed.iter().filter(|g| g.kind == *kind).count();
            (n > 0).then(|| format!("{n} {}{}", kind.noun(), if n == 1 { "" } else { "s" }))
        })
        .collect();
    let what = if kinds.is_empty() {
        String::new()
    } else {
        format!(": {}", kinds.join(", "))
    };
    let files = collected.removed.len();
    println!(
        "flycode gc: {verb} {files} file{} ({}) older than {days} day{} from {}{what}",
        if files == 1 { "" } else { "s" },
        human_size(bytes),
        if days == 1 { "" } else { "s" },
        escape_for_terminal(&state.display().to_string()),
    );
    Ok(if collected.failed.is_empty() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

/// Says what pruning the undo store removed (PROTOCOL.md §16 (Undo and history), "Retention"),
/// on standard error after `prefix`; nothing when it removed nothing.
pub(crate) fn report_pruned(
    pruned: &crate::sandbox::undo::Pruned,
    limits: crate::sandbox::undo::UndoLimits,
    prefix: &str,
) {
    let (Some(first), Some(last)) = (pruned.changes.first(), pruned.changes.last()) else {
        return;
    };
    let range = if first == last {
        first.clone()
    } else {
        format!("{first}..{last}")
    };
    eprintln!(
        "{prefix}undo store: pruned {} change{} ({range}; {} older than {} days, the rest oldest first to keep under {}), freed {}; {} kept",
        pruned.changes.len(),
        if pruned.changes.len() == 1 { "" } else { "s" },
        pruned.too_old,
        limits.max_age_days,
        human_size(limits.max_bytes),
        human_size(pruned.freed),
        human_size(pruned.kept),
    );
}
