//! Any bytes as a tag-dialect reply: reading, mapping and answering must never panic or hang.
#![no_main]

use flycode::protocol::tags::{TagResult, TagVerdict, map_tag, read_tags};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match read_tags(text) {
        TagVerdict::Tags(tags) | TagVerdict::TagsThenReturn(tags, _) => {
            for tag in &tags {
                let _ = map_tag(tag, "tag-1", Some("/srv/app"));
                let _ = map_tag(tag, "tag-1", None);
            }
        }
        TagVerdict::Invalid(violation) => {
            let _ = TagResult::violation(&violation).render();
        }
        TagVerdict::Return(_) | TagVerdict::None => {}
    }
});
