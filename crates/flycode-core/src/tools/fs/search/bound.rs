//! `mtimeFrom` / `mtimeTo` bounds: an RFC 3339 date (`2026-01-31`) or date-time
//! (`2026-01-31T12:00:00Z`, `2026-01-31 12:00:00.5+02:00`) turned into a [`SystemTime`].
//!
//! The shape is checked here, strictly, as the schema's pattern states it; calendar validity
//! (month 13, February 30, hour 24) is left to `jiff`. A date alone means the whole day in UTC:
//! its first instant as a lower bound, its last nanosecond as an upper bound, so that
//! `mtimeTo: "2026-01-31"` includes files modified during that day.

use std::time::SystemTime;

use jiff::Timestamp;

use crate::protocol::ErrorCode;

/// A bound that is not an RFC 3339 date or date-time: a sentence for the model, naming the text
/// and the accepted forms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not an RFC 3339 date or date-time ({why}); use e.g. \"2026-01-31\" or \"2026-01-31T12:00:00Z\""
)]
pub struct BoundError {
    /// The bound as written.
    pub text: String,
    /// What is wrong with it.
    pub why: String,
}

impl BoundError {
    /// The protocol's code for it: the model wrote a wrong argument.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::InvalidArgs
    }
}

/// Parses an RFC 3339 date or date-time into an instant; `is_end` picks the end of the day for a
/// date alone. The error is a sentence for the model, naming the text and the accepted forms.
pub fn parse_rfc3339_bound(text: &str, is_end: bool) -> Result<SystemTime, BoundError> {
    let wrong = |why: &str| BoundError {
        text: text.to_owned(),
        why: why.to_owned(),
    };
    let bytes = text.as_bytes();
    if bytes.len() < 10 || !is_date(&bytes[..10]) {
        return Err(wrong("expected YYYY-MM-DD"));
    }
    let full = if bytes.len() == 10 {
        let time = if is_end {
            "23:59:59.999999999"
        } else {
            "00:00:00"
        };
        format!("{text}T{time}Z")
    } else {
        check_time(&bytes[10..]).map_err(wrong)?;
        text.to_owned()
    };
    let timestamp: Timestamp = full.parse().map_err(|e| wrong(&format!("{e}")))?;
    Ok(SystemTime::from(timestamp))
}

/// `YYYY-MM-DD` by shape (digits and dashes).
fn is_date(bytes: &[u8]) -> bool {
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// The part after the date: `[Tt ]HH:MM:SS(.fraction)?(Z|z|±HH:MM)`, by shape.
fn check_time(rest: &[u8]) -> Result<(), &'static str> {
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    let hh_mm = |s: &[u8]| s.len() == 5 && digits(&s[..2]) && s[2] == b':' && digits(&s[3..]);
    let (sep, rest) = rest.split_first().ok_or("missing time")?;
    if !matches!(sep, b'T' | b't' | b' ') {
        return Err("expected T between the date and the time");
    }
    if rest.len() < 8 || !hh_mm(&rest[..5]) || rest[5] != b':' || !digits(&rest[6..8]) {
        return Err("expected HH:MM:SS after the date");
    }
    let mut rest = &rest[8..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let len = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 {
            return Err("expected digits after the decimal point");
        }
        rest = &fraction[len..];
    }
    match rest {
        b"Z" | b"z" => Ok(()),
        [b'+' | b'-', offset @ ..] if hh_mm(offset) => {
            if &offset[..2] > b"23".as_slice() || &offset[3..] > b"59".as_slice() {
                return Err("the offset must lie between -23:59 and +23:59");
            }
            Ok(())
        }
        [] => Err("a date-time needs Z or an offset such as +02:00"),
        _ => Err("expected Z or an offset such as +02:00 after the time"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::parse_rfc3339_bound;

    fn secs(text: &str, is_end: bool) -> Duration {
        parse_rfc3339_bound(text, is_end)
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
    }

    #[test]
    fn date_alone_is_start_of_day_utc() {
        assert_eq!(secs("1970-01-02", false), Duration::from_secs(86_400));
        assert_eq!(
            secs("2026-01-31", false),
            Duration::from_secs(1_769_817_600)
        );
    }

    #[test]
    fn date_alone_as_end_is_last_nanosecond_of_day() {
        assert_eq!(secs("1970-01-01", true), Duration::new(86_399, 999_999_999));
    }

    #[test]
    fn date_time_with_z_and_offsets() {
        assert_eq!(
            secs("2026-01-31T00:00:00Z", false),
            secs("2026-01-31", false)
        );
        assert_eq!(
            secs("2026-01-31t00:00:00z", true),
            secs("2026-01-31", false)
        );
        assert_eq!(
            secs("2026-01-31T02:00:00+02:00", false),
            secs("2026-01-31", false)
        );
        assert_eq!(
            secs("2026-01-30 19:30:00-04:30", false),
            secs("2026-01-31", false)
        );
    }

    #[test]
    fn date_time_keeps_fractional_seconds() {
        assert_eq!(
            secs("1970-01-01T00:00:01.25Z", false),
            Duration::from_millis(1250)
        );
    }

    #[test]
    fn dates_before_the_epoch_parse() {
        let t = parse_rfc3339_bound("1969-12-31", false).unwrap();
        assert_eq!(
            UNIX_EPOCH.duration_since(t).unwrap(),
            Duration::from_secs(86_400)
        );
    }

    #[test]
    fn rejects_wrong_shapes() {
        for text in [
            "",
            "2026",
            "2026-1-31",
            "2026/01/31",
            "31-01-2026",
            "2026-01-31T",
            "2026-01-31T12:00Z",
            "2026-01-31T12:00:00",
            "2026-01-31T12:00:00.Z",
            "2026-01-31T12:00:00+0200",
            "2026-01-31T12:00:00+02",
            "2026-01-31X12:00:00Z",
            "2026-01-31T12:00:00Z[UTC]",
            " 2026-01-31",
            "2026-01-31 ",
            "２０２６-01-31",
        ] {
            let err = parse_rfc3339_bound(text, false).unwrap_err();
            assert!(err.to_string().contains("RFC 3339"), "{text:?}: {err}");
        }
    }

    #[test]
    fn rejects_impossible_calendar_values() {
        for text in [
            "2026-02-30",
            "2026-13-01",
            "2026-00-10",
            "2026-01-31T24:00:00Z",
            "2026-01-31T12:60:00Z",
            "2026-01-31T12:00:00+25:00",
        ] {
            assert!(parse_rfc3339_bound(text, false).is_err(), "{text:?}");
        }
    }
}
