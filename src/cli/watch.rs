//! `flycode watch`: answer replies as they arrive; a start line per call that runs, an entry per
//! answer, a word about a call that arrived without its fence.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use super::progress::{CallStart, PausingApprover, Spinner, paint, start_line};
use super::{Outcome, WatchArgs, approver, hand_off_secrets, open_sandbox};
use crate::protocol::Call;
use crate::protocol::display::escape_for_display;
use crate::protocol::result::INVALID_CALL_ID;
use crate::sandbox::Session;
use crate::sandbox::state::state_dir;
use crate::tools::executor::{Approver, Door, DoorSession};
use crate::tools::secrets::Secrets;
use crate::watch::clipboard::{Clipboard, SystemClipboard, keep_on_clipboard, run_clipboard};
use crate::watch::handler::policy_key;
use crate::watch::inbox::{Inbox, InboxOptions};
use crate::watch::{Answer, Handled, Handler, Notice, ReplayStore};

/// Where replies come from.
enum ReplySource {
    Clipboard(SystemClipboard),
    Inbox(PathBuf),
    Browser(crate::watch::browser::BrowserSource),
}

/// Runs `flycode watch`.
pub(crate) fn run(args: &WatchArgs) -> anyhow::Result<Outcome> {
    // Before anything is read or started (PROTOCOL.md §11 (Security), "No program outlives
    // flycode").
    crate::sandbox::process::guard::guard_this_process();
    let shutdown = Arc::new(AtomicBool::new(false));
    super::signals::install(super::signals::StopDoor::Watch, Some(Arc::clone(&shutdown)))?;
    // Before the hand-off: a key variable that a file trusted now names is handed off too.
    let loaded = super::trust::offer_trust(
        &args.run,
        crate::config::Config::load(&super::config_flags(&args.run)),
    );
    hand_off_secrets(loaded.as_ref().ok())?;
    let (config, sandbox) = open_sandbox(&args.run, loaded)?;
    let state = state_dir().context("no state directory: set FLYCODE_STATE_DIR or HOME")?;
    let (mut source, no_display) = choose_source(args, &state, &config)?;
    // Held until this watcher ends (PROTOCOL.md §12 (Watching), "One watcher per source"); the
    // browser's port is held by its listening socket.
    let _owner = take_source(&source, &state)?;
    let (memory, replay) = load_session(args, &state)?;
    let terminal = WatchTerminal::new();
    let asking = approver(&args.run, super::approve::Asking::Session);
    // The spinner stops while the person is asked.
    let approver: Box<dyn Approver + '_> = Box::new(PausingApprover {
        inner: asking.as_ref(),
        spinner: terminal.spinner.clone(),
        // The browser companion's cards say "waiting for approval" meanwhile.
        asking: match &source {
            ReplySource::Browser(browser) => Some(browser.asking()),
            _ => None,
        },
    });
    let policy_key = policy_key(
        sandbox.roots(),
        &config.policy,
        args.run.yes,
        &config.protected,
    );
    let secrets = config.limits().secrets();
    let on_start = |call: &Call| terminal.started(call, sandbox.roots(), &secrets);
    // The watch process is the session of its background jobs (PROTOCOL.md §10 (Running calls:
    // background jobs)): they end when it does.
    let dialect = super::dialect(args.run.dialect, &config);
    let session = DoorSession::open(
        Door::Watch,
        &config,
        watch_limits(&config, dialect),
        Some(memory),
    )?;
    if let Some(jobs) = session.jobs() {
        jobs.set_announce(Box::new(|notice| eprintln!("flycode: [jobs] {notice}")));
    }
    let mut handler = Handler {
        executor: session.executor(&sandbox, approver.as_ref()),
        replay,
        lenient: args.run.lenient,
        tools: config.tool_set,
        policy_key,
        max_reply_bytes: config.max_reply_bytes,
        on_start: Some(&on_start),
        dialect,
        failed_last: Vec::new(),
    };
    let last_result = watch_source(
        &mut source,
        args,
        &mut handler,
        &shutdown,
        no_display.as_deref(),
        &terminal,
        &state,
    )?;
    drop(handler);
    if let Some(jobs) = session.jobs() {
        jobs.end_session();
    }
    session.save_memory()?;
    if let (ReplySource::Clipboard(clipboard), Some(last)) = (source, last_result) {
        keep_last_result(clipboard, &last);
    }
    eprintln!("flycode: stopped");
    Ok(Outcome::Success)
}

