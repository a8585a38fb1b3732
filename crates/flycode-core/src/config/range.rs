//! The ranges numeric settings must fall in, shared by `flycode.toml` and the flags that override
//! it: a value outside its range is an error naming the setting and the range, never quietly
//! raised or lowered into it.

use std::fmt;

use serde::{Deserialize, Deserializer, de::Error as _};

/// The values a numeric setting accepts, and what it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettingRange {
    /// The key in `flycode.toml`, e.g. `output_cap`.
    pub key: &'static str,
    /// The flag that overrides it, if one does, e.g. `--max-turns`.
    pub flag: Option<&'static str>,
    /// The smallest value accepted.
    pub min: u64,
    /// The largest value accepted.
    pub max: u64,
    /// What the number counts, e.g. "bytes of a result body".
    pub unit: &'static str,
}

impl SettingRange {
    /// Whether `value` is accepted.
    pub fn contains(&self, value: i128) -> bool {
        (i128::from(self.min)..=i128::from(self.max)).contains(&value)
    }

    /// `"{written} is out of range: allowed {self}"`, where `written` is the setting as the user
    /// wrote it (`output_cap = 10`, `--max-turns 0`).
    pub fn out_of_range(&self, written: &str) -> String {
        format!("{written} is out of range: allowed {self}")
    }
}

impl fmt::Display for SettingRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={} ({})", self.min, self.max, self.unit)
    }
}

/// `output_cap`: what a result body may hold. Below 1 KiB an error message with its hint no longer
/// fits; above 16 MiB a result is no longer something to paste into a chat.
pub const OUTPUT_CAP: SettingRange = SettingRange {
    key: "output_cap",
    flag: None,
    min: 1024,
    max: 16 * 1024 * 1024,
    unit: "bytes of a result body",
};

/// `max_reply_bytes`: the largest reply flycode reads (PROTOCOL.md §1 (Reading a reply: reply size limit)). Below 1 KiB not even a
/// short call with its path fits; above 1 GiB parsing one reply would take gigabytes.
pub const MAX_REPLY_BYTES: SettingRange = SettingRange {
    key: "max_reply_bytes",
    flag: None,
    min: 1024,
    max: 1 << 30,
    unit: "bytes of one model reply",
};

/// `timeout_ms`: the default deadline of a program. The upper bound is the schema's for
/// `timeoutMs`; the lower is not the schema's 1, since a default of a few milliseconds leaves no
/// time to start a program and would fail every call with `timed_out`: 100 ms is the least that
/// lets a trivial one run. (A call may still ask for less with `timeoutMs`.)
pub const TIMEOUT_MS: SettingRange = SettingRange {
    key: "timeout_ms",
    flag: None,
    min: 100,
    max: 600_000,
    unit: "milliseconds a program may run unless its call says otherwise",
};

/// `[agent] max_turns`: a run of no request does nothing; ten thousand is past any real task.
pub const MAX_TURNS: SettingRange = SettingRange {
    key: "max_turns",
    flag: Some("--max-turns"),
    min: 1,
    max: 10_000,
    unit: "requests per run",
};

/// `[agent] max_violations`: zero would stop a run before its first reply.
pub const MAX_VIOLATIONS: SettingRange = SettingRange {
    key: "max_violations",
    flag: Some("--max-violations"),
    min: 1,
    max: 100,
    unit: "invalid replies in a row before the run stops",
};

/// `[agent] max_parallel`: read-only calls of one turn run at most this many at once (PROTOCOL.md
/// §13 (The API loop: parallel calls)); 1 runs them one after another. More than 64 threads would only contend for the disk.
pub const MAX_PARALLEL: SettingRange = SettingRange {
    key: "max_parallel",
    flag: None,
    min: 1,
    max: 64,
    unit: "read-only calls of one turn running at once",
};

/// `[agent] special_every`: the special messages move forward only every N results (PROTOCOL.md
/// §13 (The API loop: special messages)); 1 is seed 004's rule, and past 20 the notes the block
/// carries would trail too far behind the conversation.
pub const SPECIAL_EVERY: SettingRange = SettingRange {
    key: "special_every",
    flag: None,
    min: 1,
    max: 20,
    unit: "results between moves of the special messages",
};

/// `[state] keep_days`: how long `flycode gc` keeps transcripts, sessions and replay stores
/// (PROTOCOL.md §10 (Running calls: the state directory)); zero would remove a run's record while
/// it is written.
pub const KEEP_DAYS: SettingRange = SettingRange {
    key: "keep_days",
    flag: None,
    min: 1,
    max: 36_500,
    unit: "days the state directory keeps a run's files",
};

