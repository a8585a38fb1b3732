//! Rendering a [`Report`]: human text, JSON, GitHub workflow commands, SARIF 2.1.0.

use serde_json::{Value, json};

use super::finding::{Finding, Severity, TRANSCRIPT_RULES};
use super::report::Report;
use crate::protocol::display::escape_for_display;
use crate::protocol::{ErrorCode, WarningCode};

/// An output format of `flycode validate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `path:line: error[code] message`, an excerpt, and a summary line.
    Human,
    /// One JSON object: findings and summary.
    Json,
    /// GitHub Actions workflow commands (`::error file=...`).
    Github,
    /// SARIF 2.1.0.
    Sarif,
}

/// Renders `report` in `format`, ending with a newline.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Human => human(report),
        Format::Json => format!("{}\n", json_report(report)),
        Format::Github => github(report),
        Format::Sarif => format!("{:#}\n", sarif(report)),
    }
}

fn human(report: &Report) -> String {
    let mut out = String::new();
    for finding in report.findings() {
        let place = match finding.column {
            Some(column) => format!("{}:{}:{column}", finding.file, finding.line),
            None => format!("{}:{}", finding.file, finding.line),
        };
        let index = finding
            .index
            .map(|i| format!(" (message {i})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{place}: {}[{}] {}{index}\n",
            finding.severity.as_str(),
            finding.code.as_str(),
            escape_for_display(&finding.message)
        ));
        if let Some(excerpt) = &finding.excerpt {
            out.push_str(&format!("    | {excerpt}\n"));
        }
    }
    // Transcripts checked beyond those named, so that the count below adds up.
    for file in &report.files {
        if let Some(link) = file.subagent_of.as_ref().filter(|link| !link.named) {
            out.push_str(&format!(
                "{}: checked as the transcript of sub-agent {} of {}\n",
                escape_for_display(&file.file),
                link.task_id,
                escape_for_display(&link.parent)
            ));
        }
    }
    out.push_str(&summary_line(report));
    out.push('\n');
    out
}

