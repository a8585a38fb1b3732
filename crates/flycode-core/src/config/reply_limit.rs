//! The reply size limit (PROTOCOL.md §1 (Reading a reply: reply size limit), `max_reply_bytes`): a reply larger than it is refused as
//! `too_large` before it is parsed. Readers stop one byte past the limit, so the memory a reply
//! can take is bounded by the setting whatever the size of the input; judging an accepted reply
//! takes time linear in its size and memory within 8 times it, pathological Markdown included
//! (PROTOCOL.md §1, Reading a reply), which is why the limit bounds the memory of a reply.
//!
//! Owns the check, the bounded read and what a refusal says (to the model in the result block, to
//! the person on the terminal); it does not print or decide exit codes.

use std::fmt;
use std::io::{self, Read};

use crate::protocol::result::INVALID_CALL_ID;
use crate::protocol::{ErrorCode, ResultBlock};

/// The default reply limit: 16 MiB, far above any chat reply, low enough that a pasted log or a
/// runaway model cannot make flycode take gigabytes.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 16 << 20;

/// A reply over the limit, refused before it was parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ReplyTooLarge {
    /// Its size in bytes when known (a file's, the clipboard's); `None` when it is only known to
    /// be larger than the limit (standard input is not read past it).
    pub size: Option<u64>,
    /// The limit, `max_reply_bytes`.
    pub limit: usize,
}

impl fmt::Display for ReplyTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = self.limit as u64;
        match self.size {
            Some(size) => write!(
                f,
                "the reply is {size} bytes ({}), more than the reply limit of {limit} bytes ({}, max_reply_bytes); it was not parsed",
                human_size(size),
                human_size(limit)
            ),
            None => write!(
                f,
                "the reply is more than the reply limit of {limit} bytes ({}, max_reply_bytes); it was not parsed",
                human_size(limit)
            ),
        }
    }
}

impl ReplyTooLarge {
    /// What the model can do: send less in one reply.
    pub fn hint(&self) -> &'static str {
        "send a shorter reply with one call; write large content in parts (fs.write with mode \"append\")"
    }

    /// What the person can do: raise the setting (not in the block: the model cannot).
    pub fn advice(&self) -> String {
        format!(
            "raise max_reply_bytes in flycode.toml (now {}, at most {})",
            self.limit,
            super::range::MAX_REPLY_BYTES.max
        )
    }

    /// The `flycode-result` block a refused reply earns: `[ok] false`, `[code] too_large`. No
    /// call was read, so there is no command, and the id is the one of every answer to a call
    /// whose id could not be read ([`INVALID_CALL_ID`]: not `(none)`, which the seed prompt
    /// tells the model to ignore, while this answer asks it to send a shorter reply).
    pub fn result_block(&self) -> ResultBlock {
        ResultBlock::failure(
            Some(INVALID_CALL_ID.to_owned()),
            "(none)".to_owned(),
            ErrorCode::TooLarge,
            self.to_string(),
            Some(self.hint().to_owned()),
        )
    }
}

/// `Err` when a reply of `size` bytes is over `limit`.
pub fn check_reply_size(size: u64, limit: usize) -> Result<(), ReplyTooLarge> {
    if size > limit as u64 {
        Err(ReplyTooLarge {
            size: Some(size),
            limit,
        })
    } else {
        Ok(())
    }
}

/// Reads a reply from `reader`, at most `limit + 1` bytes: `Ok(Err(..))` when there was more
/// than `limit` (the rest is left unread). `size_hint` (a file's length) sizes the buffer once
/// and, when already over the limit, refuses without reading at all.
pub fn read_reply(
    reader: impl Read,
    limit: usize,
    size_hint: Option<u64>,
) -> io::Result<Result<Vec<u8>, ReplyTooLarge>> {
    if let Some(size) = size_hint
        && let Err(too_large) = check_reply_size(size, limit)
    {
        return Ok(Err(too_large));
    }
    let capacity = size_hint.map_or(8 * 1024, |size| size as usize).min(limit) + 1;
    let mut bytes = Vec::with_capacity(capacity);
    reader.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        // A file that grew after its length was read is reported with what is known.
        return Ok(Err(ReplyTooLarge {
            size: size_hint.filter(|size| *size > limit as u64),
            limit,
        }));
    }
    Ok(Ok(bytes))
}

/// `512 B`, `1.5 KiB`, `16.0 MiB`.
fn human_size(bytes: u64) -> String {
    crate::tools::fs::ls::human_size(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_up_to_the_limit_and_refuses_one_byte_more() {
        let limit = 1024;
        let exact = vec![b'a'; limit];
        assert_eq!(
            read_reply(&exact[..], limit, None).unwrap(),
            Ok(exact.clone())
        );
        let over = vec![b'a'; limit + 1];
        assert_eq!(
            read_reply(&over[..], limit, None).unwrap(),
            Err(ReplyTooLarge { size: None, limit })
        );
        assert_eq!(
            read_reply(&over[..], limit, Some(limit as u64 + 1)).unwrap(),
            Err(ReplyTooLarge {
                size: Some(limit as u64 + 1),
                limit
            })
        );
    }

    #[test]
    fn stops_reading_one_byte_past_the_limit() {
        let mut endless = io::repeat(b'x');
        let refused = read_reply(&mut endless, 4096, None).unwrap();
        assert_eq!(
            refused,
            Err(ReplyTooLarge {
                size: None,
                limit: 4096
            })
        );
    }

    #[test]
    fn a_known_size_over_the_limit_is_refused_without_reading() {
        struct Unreadable;
        impl Read for Unreadable {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("must not be read"))
            }
        }
        let refused = read_reply(Unreadable, 2048, Some(1 << 30)).unwrap();
        assert_eq!(refused.unwrap_err().size, Some(1 << 30));
    }

    #[test]
    fn the_refusal_names_size_limit_and_setting() {
        let error = ReplyTooLarge {
            size: Some(17 << 20),
            limit: DEFAULT_MAX_REPLY_BYTES,
        };
        assert_eq!(
            error.to_string(),
            "the reply is 17825792 bytes (17.0 MiB), more than the reply limit of 16777216 bytes (16.0 MiB, max_reply_bytes); it was not parsed"
        );
        let block = error.result_block().render();
        assert!(
            block.contains(
                "[id] flycode-invalid-call\n[command] (none)\n[ok] false\n[code] too_large\n"
            ),
            "{block}"
        );
        assert!(block.contains("[hint] send a shorter reply"), "{block}");
        assert_eq!(
            error.advice(),
            "raise max_reply_bytes in flycode.toml (now 16777216, at most 1073741824)"
        );
    }
}
