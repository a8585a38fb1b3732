//! `flycode validate`: transcripts in, findings out, exit 1 when an error remains.

use std::io::Write;

use super::{Outcome, OutputFormat, ValidateArgs};
use crate::validate::format::{Format, render};
use crate::validate::inputs::expand_inputs;
use crate::validate::{ValidateOptions, validate_files};

/// Runs `flycode validate`.
pub(crate) fn run(args: &ValidateArgs) -> anyhow::Result<Outcome> {
    let files = expand_inputs(&args.inputs)?;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let config = super::load_config(&crate::config::Flags {
        tool_set: args.tools.map(Into::into),
        ..crate::config::Flags::default()
    })?;
    let options = ValidateOptions {
        lenient: args.lenient,
        strict: args.strict,
        tools: config.tool_set,
        // Without --dialect: flycode.toml's `dialect = "tags"`, else detected per transcript.
        dialect: args
            .dialect
            .or((config.dialect == crate::protocol::dialect::Dialect::Tags)
                .then_some(config.dialect)),
    };
    let report = validate_files(&files, options, threads)?;
    let format = match args.format {
        OutputFormat::Human => Format::Human,
        OutputFormat::Json => Format::Json,
        OutputFormat::Github => Format::Github,
        OutputFormat::Sarif => Format::Sarif,
    };
    std::io::stdout()
        .lock()
        .write_all(render(&report, format).as_bytes())?;
    Ok(if report.summary().errors > 0 {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}
