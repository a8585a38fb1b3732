//! Any bytes as a server's event stream: decoding never panics, gives the same events however
//! the bytes are split, and every payload is either assembled or refused with an error.
#![no_main]

use flycode::agent::client::reply::StreamAssembler;
use flycode::agent::client::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, body)) = data.split_first() else { return };
    let mut whole = SseDecoder::new();
    let mut expected = whole.feed(body);
    expected.extend(whole.finish());

    let cut = usize::from(split) % (body.len() + 1);
    let mut pieces = SseDecoder::new();
    let mut events = pieces.feed(&body[..cut]);
    events.extend(pieces.feed(&body[cut..]));
    events.extend(pieces.finish());
    assert_eq!(events, expected);

    let mut assembler = StreamAssembler::new();
    for event in &events {
        if assembler.push(&event.data).is_err() {
            break;
        }
    }
});
