//! Properties over generated input: parsers never panic, rendering round-trips.

use flycode::protocol::{
    ClassifyOptions, ResultBlock, ToolName, classify_reply, parse_slash, render_command,
};
use proptest::prelude::*;
use serde_json::json;

/// Pieces that make generated replies look like real ones, including the awkward parts.
fn reply_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("```flycode-call\n".to_owned()),
        Just("~~~flycode-call\n".to_owned()),
        Just("````flycode-result\n".to_owned()),
        Just("```\n".to_owned()),
        Just("~~~\n".to_owned()),
        Just("<think>".to_owned()),
        Just("</think>".to_owned()),
        Just("{\"id\":\"c1\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/a\"}}\n".to_owned()),
        Just("{\"id\":\"c1\",\"id\":".to_owned()),
        Just("> ".to_owned()),
        Just("- ".to_owned()),
        Just("\u{00A0}\u{200B}\u{3000}\u{FEFF}".to_owned()),
        Just("\r\n".to_owned()),
        Just("\"\\ud800\"".to_owned()),
        "[\\[\\]{}\":,\\\\a-z0-9 \n`~]{0,12}",
        any::<String>(),
    ]
}

/// A non-empty word with no character that display escaping would change (quotes, spaces and
/// dashes included).
fn word() -> impl Strategy<Value = String> {
    visible("[^\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]{1,12}")
}

fn result_value() -> impl Strategy<Value = String> {
    // Header values are one line without control or invisible characters.
    visible("[^\\p{Cc}\\p{Cf}\u{2028}\u{2029}]{0,30}")
}

/// Strings from `pattern` with no character that display escaping would change.
fn visible(pattern: &'static str) -> impl Strategy<Value = String> {
    pattern.prop_filter("visible characters only", |s: &String| {
        !s.contains(flycode::protocol::display::is_hidden_or_control)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn classifying_never_panics_on_any_text(text in any::<String>(), lenient in any::<bool>()) {
        let _ = classify_reply(&text, ClassifyOptions { lenient, ..Default::default() });
    }

    #[test]
    fn classifying_never_panics_on_reply_like_text(pieces in prop::collection::vec(reply_piece(), 0..24), lenient in any::<bool>()) {
        let _ = classify_reply(&pieces.concat(), ClassifyOptions { lenient, ..Default::default() });
    }

    #[test]
    fn slash_parsing_never_panics(line in any::<String>(), tool in prop::sample::select(ToolName::ALL.to_vec())) {
        let _ = parse_slash(&line);
        let _ = parse_slash(&format!("/{tool} {line}"));
    }

    #[test]
    fn result_parsing_never_panics(content in any::<String>()) {
        let _ = ResultBlock::parse_content(&content);
        let _ = ResultBlock::parse_rendered(&content);
    }

    #[test]
    fn parse_of_render_is_identity(
        id in prop::option::of(visible("[^\\p{Cc}\\p{Cf}\u{2028}\u{2029}]{0,20}").prop_filter("a usable id", |s| !s.trim().is_empty() && s != "(none)" && s.trim() == s)),
        command in result_value(),
        ok in any::<bool>(),
        code in prop::option::of("[a-z_]{1,20}"),
        error in prop::option::of(result_value()),
        fields in prop::collection::vec(("[a-zA-Z][a-zA-Z0-9_-]{0,10}".prop_filter("not reserved", |k| !flycode::protocol::result::RESERVED_KEYS.contains(&k.as_str())), result_value()), 0..4),
        // Paste artefacts are read as whitespace on fence lines; keep them out of bodies here.
        body in prop::option::of(any::<String>().prop_map(|b| b.replace(['\u{A0}', '\u{3000}', '\u{200B}', '\u{FEFF}'], "_"))),
    ) {
        // Each header appears once: a repeated one is malformed by design.
        let mut fields = fields;
        let mut seen = std::collections::HashSet::new();
        fields.retain(|(key, _)| seen.insert(key.clone()));
        let block = ResultBlock { id, command, ok, code, error, hint: None, fields, body };
        let rendered = block.render();
        prop_assert_eq!(ResultBlock::parse_rendered(&rendered), Ok(block.clone()));
        // The rendered block is one result block to a Markdown reader too.
        let parsed = flycode::protocol::parse::parse_reply(&rendered);
        prop_assert_eq!(parsed.blocks.len(), 1);
        prop_assert!(parsed.blocks[0].is_terminated);
        prop_assert_eq!(ResultBlock::parse_content(&parsed.blocks[0].content), Ok(block));
    }

    #[test]
    fn rendered_commands_parse_back(
        path in "/[a-zA-Z0-9 '\"$;*._-]{0,20}",
        // [command] is for display: hidden characters are escaped there, so leave them out.
        query in visible("[^\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]{1,20}"),
        limit in 1u32..10000,
        regex in any::<bool>(),
    ) {
        let args = json!({"path": path, "query": query, "limit": limit, "regex": regex});
        let line = render_command(ToolName::FsSearch, args.as_object().unwrap());
        let call = parse_slash(&line).unwrap();
        prop_assert_eq!(serde_json::Value::Object(call.args), args);
    }

    #[test]
    fn rendered_process_runs_parse_back_with_or_without_args(
        command in word(),
        // Words that look like flycode's own flags (`--cwd`), `--` and plain words.
        args in prop::option::of(prop::collection::vec(
            prop_oneof![
                Just("--".to_owned()),
                Just("--cwd".to_owned()),
                Just("--timeoutMs=5".to_owned()),
                "--[a-z]{1,8}",
                word(),
            ],
            1..6,
        )),
        cwd in prop::option::of("/[a-z ]{0,10}"),
        timeout in prop::option::of(1u32..600_000),
        env in prop::option::of(prop::collection::btree_map("[A-Z]{1,5}", word(), 1..3)),
    ) {
        let mut object = serde_json::Map::new();
        object.insert("command".into(), json!(command));
        if let Some(args) = args {
            object.insert("args".into(), json!(args));
        }
        if let Some(cwd) = cwd {
            object.insert("cwd".into(), json!(cwd));
        }
        if let Some(timeout) = timeout {
            object.insert("timeoutMs".into(), json!(timeout));
        }
        if let Some(env) = env {
            object.insert("env".into(), json!(env));
        }
        let line = render_command(ToolName::ProcessRun, &object);
        let call = parse_slash(&line).unwrap();
        prop_assert_eq!(call.args, object, "{}", line);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn transcript_checking_never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = flycode::validate::report::check_reader(
            std::io::BufReader::new(&bytes[..]),
            "fuzz".into(),
            flycode::validate::ValidateOptions::default(),
        );
    }

    #[test]
    fn transcript_checking_never_panics_on_message_like_lines(
        lines in prop::collection::vec(
            (prop::sample::select(vec!["user", "assistant", "tool", "system"]), prop::collection::vec(reply_piece(), 0..6)),
            0..12,
        ),
        strict in any::<bool>(),
    ) {
        let text: String = lines
            .iter()
            .map(|(role, pieces)| format!("{}\n", serde_json::json!({"role": role, "content": pieces.concat(), "tool_call_id": "c1"})))
            .collect();
        let _ = flycode::validate::report::check_reader(
            std::io::BufReader::new(text.as_bytes()),
            "fuzz".into(),
            flycode::validate::ValidateOptions { lenient: false, strict, ..Default::default() },
        );
    }
}
