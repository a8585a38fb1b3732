//! Any text as a result block: reading must never panic, and what reads re-renders the same.
#![no_main]

use flycode::protocol::ResultBlock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ResultBlock::parse_rendered(text);
    if let Ok(block) = ResultBlock::parse_content(text) {
        let rendered = block.render();
        let _ = ResultBlock::parse_rendered(&rendered);
    }
});
