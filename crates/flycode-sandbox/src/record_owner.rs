//! Which process wrote a record of the state directory, and whether it still runs: journal
//! records, their spare files and undo records are named or stamped with their writer's pid and
//! start time (PROTOCOL.md §11 Security, "After a crash").

use std::path::Path;

/// When this process started, as the kernel counts it (`0` where it is not known): with the pid,
/// it names a process uniquely even after the pid is reused.
pub fn own_start_time() -> u64 {
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *START.get_or_init(|| start_time(std::process::id()).unwrap_or(0))
}

/// A process's start time from `/proc/PID/stat` (field 22), on Linux.
fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.1
}

/// A process's state (field 3: `R`, `S`, `Z`…) and start time, from `/proc/PID/stat`.
fn stat_fields(pid: u32) -> Option<(String, Option<u64>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.to_owned();
    Some((state, fields.nth(18).and_then(|start| start.parse().ok())))
}

/// Whether the process that wrote a record named `pid-start-n.json` still runs. A zombie (dead,
/// its parent has not yet collected its status) does not: its files are closed, its locks gone,
/// and it will never finish what the record says.
pub fn owner_is_alive(pid: u32, start: u64) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if cfg!(target_os = "linux") {
        return stat_fields(pid).is_some_and(|(state, now)| {
            state != "Z" && now.is_some_and(|now| start == 0 || now == start)
        });
    }
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(error) => error == rustix::io::Errno::PERM,
    }
}

/// The pid and start time in a record's name, `PID-START-N.json`.
pub(crate) fn owner_of(stem: &str) -> Option<(u32, u64)> {
    let mut parts = stem.strip_suffix(".json")?.split('-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    Some((pid, start))
}

/// Opens a record (a journal record, a spare record file) to recover or remove it, locked:
/// never through a link, and without blocking (a FIFO planted here must not hold up every
/// start), then only a regular file. `None` when it is no regular file, its writer still holds
/// it, another flycode starting at the same moment is recovering it, or that one has removed it
/// meanwhile.
pub(crate) fn open_record(file: &Path) -> Option<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        options.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    }
    let handle = options.open(file).ok()?;
    if !handle.metadata().ok()?.is_file() {
        return None;
    }
    // Another flycode starting at the same moment may be recovering it: leave it to that one.
    rustix::fs::flock(
        &handle,
        rustix::fs::FlockOperation::NonBlockingLockExclusive,
    )
    .ok()?;
    // Removed meanwhile by the one that held the lock before.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if handle.metadata().ok()?.nlink() == 0 {
            return None;
        }
    }
    Some(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_running_writer_owns_its_record_and_a_zombie_does_not() {
        let mut running = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = running.id();
        let start = start_time(pid).unwrap();
        assert!(owner_is_alive(pid, start));
        assert!(
            !owner_is_alive(pid, start + 1),
            "another process under a reused pid"
        );
        running.kill().unwrap();
        // Killed and not yet collected: a zombie, which finishes nothing.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while stat_fields(pid).is_some_and(|(state, _)| state != "Z") {
            assert!(
                std::time::Instant::now() < deadline,
                "never became a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!owner_is_alive(pid, start));
        running.wait().unwrap();
        assert!(!owner_is_alive(pid, start));
    }

    #[test]
    fn a_name_gives_its_writer_s_pid_and_start_time() {
        assert_eq!(owner_of("4242-17-3.json"), Some((4242, 17)));
        assert_eq!(owner_of("4242-17-3"), None);
        assert_eq!(owner_of("rejected"), None);
    }
}