/// `[undo] max_bytes`: the undo store's size before the oldest changes are pruned
/// (PROTOCOL.md §16 (Undo and history)); a megabyte at least, a tebibyte at most.
pub const UNDO_MAX_BYTES: SettingRange = SettingRange {
    key: "max_bytes",
    flag: None,
    min: 1 << 20,
    max: 1 << 40,
    unit: "bytes the undo store keeps",
};

/// `[undo] max_age_days`: changes older than this are pruned.
pub const UNDO_MAX_AGE_DAYS: SettingRange = SettingRange {
    key: "max_age_days",
    flag: None,
    min: 1,
    max: 36_500,
    unit: "days the undo store keeps a change",
};

/// `[undo] max_file_bytes`: a larger file is recorded by hash only (0: every file).
pub const UNDO_MAX_FILE_BYTES: SettingRange = SettingRange {
    key: "max_file_bytes",
    flag: None,
    min: 0,
    max: 1 << 40,
    unit: "bytes of a file whose content the undo store keeps",
};

/// `[jobs] log_bytes`: one background job's output file. Below 64 KiB a line of 16 KiB (the
/// longest kept whole) leaves no room for others; above 1 GiB one chatty job fills a disk.
pub const LOG_BYTES: SettingRange = SettingRange {
    key: "log_bytes",
    flag: None,
    min: 64 * 1024,
    max: 1 << 30,
    unit: "bytes of one background job's output file",
};

/// `[jobs] max_running`: a session with no job allowed would refuse every background call.
pub const MAX_RUNNING: SettingRange = SettingRange {
    key: "max_running",
    flag: None,
    min: 1,
    max: 64,
    unit: "background jobs running at once in one session",
};

/// `[agent] connect_timeout_ms`: zero would fail every connection.
pub const CONNECT_TIMEOUT_MS: SettingRange = SettingRange {
    key: "connect_timeout_ms",
    flag: Some("--connect-timeout-ms"),
    min: 1,
    max: 600_000,
    unit: "milliseconds to connect",
};

/// `[agent] read_timeout_ms`: zero would fail every response; an hour of silence is a hang.
pub const READ_TIMEOUT_MS: SettingRange = SettingRange {
    key: "read_timeout_ms",
    flag: Some("--read-timeout-ms"),
    min: 1,
    max: 3_600_000,
    unit: "milliseconds of silence within a response",
};

/// `[agent] max_retries`: zero means no retry.
pub const MAX_RETRIES: SettingRange = SettingRange {
    key: "max_retries",
    flag: Some("--max-retries"),
    min: 0,
    max: 100,
    unit: "retries of a failed request",
};

/// `[agent] retry_base_ms`: zero retries at once; the back-off is capped at 30 s
/// (`agent::client::retry::BACKOFF_CAP`), so a larger base would change nothing.
pub const RETRY_BASE_MS: SettingRange = SettingRange {
    key: "retry_base_ms",
    flag: Some("--retry-base-ms"),
    min: 0,
    max: 30_000,
    unit: "milliseconds before the first retry, doubled each time",
};

/// `[agent] max_tasks_per_run`: 0 refuses every task (`quota_exceeded`).
pub const MAX_TASKS_PER_RUN: SettingRange = SettingRange {
    key: "max_tasks_per_run",
    flag: None,
    min: 0,
    max: 1000,
    unit: "sub-agent tasks per run",
};

/// `[agent] max_tasks_per_agent`: 0 refuses every task (`quota_exceeded`).
pub const MAX_TASKS_PER_AGENT: SettingRange = SettingRange {
    key: "max_tasks_per_agent",
    flag: None,
    min: 0,
    max: 1000,
    unit: "sub-agent tasks per agent",
};

/// `[agent] subagent_max_turns`: a sub-agent needs one request at least.
pub const SUBAGENT_MAX_TURNS: SettingRange = SettingRange {
    key: "subagent_max_turns",
    flag: None,
    min: 1,
    max: 1000,
    unit: "requests of a sub-agent before its last turn",
};

/// `[agent] subagent_timeout_ms`: a second at least, a day at most.
pub const SUBAGENT_TIMEOUT_MS: SettingRange = SettingRange {
    key: "subagent_timeout_ms",
    flag: None,
    min: 1000,
    max: 86_400_000,
    unit: "milliseconds of a sub-agent before its last turn",
};

