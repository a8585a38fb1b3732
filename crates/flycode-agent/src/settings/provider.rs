//! Which API a run speaks, and the variables that go with it: `--provider`, else `provider` in
//! `[agent]`, else Anthropic when only Anthropic's variables are set (`ANTHROPIC_API_KEY`,
//! `ANTHROPIC_BASE_URL`) and no OpenAI setting is given, else OpenAI (PROTOCOL.md §13 (The API
//! loop: providers)).

use super::{SettingFlags, SettingsError};
use crate::client::ProviderKind;
use crate::config::AgentConfig;

/// Anthropic's API root when none is given.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The provider spelled `name`, or the error naming where it was written.
pub fn parse_provider(name: &str, setting: &'static str) -> Result<ProviderKind, SettingsError> {
    ProviderKind::from_name(name).ok_or_else(|| SettingsError::Invalid {
        setting,
        problem: format!("{name:?} is not a provider: use \"openai\" or \"anthropic\""),
    })
}

/// The main model's provider.
pub fn resolve_provider(
    flags: &SettingFlags,
    file: &AgentConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderKind, SettingsError> {
    if let Some(name) = &flags.provider {
        return parse_provider(name, "--provider");
    }
    if let Some(name) = &file.provider {
        return parse_provider(name, "provider");
    }
    let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    let openai_given = flags.base_url.is_some()
        || file.base_url.is_some()
        || [
            "FLYCODE_BASE_URL",
            "LLM_BASE_URL",
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
        ]
        .into_iter()
        .any(set);
    let anthropic_given = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"]
        .into_iter()
        .any(set);
    Ok(if anthropic_given && !openai_given {
        ProviderKind::Anthropic
    } else {
        ProviderKind::OpenAi
    })
}

/// The variables that may hold the base URL of `provider`, in order.
pub fn base_url_variables(provider: ProviderKind) -> &'static [&'static str] {
    match provider {
        ProviderKind::OpenAi => &["FLYCODE_BASE_URL", "LLM_BASE_URL", "OPENAI_BASE_URL"],
        ProviderKind::Anthropic => &["FLYCODE_BASE_URL", "LLM_BASE_URL", "ANTHROPIC_BASE_URL"],
    }
}

/// The variables that may hold the API key of `provider`, in order.
pub fn key_variables(provider: ProviderKind) -> &'static [&'static str] {
    match provider {
        ProviderKind::OpenAi => &["FLYCODE_API_KEY", "LLM_API_KEY", "OPENAI_API_KEY"],
        ProviderKind::Anthropic => &["FLYCODE_API_KEY", "LLM_API_KEY", "ANTHROPIC_API_KEY"],
    }
}

/// The variables that may name the model of `provider`, in order.
pub fn model_variables(provider: ProviderKind) -> &'static [&'static str] {
    match provider {
        ProviderKind::OpenAi => &["FLYCODE_MODEL", "LLM_MODEL_ID"],
        ProviderKind::Anthropic => &["FLYCODE_MODEL", "LLM_MODEL_ID", "ANTHROPIC_MODEL"],
    }
}

/// The base URL used when none is given: Anthropic has a well-known one; an OpenAI-compatible
/// server must be named (it is as often a local server as OpenAI's).
pub fn default_base_url(provider: ProviderKind) -> Option<&'static str> {
    match provider {
        ProviderKind::OpenAi => None,
        ProviderKind::Anthropic => Some(ANTHROPIC_DEFAULT_BASE_URL),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::settings::resolve_settings;

    fn resolved(
        flags: &SettingFlags,
        vars: &[(&str, &str)],
    ) -> Result<crate::settings::ResolvedSettings, SettingsError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        resolve_settings(flags, &AgentConfig::default(), &|name| {
            vars.get(name).cloned()
        })
    }

    #[test]
    fn anthropic_is_found_from_its_variables_only_when_no_openai_setting_is_given() {
        let flags = SettingFlags {
            model: Some("claude".into()),
            ..SettingFlags::default()
        };
        let found = resolved(&flags, &[("ANTHROPIC_API_KEY", "sk-ant")]).unwrap();
        assert_eq!(found.provider, ProviderKind::Anthropic);
        assert_eq!(found.base_url, ANTHROPIC_DEFAULT_BASE_URL);
        assert_eq!(found.api_key.as_deref(), Some("sk-ant"));
        assert_eq!(found.api_key_source.as_deref(), Some("ANTHROPIC_API_KEY"));
        let both = resolved(
            &flags,
            &[
                ("ANTHROPIC_API_KEY", "sk-ant"),
                ("OPENAI_BASE_URL", "http://o/v1"),
            ],
        )
        .unwrap();
        assert_eq!(both.provider, ProviderKind::OpenAi);
        assert_eq!(both.api_key, None, "the Anthropic key never goes to OpenAI");
        let named = SettingFlags {
            provider: Some("Anthropic".into()),
            base_url: Some("http://127.0.0.1:9".into()),
            ..flags.clone()
        };
        assert_eq!(
            resolved(&named, &[]).unwrap().provider,
            ProviderKind::Anthropic
        );
        let wrong = SettingFlags {
            provider: Some("gemini".into()),
            ..flags
        };
        assert!(matches!(
            resolved(&wrong, &[]),
            Err(SettingsError::Invalid {
                setting: "--provider",
                ..
            })
        ));
    }
}
