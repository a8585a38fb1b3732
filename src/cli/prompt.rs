//! `flycode prompt`: the system prompt for a browser chat.

use std::io::Write;

use super::{Language, Outcome, PromptArgs};
use crate::protocol::prompt::{PromptLanguage, chat_prompt};
use crate::sandbox::Roots;

/// Runs `flycode prompt`.
pub fn run(args: &PromptArgs) -> anyhow::Result<Outcome> {
    let roots = Roots::resolve(&args.roots)?;
    let language = match args.lang {
        Language::Zh => PromptLanguage::Zh,
        Language::En => PromptLanguage::En,
    };
    let prompt = chat_prompt(language, &roots.display_strings());
    std::io::stdout().lock().write_all(prompt.as_bytes())?;
    Ok(Outcome::Success)
}
