//! Any text as a slash command: parsing must never panic, and a parsed call renders.
#![no_main]

use flycode::protocol::{parse_slash, render_command};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    if let Ok(call) = parse_slash(line) {
        let _ = render_command(call.tool, &call.args);
    }
});
