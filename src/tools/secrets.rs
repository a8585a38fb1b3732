//! Masking flycode's secrets in what its tools produce (CONTRACT §12): the value of every
//! variable [`Limits::secret_names`](super::Limits::secret_names) lists is replaced by `***`
//! wherever it appears, before a result reaches the model, a transcript or the audit log.
//!
//! Only values of at least [`MIN_SECRET_LEN`] characters are masked: a short value (`1`, `yes`,
//! a test's `x`) would turn every occurrence of common text into `***` and tell a reader which
//! letters the secret holds. Values are matched literally: a secret a program re-encodes (base64,
//! hex, split across lines) is not recognised.

use std::borrow::Cow;

use serde_json::Value;

use super::{ToolError, ToolOutput};

/// The shortest value masked.
pub const MIN_SECRET_LEN: usize = 8;

/// What a secret's value is replaced by.
pub const MASK: &str = "***";

/// The secret values to mask, longest first (a secret that contains another is masked whole).
/// Its `Debug` shows how many, never the values.
#[derive(Clone, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} values)", self.values.len())
    }
}

impl Secrets {
    /// The values of the secret variables `names` (held since a hand-off, else in this process's
    /// environment: [`crate::sandbox::secret_env::value`]), where set and long enough.
    pub fn from_env<I, S>(names: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Secrets::from_values(
            names
                .into_iter()
                .filter_map(|name| crate::sandbox::secret_env::value(name.as_ref())),
        )
    }

    /// The given values, where long enough.
    pub fn from_values<I: IntoIterator<Item = String>>(values: I) -> Secrets {
        let mut values: Vec<String> = values
            .into_iter()
            .filter(|value| value.chars().count() >= MIN_SECRET_LEN)
            .collect();
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Secrets { values }
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every secret replaced by [`MASK`]; borrowed when it holds none.
    pub fn mask<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut masked = Cow::Borrowed(text);
        for value in &self.values {
            if masked.contains(value.as_str()) {
                masked = Cow::Owned(masked.replace(value.as_str(), MASK));
            }
        }
        masked
    }

    /// Masks `text` in place.
    pub fn mask_string(&self, text: &mut String) {
        if let Cow::Owned(masked) = self.mask(text) {
            *text = masked;
        }
    }

    /// Masks every string in `value`, object keys included.
    pub fn mask_value(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.mask_string(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask_value(item)),
            Value::Object(members) => {
                let leaks_in_keys = members.keys().any(|key| self.mask(key) != key.as_str());
                if leaks_in_keys {
                    let old = std::mem::take(members);
                    for (key, mut member) in old {
                        self.mask_value(&mut member);
                        members.insert(self.mask(&key).into_owned(), member);
                    }
                } else {
                    members
                        .values_mut()
                        .for_each(|member| self.mask_value(member));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Masks a tool's output: body, headers, structured data and hint.
    pub fn mask_output(&self, output: &mut ToolOutput) {
        if let Some(body) = &mut output.body {
            self.mask_string(body);
        }
        for (key, value) in &mut output.fields {
            self.mask_string(key);
            self.mask_string(value);
        }
        self.mask_value(&mut output.data);
        if let Some(hint) = &mut output.continue_hint {
            self.mask_string(hint);
        }
    }

    /// Masks a tool's error: message, hint, advice and the output it carries.
    pub fn mask_error(&self, error: &mut ToolError) {
        self.mask_string(&mut error.message);
        for text in [&mut error.hint, &mut error.advice].into_iter().flatten() {
            self.mask_string(text);
        }
        if let Some(output) = &mut error.output {
            self.mask_output(output);
        }
    }

    /// Masks a call's result, whichever way it went.
    pub fn mask_result(&self, result: &mut Result<ToolOutput, ToolError>) {
        if self.is_empty() {
            return;
        }
        match result {
            Ok(output) => self.mask_output(output),
            Err(error) => self.mask_error(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::ErrorCode;

    fn secrets() -> Secrets {
        Secrets::from_values(["sk-live-0123456789".to_owned(), "short".to_owned()])
    }

    #[test]
    fn a_secret_is_masked_wherever_it_appears_and_a_short_value_never() {
        let masked = secrets().mask("key=sk-live-0123456789; again sk-live-0123456789; short");
        assert_eq!(masked, "key=***; again ***; short");
        assert!(matches!(secrets().mask("nothing here"), Cow::Borrowed(_)));
        assert!(Secrets::from_values(["1234567".to_owned()]).is_empty());
        assert!(!Secrets::from_values(["12345678".to_owned()]).is_empty());
    }

    #[test]
    fn the_longer_of_two_overlapping_secrets_is_masked_whole() {
        let secrets = Secrets::from_values(["abcdefgh".to_owned(), "abcdefgh-and-more".to_owned()]);
        assert_eq!(secrets.mask("[abcdefgh-and-more]"), "[***]");
        assert_eq!(secrets.mask("[abcdefgh]"), "[***]");
    }

    #[test]
    fn every_part_of_an_output_and_an_error_is_masked() {
        let secret = "sk-live-0123456789";
        let output = ToolOutput {
            body: Some(format!("--- stdout ---\n{secret}\n")),
            fields: vec![("meta".to_owned(), format!("{{\"k\":\"{secret}\"}}"))],
            data: json!({"stdout": secret, "nested": [{"deep": format!("x{secret}x")}], secret: 1}),
            continue_hint: Some(format!("read {secret}")),
        };
        let mut result = Ok(output.clone());
        secrets().mask_result(&mut result);
        let masked = result.unwrap();
        let shown = format!("{masked:?}");
        assert!(!shown.contains(secret), "{shown}");
        assert_eq!(masked.body.as_deref(), Some("--- stdout ---\n***\n"));
        assert_eq!(masked.data["nested"][0]["deep"], "x***x");
        assert_eq!(masked.data["***"], 1);

        let mut error = ToolError::new(
            ErrorCode::NonzeroExit,
            format!("echo {secret} exited with status 1"),
            Some(secret),
        )
        .with_advice(secret);
        error.output = Some(Box::new(output));
        let mut result = Err(error);
        secrets().mask_result(&mut result);
        let shown = format!("{:?}", result.unwrap_err());
        assert!(!shown.contains(secret), "{shown}");
        assert!(shown.contains("echo *** exited"), "{shown}");
    }

    #[test]
    fn debug_never_shows_a_value() {
        assert_eq!(format!("{:?}", secrets()), "Secrets(1 values)");
    }
}
