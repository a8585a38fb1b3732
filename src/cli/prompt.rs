//! `flycode prompt`: the system prompt for a browser chat, printed or put on the clipboard.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{Language, Outcome, PromptArgs, load_roots};
use crate::protocol::prompt::{PromptLanguage, chat_prompt_for};
use crate::sandbox::state::{state_dir, write_atomically};
use crate::watch::clipboard::{Clipboard, ClipboardUnavailable, SystemClipboard, display};

/// The hidden command that keeps the prompt on an X11 clipboard after `prompt --copy` exits.
pub const HOLD_CLIPBOARD_COMMAND: &str = "hold-clipboard";

/// Runs `flycode prompt`.
pub fn run(args: &PromptArgs) -> anyhow::Result<Outcome> {
    let (config, roots) = load_roots(&args.roots, None, args.tools)?;
    let lang = args
        .lang
        .unwrap_or_else(|| Language::from_locale(&|name| std::env::var(name).ok()));
    let language = match lang {
        Language::Zh => PromptLanguage::Zh,
        Language::En => PromptLanguage::En,
    };
    let prompt = chat_prompt_for(language, config.tool_set, &roots.display_strings());
    if !args.copy {
        std::io::stdout().lock().write_all(prompt.as_bytes())?;
        return Ok(Outcome::Success);
    }
    let size = crate::tools::fs::ls::human_size(prompt.len() as u64);
    match copy_to_clipboard(&prompt) {
        Ok(()) => eprintln!(
            "flycode: the prompt ({size}) is on the clipboard: paste it into your chat as the first message"
        ),
        Err(why) => {
            // The set-up line goes on: the prompt waits in a file instead.
            let file = state_dir()
                .context("no state directory: set FLYCODE_STATE_DIR or HOME")?
                .join("prompt.md");
            write_atomically(&file, prompt.as_bytes())
                .with_context(|| format!("{why}, and {} cannot be written", file.display()))?;
            eprintln!(
                "flycode: {why}, so the prompt is not on the clipboard; it is in {} ({size}): open it and paste it into your chat as the first message",
                file.display()
            );
        }
    }
    Ok(Outcome::Success)
}

/// Puts `text` on the clipboard so that it stays there after flycode exits. An X11 clipboard
/// lives only as long as the program that owns it, so a detached `flycode hold-clipboard` keeps
/// serving it (as xclip does) until another program copies something.
fn copy_to_clipboard(text: &str) -> Result<(), ClipboardUnavailable> {
    let display = display()?;
    if !cfg!(all(unix, not(target_os = "macos"))) {
        return SystemClipboard::open()?.write(text).map_err(|error| {
            ClipboardUnavailable::Unreachable {
                display,
                reason: error.reason,
            }
        });
    }
    // Fail early, with the real cause, where the display cannot be reached.
    let mut clipboard = SystemClipboard::open()?;
    let unreachable = |reason: String| ClipboardUnavailable::Unreachable {
        display: display.clone(),
        reason,
    };
    let mut holder = crate::sandbox::host::spawn_detached_self(HOLD_CLIPBOARD_COMMAND)
        .map_err(|e| unreachable(e.to_string()))?;
    if let Some(mut input) = holder.stdin.take() {
        input
            .write_all(text.as_bytes())
            .map_err(|e| unreachable(e.to_string()))?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if clipboard.read().as_deref() == Some(text) {
            return Ok(());
        }
        if let Ok(Some(status)) = holder.try_wait() {
            return Err(unreachable(format!(
                "the process keeping the prompt on the clipboard ended ({status})"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = holder.kill();
    Err(unreachable(
        "the prompt did not appear on the clipboard within 10 s".to_owned(),
    ))
}

/// Runs `flycode hold-clipboard`: reads the text on standard input, owns the clipboard until
/// another program replaces it, then exits.
pub fn hold_clipboard() -> anyhow::Result<Outcome> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("reading the text to hold")?;
    SystemClipboard::open()?.hold_until_replaced(&text)?;
    Ok(Outcome::Success)
}