/// The watch's limits. Seed 000's tags include background jobs (`background=true`,
/// `get_job_log`), so in the tag dialect the tool set is at least the extended one, whatever
/// `tools` says (PROTOCOL.md §15 (The tag dialect: doors)); `tools` chooses the flycode
/// dialect's tools.
fn watch_limits(
    config: &crate::config::Config,
    dialect: crate::protocol::dialect::Dialect,
) -> crate::tools::Limits {
    let mut limits = config.limits();
    if dialect == crate::protocol::dialect::Dialect::Tags
        && !limits.tool_set.contains(crate::protocol::ToolName::JobLog)
    {
        limits.tool_set = crate::protocol::ToolSet::Extended;
    }
    limits
}

/// The clipboard, or a folder: `--inbox`, else the inbox in the state directory when there is
/// no clipboard, with the line saying why (printed once the folder is watched).
fn choose_source(
    args: &WatchArgs,
    state: &Path,
    config: &crate::config::Config,
) -> anyhow::Result<(ReplySource, Option<String>)> {
    if let Some(port) = args.browser {
        let source = crate::watch::browser::BrowserSource::start(
            port,
            state,
            config.max_reply_bytes,
            (config.browser_auto_insert, config.browser_auto_submit),
        )?;
        return Ok((ReplySource::Browser(source), None));
    }
    if let Some(dir) = &args.inbox {
        return Ok((ReplySource::Inbox(dir.clone()), None));
    }
    match SystemClipboard::open() {
        Ok(clipboard) => Ok((ReplySource::Clipboard(clipboard), None)),
        Err(why) => {
            // The main job still runs: a folder needs no display.
            let dir = state.join(DEFAULT_INBOX);
            crate::sandbox::host::create_dir_all(&dir).with_context(|| {
                format!("{why}, and the folder {} cannot be created", dir.display())
            })?;
            let line = format!(
                "flycode: {why}, so no clipboard to watch; watching the folder {} instead: save a reply there as NAME.md, its result appears as NAME.result.md (--inbox DIR picks another folder). Ctrl-C stops.",
                dir.display()
            );
            Ok((ReplySource::Inbox(dir), Some(line)))
        }
    }
}

/// Takes `source` for this watcher: a second watcher of one source would run each call twice.
fn take_source(
    source: &ReplySource,
    state: &Path,
) -> anyhow::Result<Option<crate::watch::owner::SourceOwner>> {
    use crate::watch::owner::{WatchedSource, take};
    let display = crate::watch::clipboard::display().unwrap_or_default();
    let watched = match source {
        ReplySource::Clipboard(_) => WatchedSource::Clipboard(&display),
        ReplySource::Inbox(dir) => WatchedSource::Inbox(dir),
        ReplySource::Browser(_) => return Ok(None),
    };
    Ok(Some(take(state, &watched)?))
}

/// The session's approvals and its replay store; a store or session flycode did not seal is
/// not used, and flycode says so (PROTOCOL.md §11 Security).
fn load_session(args: &WatchArgs, state: &Path) -> anyhow::Result<(Session, ReplayStore)> {
    let name = args.session.clone().unwrap_or_else(|| "default".to_owned());
    let session = Session::load(&name).map_err(anyhow::Error::msg)?;
    let replay = ReplayStore::load_from(
        &state.join("watch").join(format!("{name}.json")),
        args.new_session,
    )
    .map_err(anyhow::Error::msg)?;
    for notice in [session.notice(), replay.notice()].into_iter().flatten() {
        eprintln!("flycode: {notice}");
    }
    Ok((session, replay))
}

