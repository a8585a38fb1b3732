//! Properties of the tag dialect's reader (PROTOCOL.md §15): it never panics on any reply, a tag
//! inside a code fence never runs, a result body never closes its result, and the escaping that
//! guarantees it reverses exactly.

use flycode::protocol::tags::render::{escape_body, unescape_body};
use flycode::protocol::tags::{ResultTag, TagResult, TagVerdict, map_tag, read_tags};
use proptest::prelude::*;

/// Pieces that make generated replies look like real tag replies, awkward parts included.
fn tag_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("<bash_call>".to_owned()),
        Just("<bash_call background=true timeout=5>".to_owned()),
        Just("</bash_call>".to_owned()),
        Just("<builtin>\n".to_owned()),
        Just("</builtin>".to_owned()),
        Just("read_file\npath: a.txt\n".to_owned()),
        Just("smart_edit\npath: a\nold_text:\n".to_owned()),
        Just("<<<\n".to_owned()),
        Just(">>>\n".to_owned()),
        Just("<create_agent name=\"x".to_owned()),
        Just("</create_agent>".to_owned()),
        Just("<return>".to_owned()),
        Just("</return>".to_owned()),
        Just("<bash_call_result exit_code=0>".to_owned()),
        Just("<child_summary>".to_owned()),
        Just("```\n".to_owned()),
        Just("`".to_owned()),
        Just("<think>".to_owned()),
        Just("\r\n".to_owned()),
        "[<>/=\"' a-z_\n`~:]{0,12}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_reader_never_panics_and_every_tag_maps(pieces in prop::collection::vec(tag_piece(), 0..24)) {
        let reply: String = pieces.concat();
        if let TagVerdict::Tags(tags) = read_tags(&reply) {
            for tag in &tags {
                let _ = map_tag(tag, "tag-1", Some("/srv/app"));
            }
        }
    }

    #[test]
    fn tags_inside_a_fence_never_run(inner in prop::collection::vec(tag_piece(), 0..12)) {
        let inner: String = inner.concat().replace("```", "'''").replace("~~~", "'''");
        let reply = format!("Here is an example:\n\n``````\n{inner}\n``````\n");
        prop_assert!(!matches!(read_tags(&reply), TagVerdict::Tags(_) | TagVerdict::Return(_)));
    }

    #[test]
    fn a_body_never_closes_its_result(body in prop::collection::vec(tag_piece(), 0..16)) {
        let body: String = body.concat();
        prop_assert_eq!(unescape_body(&escape_body(&body)), body.clone());
        let rendered = TagResult { tag: ResultTag::BashCall, attributes: vec![], body }.render();
        // The only closing tag is the last line; the only opening tag the first.
        prop_assert_eq!(rendered.matches("</bash_call_result").count(), 1);
        prop_assert!(rendered.ends_with("</bash_call_result>\n"));
        for name in ["<bash_call_result", "<builtin_result", "<child_summary"] {
            let expected = usize::from(name == "<bash_call_result");
            prop_assert_eq!(rendered.matches(name).count(), expected);
        }
    }
}
