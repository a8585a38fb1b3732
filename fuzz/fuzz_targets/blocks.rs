//! Any text as a reply: flycode's block reader finds exactly the fenced code blocks pulldown-cmark
//! (no extensions) finds, with the same spans, info strings and contents.
#![no_main]

use flycode::protocol::blocks::{Fence, fenced_blocks};
use libfuzzer_sys::fuzz_target;
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

fn by_pulldown_cmark(text: &str) -> Vec<Fence> {
    let mut fences = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                open = Some((range.start, info.into_string(), String::new()));
            }
            Event::Text(chunk) => {
                if let Some((_, _, content)) = open.as_mut() {
                    content.push_str(&chunk);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((start, info, content)) = open.take() {
                    fences.push(Fence { span: start..range.end, info, content });
                }
            }
            _ => {}
        }
    }
    fences
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // flycode reads normalized text: no carriage returns.
    let text = text.replace('\r', "\n");
    assert_eq!(fenced_blocks(&text, |_| true), by_pulldown_cmark(&text), "{text:?}");
});