/// `[agent] max_reply_tokens`: a call with its path needs some tens of tokens; a million is
/// past any model's output.
pub const MAX_REPLY_TOKENS: SettingRange = SettingRange {
    key: "max_reply_tokens",
    flag: Some("--max-reply-tokens"),
    min: 16,
    max: 1_000_000,
    unit: "tokens of one reply",
};

/// `[agent] first_byte_timeout_ms`: like the read timeout, up to an hour.
pub const FIRST_BYTE_TIMEOUT_MS: SettingRange = SettingRange {
    key: "first_byte_timeout_ms",
    flag: Some("--first-byte-timeout-ms"),
    min: 1,
    max: 3_600_000,
    unit: "milliseconds before a response's first event",
};

/// `[agent] turn_timeout_ms`: a second at least, a day at most.
pub const TURN_TIMEOUT_MS: SettingRange = SettingRange {
    key: "turn_timeout_ms",
    flag: None,
    min: 1000,
    max: 86_400_000,
    unit: "milliseconds of one request and its reply",
};

/// Reads an integer in `range` for a `#[serde(deserialize_with)]` field; the error, raised
/// inside the value, carries its span, so the file's line is the key's.
fn in_range<'de, D, T>(deserializer: D, range: &SettingRange) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    let value = i64::deserialize(deserializer)?;
    let written = format!("{} = {value}", range.key);
    u64::try_from(value)
        .ok()
        .filter(|_| range.contains(i128::from(value)))
        .and_then(|value| T::try_from(value).ok())
        .map(Some)
        .ok_or_else(|| D::Error::custom(range.out_of_range(&written)))
}

/// Every range but `[state] keep_days`, in the order the configuration's documentation lists
/// them (the tests write each into the file's top level or `[agent]`).
#[cfg(test)]
pub const ALL: [SettingRange; 18] = [
    OUTPUT_CAP,
    MAX_REPLY_BYTES,
    TIMEOUT_MS,
    MAX_TURNS,
    MAX_VIOLATIONS,
    MAX_PARALLEL,
    SPECIAL_EVERY,
    CONNECT_TIMEOUT_MS,
    READ_TIMEOUT_MS,
    MAX_RETRIES,
    RETRY_BASE_MS,
    MAX_TASKS_PER_RUN,
    MAX_TASKS_PER_AGENT,
    SUBAGENT_MAX_TURNS,
    SUBAGENT_TIMEOUT_MS,
    MAX_REPLY_TOKENS,
    FIRST_BYTE_TIMEOUT_MS,
    TURN_TIMEOUT_MS,
];

macro_rules! deserialize_in_range {
    ($($name:ident: $type:ty = $range:ident;)*) => {$(
        /// Reads the setting, refusing a value outside its range.
        pub(super) fn $name<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<$type>, D::Error> {
            in_range(deserializer, &$range)
        }
    )*};
}

deserialize_in_range! {
    output_cap: usize = OUTPUT_CAP;
    max_reply_bytes: usize = MAX_REPLY_BYTES;
    timeout_ms: u64 = TIMEOUT_MS;
    max_turns: u32 = MAX_TURNS;
    max_violations: u32 = MAX_VIOLATIONS;
    max_parallel: u32 = MAX_PARALLEL;
    special_every: u32 = SPECIAL_EVERY;
    keep_days: u32 = KEEP_DAYS;
    undo_max_bytes: u64 = UNDO_MAX_BYTES;
    undo_max_age_days: u32 = UNDO_MAX_AGE_DAYS;
    undo_max_file_bytes: u64 = UNDO_MAX_FILE_BYTES;
    log_bytes: u64 = LOG_BYTES;
    max_running: u32 = MAX_RUNNING;
    connect_timeout_ms: u64 = CONNECT_TIMEOUT_MS;
    read_timeout_ms: u64 = READ_TIMEOUT_MS;
    max_retries: u32 = MAX_RETRIES;
    retry_base_ms: u64 = RETRY_BASE_MS;
    max_tasks_per_run: u32 = MAX_TASKS_PER_RUN;
    max_tasks_per_agent: u32 = MAX_TASKS_PER_AGENT;
    subagent_max_turns: u32 = SUBAGENT_MAX_TURNS;
    subagent_timeout_ms: u64 = SUBAGENT_TIMEOUT_MS;
    max_reply_tokens: u32 = MAX_REPLY_TOKENS;
    first_byte_timeout_ms: u64 = FIRST_BYTE_TIMEOUT_MS;
    turn_timeout_ms: u64 = TURN_TIMEOUT_MS;
}
