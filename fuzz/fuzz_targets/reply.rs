//! Any bytes as a model reply: classification must never panic or hang, in either mode.
#![no_main]

use flycode::protocol::{ClassifyOptions, classify_reply};
use flycode::protocol::verdict::{Verdict, violation_result};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for lenient in [false, true] {
        let classification = classify_reply(text, ClassifyOptions { lenient, ..Default::default() });
        if let Verdict::Invalid { error, attempt } = &classification.verdict {
            let _ = violation_result(error, attempt).render();
        }
    }
});