/// Answers what arrives from `source` until `shutdown`; returns the last result put on the
/// clipboard (clipboard mode).
fn watch_source(
    source: &mut ReplySource,
    args: &WatchArgs,
    handler: &mut Handler<'_>,
    shutdown: &AtomicBool,
    no_display: Option<&str>,
    terminal: &WatchTerminal,
    state: &Path,
) -> anyhow::Result<Option<String>> {
    let interval = Duration::from_millis(args.interval_ms.max(10));
    match source {
        ReplySource::Browser(browser) => {
            eprintln!(
                "flycode: answering the flycode browser extension on http://{}. To pair it, open {} in that browser (the link works once, for 10 minutes). Ctrl-C stops.",
                browser.address(),
                browser.pairing_link()
            );
            browser.run(handler, shutdown, state, &mut |label, handled| {
                terminal.report(Some(label), handled);
            });
            Ok(None)
        }
        ReplySource::Inbox(inbox) => {
            let options = InboxOptions {
                dir: inbox.clone(),
                quiet: Duration::from_millis(args.quiet_ms),
                poll: interval,
                existing: args.existing,
            };
            let watched = Inbox::open(&options)?;
            // Said once the folder is watched: a reply saved after this line is answered.
            match no_display {
                Some(line) => eprintln!("{line}"),
                None => eprintln!(
                    "flycode: watching {} for reply files (*.md, *.txt); results go to NAME.result.md. Ctrl-C stops.",
                    inbox.display()
                ),
            }
            watched.run(handler, shutdown, &mut |path, handled| {
                terminal.report(Some(path), handled);
            });
            Ok(None)
        }
        ReplySource::Clipboard(clipboard) => {
            let mut last_result = None;
            run_clipboard(
                clipboard,
                interval,
                handler,
                shutdown,
                &mut || {
                    eprintln!(
                        "flycode: watching the clipboard. Copy a reply with a flycode-call block; its result replaces it, ready to paste. Ctrl-C stops."
                    );
                },
                &mut |handled| {
                    if let Handled::Answered(answer) = handled {
                        last_result = Some(answer.block.clone());
                    }
                    terminal.report(None, handled);
                },
            );
            Ok(last_result)
        }
    }
}

/// Keeps the last result on the clipboard after watch stops, as `prompt --copy` keeps the
/// prompt (PROTOCOL.md §12 (Watching)): an X11 clipboard empties when its owner exits, and a
/// result not yet pasted would be lost. Only while the clipboard still holds it: a later copy
/// by the person is left alone.
fn keep_last_result(mut clipboard: SystemClipboard, last: &str) {
    if clipboard.read().as_deref() != Some(last) {
        return;
    }
    // Let go first, so the clipboard that holds the result afterwards is the holder's.
    drop(clipboard);
    // The first connection right after letting go can fail (seen under Xvfb): a few more tries,
    // for a second at most. The connection opened is the one the hand-over then reads through.
    let connection = (0..20).find_map(|_| {
        SystemClipboard::open()
            .inspect_err(|_| std::thread::sleep(Duration::from_millis(50)))
            .ok()
    });
    let kept = keep_on_clipboard(last);
    drop(connection);
    match kept {
        Ok(()) => eprintln!("flycode: the last result stays on the clipboard, ready to paste"),
        Err(why) => eprintln!(
            "flycode: the last result could not be kept on the clipboard ({why}): copy it from the chat's answer again if it was not pasted"
        ),
    }
}

/// The folder watched when there is no display, inside the state directory.
pub(crate) const DEFAULT_INBOX: &str = "inbox";

/// The watcher's terminal: a call's start line (with a spinner while a program runs, on a
/// terminal only) and one entry per answer or notice.
struct WatchTerminal {
    color: bool,
    spinner: Spinner,
}

