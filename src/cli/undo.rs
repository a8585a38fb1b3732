//! `flycode undo`: takes changes back, newest first (PROTOCOL.md §16 (Undo and history)). A path
//! that is no longer as its change left it is a conflict: nothing is touched and the conflicts
//! are shown as diffs, unless `--force`. `--dry-run` shows what would be put back and touches
//! nothing. The undo is itself a change, so it can be undone.

use anyhow::{Context, bail};

use super::{Outcome, RootFlags, RunFlags, open_sandbox};
use crate::protocol::display::escape_for_terminal;
use crate::sandbox::undo::{ChangeRecord, Plan, Recorder, UndoStore, apply, describe, plan};

/// `flycode undo` arguments.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// The change to take back (`c-42`, as `history` shows it); default: the last change.
    #[arg(value_name = "CHANGE", conflicts_with_all = ["last", "call", "run"])]
    pub change: Option<String>,
    /// Take back the last N changes.
    #[arg(long, value_name = "N", conflicts_with_all = ["call", "run"], value_parser = clap::value_parser!(u32).range(1..))]
    pub last: Option<u32>,
    /// Take back the changes of the call with this id.
    #[arg(long, value_name = "ID", conflicts_with = "run")]
    pub call: Option<String>,
    /// Take back every change of one run or session (the id `history` shows under `run`).
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Show what would be put back, as diffs, and touch nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Put the paths back even where they changed since (conflicts).
    #[arg(long)]
    pub force: bool,
    /// Choose among the changes of every project: by default the last changes are those made
    /// inside the roots this undo runs with (`--root`, else the configuration's).
    #[arg(long)]
    pub all: bool,
    /// The allowed roots: undo writes only inside them.
    #[command(flatten)]
    pub roots: RootFlags,
}

/// Runs `flycode undo`.
pub(crate) fn run(args: &UndoArgs) -> anyhow::Result<Outcome> {
    let flags = RunFlags {
        roots: RootFlags {
            roots: args.roots.roots.clone(),
            allow_filesystem_root: args.roots.allow_filesystem_root,
        },
        approve: None,
        yes: false,
        lenient: false,
        tools: None,
        dialect: None,
    };
    let loaded = crate::config::Config::load(&super::config_flags(&flags));
    let (config, sandbox) = open_sandbox(&flags, loaded)?;
    let store = UndoStore::open_default(config.durability)
        .context("no state directory: set FLYCODE_STATE_DIR or HOME")?;
    let (records, notices) = store.records_listed_alone();
    for notice in notices {
        eprintln!("flycode: {}", escape_for_terminal(&notice));
    }
    let chosen = choose(args, &records, sandbox.roots())?;
    let ids: Vec<String> = chosen.iter().map(|r| r.id.clone()).collect();
    let planned = plan(&store, &chosen, config.undo.max_file_bytes);
    for id in &planned.programs {
        println!("{id} ran a program: what it changed is not recorded, and is not undone");
    }
    if planned.steps.is_empty() && !planned.programs.is_empty() {
        eprintln!("flycode undo: nothing was undone: a program's changes cannot be taken back");
        return Ok(Outcome::Failure);
    }
    if !planned.unrestorable.is_empty() {
        for unrestorable in &planned.unrestorable {
            eprintln!(
                "flycode undo: cannot restore {}: {}",
                escape_for_terminal(&unrestorable.path),
                unrestorable.why
            );
        }
        eprintln!("flycode undo: nothing was undone");
        return Ok(Outcome::Failure);
    }
    let blocked = !args.force && planned.conflicts().next().is_some();
    if args.dry_run {
        // What the real undo would do, honestly: with a conflict and no --force, nothing.
        if blocked {
            println!(
                "flycode undo would stop on the conflicts below and touch nothing; with --force it would do this:"
            );
        }
        show(&store, &planned, "would restore", true);
        if blocked {
            for step in planned.conflicts() {
                eprintln!(
                    "conflict: {} changed since {} left it (flycode undo --force puts it back anyway)",
                    escape_for_terminal(&step.path),
                    step.change
                );
            }
        }
        return Ok(Outcome::Success);
    }
    if blocked {
        for step in planned.conflicts() {
            eprintln!(
                "conflict: {} changed since {} left it",
                escape_for_terminal(&step.path),
                step.change
            );
            eprint!("{}", escape_for_terminal(&describe(&store, step)));
        }
        eprintln!("flycode undo: nothing was undone; --force puts the paths back anyway");
        return Ok(Outcome::Failure);
    }
    let recorder = Recorder::new(store, "undo", config.undo);
    show(recorder.store(), &planned, "restoring", false);
    let id = apply(&recorder, &sandbox, &planned, ids.clone())
        .map_err(|error| anyhow::anyhow!("{error}"))
        .context("undo stopped part way (what was restored is recorded as a change)")?;
    match id {
        Some(id) => println!(
            "undid {}: this undo is {id} (flycode undo {id} redoes)",
            ids.join(", ")
        ),
        None => println!("undid {}: nothing needed to change", ids.join(", ")),
    }
    Ok(Outcome::Success)
}

/// Whether `record` changed a path inside one of `roots`.
fn inside_roots(record: &ChangeRecord, roots: &[std::path::PathBuf]) -> bool {
    record.paths.iter().any(|change| {
        let path = std::path::Path::new(&change.path);
        roots.iter().any(|root| path.starts_with(root))
    })
}

/// The changes to take back, newest first. The last changes (`--last`, the default) are those
/// made inside `roots`, unless `--all`: an undo in one project never takes another's back.
fn choose(
    args: &UndoArgs,
    records: &[ChangeRecord],
    roots: &[std::path::PathBuf],
) -> anyhow::Result<Vec<ChangeRecord>> {
    let undoable = records.iter().rev().filter(|r| r.complete);
    let chosen: Vec<ChangeRecord> = if let Some(id) = &args.change {
        undoable.filter(|r| &r.id == id).cloned().collect()
    } else if let Some(call) = &args.call {
        undoable
            .filter(|r| r.call.as_ref() == Some(call))
            .cloned()
            .collect()
    } else if let Some(run) = &args.run {
        undoable.filter(|r| &r.session == run).cloned().collect()
    } else {
        undoable
            .filter(|r| !r.program && (args.all || inside_roots(r, roots)))
            .take(usize::try_from(args.last.unwrap_or(1)).unwrap_or(usize::MAX))
            .cloned()
            .collect()
    };
    if chosen.is_empty() {
        let what = match (&args.change, &args.call, &args.run) {
            (Some(id), _, _) => format!("no change {id} that can be undone"),
            (_, Some(call), _) => format!("no change made by call {call}"),
            (_, _, Some(run)) => format!("no change made by run {run}"),
            _ if args.all => "no change recorded yet".to_owned(),
            _ => format!(
                "no change recorded inside {} yet (--all chooses among every project's)",
                roots
                    .iter()
                    .map(|root| root.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        bail!("{what} (flycode history lists them)");
    }
    Ok(chosen)
}

/// Each path the undo changes, with its diff where asked.
fn show(store: &UndoStore, planned: &Plan, verb: &str, diff: bool) {
    for step in planned.steps.iter().filter(|s| s.changes_anything()) {
        println!(
            "{verb} {} ({}, {} -> {})",
            escape_for_terminal(&step.path),
            step.change,
            step.now.noun(),
            step.restore.noun()
        );
        if diff {
            print!("{}", escape_for_terminal(&describe(store, step)));
        }
    }
}
