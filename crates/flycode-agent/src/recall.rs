//! `memory.query`'s condenser in `flycode run` (PROTOCOL.md §9 (memory.query)): the light model
//! (`LIGHT_LLM_*` / `[agent.light]`, the main model when none is configured) turns the windows
//! the ranking found into one summary. The current conversation's latest messages come from the
//! run's own transcript, which the loop rewrites after every reply and result, so the condenser
//! needs nothing from the loop itself; the same transcript's name keeps the run from finding
//! itself among the saved sessions.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use super::client::{ApiKey, ChatRequest, ClientSettings, Provider};
use super::message::Message;
use super::settings::ResolvedSettings;
use flycode_core::tools::memory::Condenser;
use flycode_core::tools::memory::corpus::conversation;

/// The light model as a [`Condenser`], for one run.
pub struct LightCondenser<'a> {
    client: ClientSettings,
    model: String,
    /// `[agent] max_reply_tokens`: a condensation is bounded like any reply.
    max_tokens: u32,
    transcripts: Vec<PathBuf>,
    cancel: &'a AtomicBool,
    /// Made on the first request, kept for the next ones.
    provider: Mutex<Option<Box<dyn Provider>>>,
}

impl<'a> LightCondenser<'a> {
    /// The condenser of a run with `settings`, recorded in `transcripts`.
    pub fn new(
        settings: &ResolvedSettings,
        max_reply_bytes: usize,
        transcripts: &[PathBuf],
        cancel: &'a AtomicBool,
    ) -> LightCondenser<'a> {
        let (provider, base_url, model, api_key) = match &settings.light {
            Some(light) => (
                light.provider,
                light.base_url.clone(),
                light.model.clone(),
                light.api_key.clone(),
            ),
            None => (
                settings.provider,
                settings.base_url.clone(),
                settings.model.clone(),
                settings.api_key.clone(),
            ),
        };
        let first_byte_timeout = settings
            .bounds
            .first_byte_timeout(&base_url, settings.read_timeout);
        LightCondenser {
            client: ClientSettings {
                provider,
                first_byte_timeout,
                turn_timeout: Some(settings.bounds.turn_timeout),
                base_url,
                api_key: api_key.map(ApiKey::new),
                connect_timeout: settings.connect_timeout,
                read_timeout: settings.read_timeout,
                max_retries: settings.max_retries,
                retry_base: settings.retry_base,
                max_reply_bytes,
            },
            model,
            max_tokens: settings.bounds.max_reply_tokens,
            transcripts: transcripts.to_vec(),
            cancel,
            provider: Mutex::new(None),
        }
    }
}

impl Condenser for LightCondenser<'_> {
    fn recent(&self, count: usize) -> Vec<String> {
        let Some(text) = self
            .transcripts
            .iter()
            .find_map(|path| crate::sandbox::host::read_to_string(path).ok())
        else {
            return Vec::new();
        };
        let messages = conversation(&text);
        let skip = messages.len().saturating_sub(count);
        messages
            .into_iter()
            .skip(skip)
            .map(|m| format!("{}: {}", m.role, m.text))
            .collect()
    }

    fn condense(&self, instructions: &str, material: &str) -> Result<String, String> {
        let mut slot = self
            .provider
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            let provider = crate::client::connect(&self.client).map_err(|e| e.to_string())?;
            *slot = Some(provider);
        }
        let Some(provider) = slot.as_mut() else {
            return Err("no model client".to_owned());
        };
        let messages = [Message::system(instructions), Message::user(material)];
        let request = ChatRequest {
            model: &self.model,
            messages: &messages,
            tools: &[],
            stream: false,
            max_tokens: self.max_tokens,
        };
        let completion = provider
            .complete(&request, &mut |_| {}, self.cancel)
            .map_err(|e| e.to_string())?;
        let text = flycode_core::tools::memory::corpus::without_think(&completion.content);
        if text.trim().is_empty() {
            return Err("the light model's reply was empty".to_owned());
        }
        Ok(text.trim().to_owned())
    }

    fn own_stems(&self) -> Vec<String> {
        self.transcripts
            .iter()
            .filter_map(|path| path.file_stem())
            .map(|stem| stem.to_string_lossy().into_owned())
            .collect()
    }
}
