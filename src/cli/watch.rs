//! `flycode watch`: answer replies as they arrive, one terminal line per call.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use super::{Outcome, WatchArgs, approver, hand_off_secrets, open_sandbox};
use crate::protocol::display::escape_for_display;
use crate::sandbox::state::state_dir;
use crate::sandbox::{AuditLog, Session};
use crate::tools::executor::Executor;
use crate::watch::clipboard::{SystemClipboard, run_clipboard};
use crate::watch::handler::policy_key;
use crate::watch::inbox::{Inbox, InboxOptions};
use crate::watch::{Answer, Handler, ReplayStore};

/// Where replies come from.
enum Source {
    Clipboard(SystemClipboard),
    Inbox(PathBuf),
}

/// Runs `flycode watch`.
pub fn run(args: &WatchArgs) -> anyhow::Result<Outcome> {
    // Before the hand-off: a key variable that a file trusted now names is handed off too.
    super::trust::offer_trust(&args.run);
    hand_off_secrets(&args.run.roots, args.run.approve, args.run.tools);
    let (config, sandbox) = open_sandbox(&args.run)?;
    let state = state_dir().context("no state directory: set FLYCODE_STATE_DIR or HOME")?;
    // Without a display, the line saying so (printed once the folder is watched).
    let mut no_display = None;
    let mut source = match &args.inbox {
        Some(dir) => Source::Inbox(dir.clone()),
        None => match SystemClipboard::open() {
            Ok(clipboard) => Source::Clipboard(clipboard),
            Err(why) => {
                // The main job still runs: a folder needs no display.
                let dir = state.join(DEFAULT_INBOX);
                crate::sandbox::host::create_dir_all(&dir).with_context(|| {
                    format!("{why}, and the folder {} cannot be created", dir.display())
                })?;
                no_display = Some(format!(
                    "flycode: {why}, so no clipboard to watch; watching the folder {} instead: save a reply there as NAME.md, its result appears as NAME.result.md (--inbox DIR picks another folder). Ctrl-C stops.",
                    dir.display()
                ));
                Source::Inbox(dir)
            }
        },
    };
    let name = args.session.clone().unwrap_or_else(|| "default".to_owned());
    let session = Session::load(&name).map_err(anyhow::Error::msg)?;
    let replay = ReplayStore::load_from(
        &state.join("watch").join(format!("{name}.json")),
        args.new_session,
    )
    .map_err(anyhow::Error::msg)?;
    // A store or session flycode did not seal is not used (PROTOCOL.md §11 Security).
    for notice in [session.notice(), replay.notice()].into_iter().flatten() {
        eprintln!("flycode: {notice}");
    }
    let session = Mutex::new(session);
    let approver = approver(&args.run);
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&shutdown))
            .context("installing the signal handler")?;
    }
    let policy_key = policy_key(
        sandbox.roots(),
        &config.policy,
        args.run.yes,
        &config.protected,
    );
    let mut handler = Handler {
        executor: Executor::builder(&sandbox, &config.policy, approver.as_ref())
            .session(Some(&session))
            .audit(AuditLog::default_location())
            .limits(config.limits())
            .build(),
        replay,
        lenient: args.run.lenient,
        tools: config.tool_set,
        policy_key,
        max_reply_bytes: config.max_reply_bytes,
    };
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let interval = Duration::from_millis(args.interval_ms.max(10));
    match &mut source {
        Source::Inbox(inbox) => {
            let options = InboxOptions {
                dir: inbox.clone(),
                quiet: Duration::from_millis(args.quiet_ms),
                poll: interval,
                existing: args.existing,
            };
            let watched = Inbox::open(&options)?;
            // Said once the folder is watched: a reply saved after this line is answered.
            match &no_display {
                Some(line) => eprintln!("{line}"),
                None => eprintln!(
                    "flycode: watching {} for reply files (*.md, *.txt); results go to NAME.result.md. Ctrl-C stops.",
                    inbox.display()
                ),
            }
            watched.run(&mut handler, &shutdown, &mut |path, answer| {
                print_answer(Some(path), answer, color);
            });
        }
        Source::Clipboard(clipboard) => {
            run_clipboard(
                clipboard,
                interval,
                &mut handler,
                &shutdown,
                &mut || {
                    eprintln!(
                        "flycode: watching the clipboard. Copy a reply with a flycode-call block; its result replaces it, ready to paste. Ctrl-C stops."
                    );
                },
                &mut |answer| {
                    print_answer(None, answer, color);
                },
            );
        }
    }
    drop(handler);
    session
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .save()
        .map_err(anyhow::Error::msg)?;
    eprintln!("flycode: stopped");
    Ok(Outcome::Success)
}

/// The folder watched when there is no display, inside the state directory.
pub const DEFAULT_INBOX: &str = "inbox";

/// `● /fs.read /x/README.md` then `└ ok · 1.2 KiB · 3 ms` (or `└ failed: outside_roots`).
fn print_answer(path: Option<&Path>, answer: &Answer, color: bool) {
    let paint = |code: &str, text: &str| {
        if color {
            format!("\u{1b}[{code}m{text}\u{1b}[0m")
        } else {
            text.to_owned()
        }
    };
    let mut err = std::io::stderr().lock();
    let source = path
        .map(|p| {
            paint(
                "2",
                &format!("  ({})", escape_for_display(&p.display().to_string())),
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        err,
        "{} {}{source}",
        paint("36", "●"),
        escape_for_display(&answer.command)
    );
    let size = crate::tools::fs::ls::human_size(answer.body_bytes as u64);
    let ms = answer.duration.as_millis();
    let status = match (&answer.code, answer.replayed) {
        (_, true) => paint("33", &format!("replayed · {size}")),
        (None, false) => paint("32", &format!("ok · {size} · {ms} ms")),
        (Some(code), false) => paint("31", &format!("failed: {code} · {ms} ms")),
    };
    let _ = writeln!(err, "└ {status}");
    if answer.reused_id {
        let _ = writeln!(
            err,
            "  {}",
            paint(
                "2",
                "note: this id was used before for another call (a new conversation?); it ran as a new call"
            )
        );
    }
    if let Some(advice) = &answer.advice {
        let _ = writeln!(
            err,
            "  {}",
            paint(
                "33",
                &format!("to allow it: {}", escape_for_display(advice))
            )
        );
    }
    if let Some(problem) = &answer.store_error {
        let _ = writeln!(err, "  {}", paint("31", &format!("warning: {problem}")));
    }
}