/// `N transcripts, M messages, E errors, W warnings`, singular where it is one.
fn summary_line(report: &Report) -> String {
    let summary = report.summary();
    let count = |n: usize, word: &str| format!("{n} {word}{}", plural(n));
    format!(
        "{}, {}, {}, {}",
        count(summary.transcripts, "transcript"),
        count(summary.messages, "message"),
        count(summary.errors, "error"),
        count(summary.warnings, "warning")
    )
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// `{"findings", "summary"}`, and `"subagents"` (`{file, parent, task_id, named}` for every
/// sub-agent transcript found through its parent's) when there are any.
fn json_report(report: &Report) -> Value {
    let findings: Vec<&Finding> = report.findings().collect();
    let mut out = json!({"findings": findings, "summary": report.summary()});
    let subagents: Vec<Value> = report
        .files
        .iter()
        .filter_map(|file| {
            let link = file.subagent_of.as_ref()?;
            Some(json!({
                "file": file.file,
                "parent": link.parent,
                "task_id": link.task_id,
                "named": link.named,
            }))
        })
        .collect();
    if !subagents.is_empty() {
        out["subagents"] = Value::Array(subagents);
    }
    out
}

/// Escapes a workflow-command message (`%`, CR, LF).
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow-command property value (also `:` and `,`).
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

fn github(report: &Report) -> String {
    let mut out = String::new();
    for finding in report.findings() {
        let command = match finding.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let column = finding
            .column
            .map(|c| format!(",col={c}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "::{command} file={},line={}{column},title={}::{}\n",
            escape_property(&finding.file),
            finding.line,
            escape_property(finding.code.as_str()),
            escape_data(&escape_for_display(&finding.message))
        ));
    }
    out.push_str(&format!("flycode validate: {}\n", summary_line(report)));
    out
}

/// Every rule a finding can carry, with its default level and help text.
fn rules() -> Vec<(String, Severity, String)> {
    let reply_codes = ErrorCode::ALL
        .iter()
        .take_while(|c| **c != ErrorCode::OutsideRoots)
        .map(|code| {
            (
                code.as_str().to_owned(),
                Severity::Error,
                format!(
                    "An assistant reply is invalid under the flycode protocol: {} See protocol/PROTOCOL.md §3.",
                    code.summary()
                ),
            )
        });
    let tag_codes = [ErrorCode::NestedTags, ErrorCode::ReturnWithOtherTags]
        .iter()
        .map(|code| {
            (
                code.as_str().to_owned(),
                Severity::Error,
                format!(
                    "An assistant reply is invalid under the tag dialect: {} See protocol/PROTOCOL.md §15.",
                    code.summary()
                ),
            )
        });
    let reply_codes = reply_codes.chain(tag_codes);
    let reply_warnings = [
        (
            WarningCode::NormalizedWhitespace.as_str().to_owned(),
            Severity::Warning,
            "Invisible copy-paste characters (no-break or zero-width spaces) were read as whitespace around or in a call block.".to_owned(),
        ),
        (
            WarningCode::CallBlockInNativeReply.as_str().to_owned(),
            Severity::Warning,
            "A native-mode reply's text holds a flycode-call block: native mode runs only the API's tool calls, so the block was not run.".to_owned(),
        ),
    ];
    let transcript_rules = TRANSCRIPT_RULES
        .iter()
        .map(|(code, severity, help)| (code.as_str().to_owned(), *severity, (*help).to_owned()));
    reply_codes
        .chain(reply_warnings)
        .chain(transcript_rules)
        .collect()
}

fn sarif_level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

fn sarif(report: &Report) -> Value {
    let rules = rules();
    let descriptors: Vec<Value> = rules
        .iter()
        .map(|(id, severity, help)| {
            json!({
                "id": id,
                "name": id,
                "shortDescription": {"text": id.replace('_', " ")},
                "fullDescription": {"text": help},
                "help": {"text": help},
                "defaultConfiguration": {"level": sarif_level(*severity)},
            })
        })
        .collect();
    let results: Vec<Value> = report
        .findings()
        .map(|finding| {
            let rule_id = finding.code.as_str();
            // A lenient text_outside_block shares its id with the error rule.
            let rule_index = rules
                .iter()
                .position(|(id, _, _)| id == rule_id)
                .unwrap_or(0);
            let mut region = json!({"startLine": finding.line.max(1)});
            if let Some(column) = finding.column {
                region["startColumn"] = json!(column.max(1));
            }
            let mut result = json!({
                "ruleId": rule_id,
                "ruleIndex": rule_index,
                "level": sarif_level(finding.severity),
                "message": {"text": finding.message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": file_uri(&finding.file)},
                        "region": region,
                    }
                }],
            });
            if let Some(index) = finding.index {
                result["properties"] = json!({"messageIndex": index});
            }
            result
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "flycode",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": descriptors,
            }},
            "results": results,
        }]
    })
}

/// A relative URI reference for a path as given (SARIF wants `/` separators and escapes).
fn file_uri(path: &str) -> String {
    let path = path.replace('\\', "/");
    let mut uri = String::with_capacity(path.len());
    for byte in path.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(byte as char);
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    if path.starts_with('/') {
        format!("file://{uri}")
    } else {
        uri
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_command_values_are_escaped() {
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(escape_data("50%\r\nx"), "50%25%0D%0Ax");
    }

    #[test]
    fn file_uris_are_escaped() {
        assert_eq!(file_uri("logs/a b.jsonl"), "logs/a%20b.jsonl");
        assert_eq!(file_uri("/tmp/x#1.json"), "file:///tmp/x%231.json");
    }

    #[test]
    fn every_rule_id_is_unique() {
        let rules = rules();
        let mut ids: Vec<&str> = rules.iter().map(|(id, _, _)| id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), rules.len());
    }
}