impl WatchTerminal {
    fn new() -> WatchTerminal {
        let is_terminal = std::io::stderr().is_terminal();
        WatchTerminal {
            color: is_terminal && std::env::var_os("NO_COLOR").is_none(),
            spinner: Spinner::new(is_terminal),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        paint(self.color, code, text)
    }

    /// A call starts, as `run` shows it: `● fs.read (README.md)`.
    fn started(&self, call: &Call, roots: &[PathBuf], secrets: &Secrets) {
        let start = CallStart::of(call, roots, secrets);
        eprintln!("{}", start_line(self.color, start.tool, &start.subject));
        if start.runs_program {
            self.spinner.start(&start.subject);
        }
    }

    fn report(&self, path: Option<&Path>, handled: &Handled) {
        match handled {
            Handled::Ignored => {}
            Handled::Noticed(notice) => self.notice(path, notice),
            Handled::Answered(answer) => self.answer(path, answer),
        }
    }

    /// `⚠ saw a call without its ```flycode-call fence (…)` and what to do.
    fn notice(&self, path: Option<&Path>, notice: &Notice) {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "{} saw {}{}",
            self.paint("33", "⚠"),
            notice.seen,
            self.source(path)
        );
        let _ = writeln!(err, "  {}", self.paint("33", &notice.advice));
    }

    /// `  (reply.md)` in inbox mode.
    fn source(&self, path: Option<&Path>) -> String {
        path.map(|p| {
            self.paint(
                "2",
                &format!("  ({})", escape_for_display(&p.display().to_string())),
            )
        })
        .unwrap_or_default()
    }

    /// `● /fs.read /x/README.md` (unless its start line was shown) then `└ ok · 1.2 KiB · 3 ms`
    /// (or `└ failed: outside_roots`), and the notes that apply.
    fn answer(&self, path: Option<&Path>, answer: &Answer) {
        self.spinner.stop();
        let mut err = std::io::stderr().lock();
        let source = self.source(path);
        let size = crate::tools::fs::ls::human_size(answer.body_bytes as u64);
        let ms = answer.duration.as_millis();
        let status = match (&answer.code, answer.replayed) {
            (_, true) => self.paint("33", &format!("replayed · {size}")),
            (None, false) => self.paint(
                "32",
                &match &answer.change {
                    Some(change) => format!("ok · {size} · {ms} ms · {change}"),
                    None => format!("ok · {size} · {ms} ms"),
                },
            ),
            (Some(code), false) => self.paint("31", &format!("failed: {code} · {ms} ms")),
        };
        if answer.announced {
            let _ = writeln!(err, "└ {status}{source}");
        } else {
            let _ = writeln!(
                err,
                "{} {}{}{source}",
                self.paint("36", "●"),
                escape_for_display(&answer.command),
                self.id_of(answer)
            );
            let _ = writeln!(err, "└ {status}");
        }
        for note in self.notes(answer) {
            let _ = writeln!(err, "  {note}");
        }
    }

    /// ` · call c7` for an answer not announced by its start line: the answer's `[id]`, or the
    /// id written in a broken block (PROTOCOL.md §3 (The answer to an invalid reply)).
    fn id_of(&self, answer: &Answer) -> String {
        let shown = match (&answer.id, &answer.legible_id) {
            (Some(id), _) if id != INVALID_CALL_ID => id.clone(),
            (_, Some(written)) => format!("{written} (as written in its broken block)"),
            _ => return String::new(),
        };
        self.paint("2", &format!(" · call {}", escape_for_display(&shown)))
    }

    /// The lines under an answer: a reused id, a near miss, what would allow a refusal, a
    /// result that could not be stored or delivered.
    fn notes(&self, answer: &Answer) -> Vec<String> {
        let mut notes = Vec::new();
        if answer.reused_id {
            notes.push(self.paint(
                "2",
                "note: this id was used before for another call (a new conversation?); it ran as a new call",
            ));
        }
        if let Some(miss) = &answer.near_miss {
            notes.push(self.paint(
                "33",
                &format!("saw {}; it did not run: {}", miss.seen, miss.advice),
            ));
        }
        if let Some(advice) = &answer.advice {
            notes.push(self.paint(
                "33",
                &format!("to allow it: {}", escape_for_display(advice)),
            ));
        }
        if let Some(problem) = &answer.store_error {
            notes.push(self.paint("31", &format!("warning: {problem}")));
        }
        notes
    }
}
