//! Any bytes as a transcript file: reading and checking must never panic or hang.
#![no_main]

use std::io::BufReader;

use flycode::validate::ValidateOptions;
use flycode::validate::report::check_reader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for strict in [false, true] {
        let options = ValidateOptions { lenient: strict, strict, ..Default::default() };
        let _ = check_reader(BufReader::new(data), "fuzz".into(), options);
    }
});
