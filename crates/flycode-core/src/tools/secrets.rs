//! Masking flycode's secrets in what its tools produce (PROTOCOL.md §9 (Secrets and masking)): the value
//! of every variable [`Limits::secret_names`](super::Limits::secret_names) lists, in any of the
//! forms [`crate::sandbox::mask`] looks for, is masked wherever it appears before a result reaches
//! the model, a transcript, an MCP client or the audit log.
//!
//! Tools that show content (a file's bytes, a program's output) mask it themselves, byte for
//! byte and with the bytes around a window in view ([`Secrets::mask_window`]); what is left (ids,
//! commands, messages, hints, headers, structured data) is masked here, whole occurrences as
//! `***`, once more over everything, so a tool that forgets still leaks nothing whole.

pub use crate::sandbox::mask::{Edge, MASK, MASK_BYTE, MIN_SECRET_LEN, MaskingReader, Secrets};

use super::{Limits, ToolError, ToolOutput};

impl Limits {
    /// The values of flycode's secrets, to mask ([`Limits::secret_names`]).
    pub fn secrets(&self) -> Secrets {
        Secrets::from_env(self.secret_names())
    }
}

/// Masking what the tools produce: the tool layer's part of [`Secrets`] (the sandbox's masks
/// text, bytes, JSON values and result blocks).
pub trait MaskTools {
    /// Masks a tool's output: body, headers, structured data and hint.
    fn mask_output(&self, output: &mut ToolOutput);
    /// Masks a tool's error: message, hint, advice and the output it carries.
    fn mask_error(&self, error: &mut ToolError);
    /// Masks a call's result, whichever way it went.
    fn mask_result(&self, result: &mut Result<ToolOutput, ToolError>);
}

impl MaskTools for Secrets {
    fn mask_output(&self, output: &mut ToolOutput) {
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

    fn mask_error(&self, error: &mut ToolError) {
        self.mask_string(&mut error.message);
        for text in [&mut error.hint, &mut error.advice].into_iter().flatten() {
            self.mask_string(text);
        }
        if let Some(output) = &mut error.output {
            self.mask_output(output);
        }
    }

    fn mask_result(&self, result: &mut Result<ToolOutput, ToolError>) {
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
    use std::borrow::Cow;

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
    fn every_part_of_an_output_and_an_error_is_masked() {
        let secret = "sk-live-0123456789";
        let output = ToolOutput {
            body: Some(format!("--- stdout ---\n{secret}\n")),
            fields: vec![("meta".to_owned(), format!("{{\"k\":\"{secret}\"}}"))],
            data: json!({"stdout": secret, "nested": [{"deep": format!("x{secret}x")}], secret: 1}),
            continue_hint: Some(format!("read {secret}")),
            kept: None,
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
