//! The retry policy: which answers are worth another try, how long to wait before it
//! (exponential back-off with "equal jitter", or the server's `Retry-After`), and a tiny random
//! source for the jitter. Pure functions; the waiting itself is done by the provider.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest back-off between two attempts, whatever the attempt number.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// The longest `Retry-After` honoured: a server asking for more is waited on this long only.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(120);

/// Whether an HTTP status is worth another try: 408, 429 and every 5xx.
pub fn is_retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..600).contains(&status)
}

/// The wait before retry number `retry` (0 for the first retry).
///
/// With a `Retry-After` the server's wish wins (capped at [`RETRY_AFTER_CAP`]); without one the
/// wait is `(1 + unit) / 2 × min(BACKOFF_CAP, base × 2^retry)` ("equal jitter"), `unit` being a
/// random number in `[0, 1)`: between half and all of the doubled delay, so each retry waits
/// at least as long as the one before could at most (the waits grow, and retries from many
/// clients still spread).
pub fn backoff_delay(
    base: Duration,
    retry: u32,
    retry_after: Option<Duration>,
    unit: f64,
) -> Duration {
    if let Some(wish) = retry_after {
        return wish.min(RETRY_AFTER_CAP);
    }
    let ceiling = base
        .checked_mul(2u32.saturating_pow(retry.min(31)))
        .unwrap_or(BACKOFF_CAP)
        .min(BACKOFF_CAP);
    ceiling.mul_f64((1.0 + unit.clamp(0.0, 1.0)) / 2.0)
}

/// Reads a `Retry-After` header value: a number of seconds (`"1"`, `"1.5"`) or an HTTP date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`), taken relative to `now`; a date in the past means no
/// wait. `None` for anything else.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds.min(RETRY_AFTER_CAP.as_secs_f64())));
    }
    let date = jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(value)
        .ok()?;
    let when = SystemTime::from(date);
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A small xorshift64* generator for jitter: not for anything that needs real randomness.
#[derive(Debug, Clone)]
pub struct Jitter {
    state: u64,
}

impl Jitter {
    /// A generator seeded from `seed` (a zero seed is replaced, as xorshift would stay at zero).
    pub fn from_seed(seed: u64) -> Jitter {
        Jitter {
            state: if seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                seed
            },
        }
    }

    /// A generator seeded from the clock.
    pub fn from_clock() -> Jitter {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Jitter::from_seed(nanos ^ u64::from(std::process::id()).rotate_left(32))
    }

    /// The next number in `[0, 1)`.
    pub fn next_unit(&mut self) -> f64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        let out = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (out >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(500);

    #[test]
    fn retries_429_408_and_5xx_only() {
        for status in [408, 429, 500, 502, 503, 599] {
            assert!(is_retryable_status(status), "{status}");
        }
        for status in [200, 400, 401, 403, 404, 422, 600] {
            assert!(!is_retryable_status(status), "{status}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let halves: Vec<u128> = (0..8)
            .map(|retry| backoff_delay(BASE, retry, None, 0.5).as_millis())
            .collect();
        assert_eq!(halves, [375, 750, 1500, 3000, 6000, 12000, 22500, 22500]);
        assert_eq!(
            backoff_delay(BASE, u32::MAX, None, 0.5),
            BACKOFF_CAP * 3 / 4
        );
        assert!(backoff_delay(BASE, 3, None, 0.999_999) < Duration::from_secs(4));
    }

    #[test]
    fn equal_jitter_keeps_half_the_delay_so_the_waits_grow() {
        assert_eq!(backoff_delay(BASE, 2, None, 0.0), Duration::from_secs(1));
        assert_eq!(backoff_delay(BASE, 2, None, 0.999_999).as_millis(), 1999);
        // The least wait of a retry is the most of the one before.
        for retry in 0..5 {
            assert!(
                backoff_delay(BASE, retry + 1, None, 0.0)
                    >= backoff_delay(BASE, retry, None, 0.999_999)
            );
        }
    }

    #[test]
    fn retry_after_wins_and_is_capped() {
        let one = Some(Duration::from_secs(1));
        assert_eq!(backoff_delay(BASE, 5, one, 0.9), Duration::from_secs(1));
        let long = Some(Duration::from_secs(3600));
        assert_eq!(backoff_delay(BASE, 0, long, 0.9), RETRY_AFTER_CAP);
    }

    #[test]
    fn parses_retry_after_seconds_and_dates() {
        let now = SystemTime::from(
            jiff::fmt::rfc2822::DateTimeParser::new()
                .parse_timestamp("Wed, 21 Oct 2015 07:28:00 GMT")
                .unwrap(),
        );
        assert_eq!(parse_retry_after("1", now), Some(Duration::from_secs(1)));
        assert_eq!(
            parse_retry_after(" 2.5 ", now),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    #[test]
    fn jitter_stays_in_the_unit_interval_and_varies() {
        let mut jitter = Jitter::from_seed(0);
        let draws: Vec<f64> = (0..1000).map(|_| jitter.next_unit()).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let low = draws.iter().filter(|u| **u < 0.5).count();
        assert!((300..700).contains(&low), "{low}");
        let _ = Jitter::from_clock().next_unit();
    }
}
