//! `flycode prompt`: the system prompt for a browser chat, printed or put on the clipboard.

use std::io::{Read, Write};

use anyhow::Context;

use super::{Language, Outcome, PromptArgs, load_roots};
use crate::agent::tags_prompt::render_tags_prompt;
use crate::protocol::dialect::Dialect;
use crate::protocol::prompt::{PromptLanguage, chat_prompt_for};
use crate::sandbox::state::{state_dir, write_atomically};
use crate::watch::clipboard::{SystemClipboard, keep_on_clipboard};

/// Runs `flycode prompt`.
pub(crate) fn run(args: &PromptArgs) -> anyhow::Result<Outcome> {
    let (config, roots) = load_roots(&args.roots, None, args.tools)?;
    let lang = args
        .lang
        .unwrap_or_else(|| Language::from_locale(&|name| std::env::var(name).ok()));
    let language = match lang {
        Language::Zh => PromptLanguage::Zh,
        Language::En => PromptLanguage::En,
    };
    let prompt = match args.dialect.unwrap_or_default() {
        Dialect::Flycode => chat_prompt_for(language, config.tool_set, &roots.display_strings()),
        Dialect::Tags => render_tags_prompt(language, roots.paths(), &config.limits().places),
    };
    if !args.copy {
        std::io::stdout().lock().write_all(prompt.as_bytes())?;
        return Ok(Outcome::Success);
    }
    let size = crate::tools::fs::ls::human_size(prompt.len() as u64);
    match keep_on_clipboard(&prompt) {
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

/// Runs `flycode hold-clipboard`: reads the text on standard input, owns the clipboard until
/// another program replaces it, then exits.
pub(crate) fn hold_clipboard() -> anyhow::Result<Outcome> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("reading the text to hold")?;
    SystemClipboard::open()?.hold_until_replaced(&text)?;
    Ok(Outcome::Success)
}
