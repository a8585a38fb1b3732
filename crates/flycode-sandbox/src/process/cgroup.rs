//! One cgroup v2 per call (Linux), where flycode can make one: every process the call's program
//! starts is born inside it and cannot leave it (a contained program cannot open a file under
//! `/sys` for writing), so at the end one write to `cgroup.kill` kills them all at once, forks in
//! flight and pid-hoppers included, and `cgroup.events` says when the last one is gone. Knows
//! nothing of pipes or output; the `/proc` sweeps of `tree` stay as the fallback and as a second
//! pass.
//!
//! **Where.** flycode's own cgroup is its `0::` line in `/proc/self/cgroup`, found beneath the
//! cgroup2 mount of `/proc/self/mountinfo` (its root may be a sub-tree, as in a container). A
//! call's cgroup is `flycode-<pid>-<run>` directly beneath it. A child cgroup may sit beside
//! processes as long as no controller is enabled for children, which holds for any cgroup with
//! processes but the root, so flycode stays where it is.
//!
//! **How the program gets in.** A process is born in the cgroup of the thread that forks it, and
//! a process (all its threads) moves by writing its pid to `cgroup.procs`. Moving the program
//! after the spawn would let it fork first, and `clone3(CLONE_INTO_CGROUP)` is not offered by the
//! standard library (nor without `unsafe`). So flycode itself steps into the call's cgroup for
//! the spawn and back out right after (two writes, well under a millisecond), while holding the
//! lock every spawn of flycode takes: the program is in the call's cgroup from its first
//! instruction, and nothing else flycode starts lands there. flycode is never inside when the
//! cgroup is killed: if stepping back out fails, the cgroup is not killed (its program is swept
//! instead), and no further cgroups are made; before a kill flycode steps into its own cgroup
//! once more, in case a program that may write under `/sys` (a root of `/`, or the sandbox off)
//! moved it.
//!
//! **Fallback.** Where no cgroup can be made or entered (cgroup v1 only, a read-only cgroup file
//! system, no write permission or delegation, a kernel before 5.14 without `cgroup.kill`), the
//! call runs without one and `tree` kills by sweeps as the child subreaper; the first failure
//! turns cgroups off for the rest of the process.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Set once making or entering a cgroup failed: calls run without one from then on.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// Call cgroups that could not be removed yet (still emptying): retried at the next call.
static LEFTOVERS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// How long to wait for a killed cgroup to empty. Killed processes die at once; this bounds a
/// process stuck in the kernel.
const EMPTYING_WAIT: Duration = Duration::from_secs(2);

#[cfg(test)]
thread_local! {
    /// Tests of the fallback turn cgroups off for the runs of their own thread.
    pub(super) static SWEEPS_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// flycode's own cgroup directory, found once (under the spawn lock, so never while flycode
/// stands in a call's cgroup).
fn home() -> Option<&'static Path> {
    static HOME: OnceLock<Option<PathBuf>> = OnceLock::new();
    HOME.get_or_init(|| {
        let cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
        let home = locate(&cgroup, &mountinfo)?;
        remove_stale(&home);
        Some(home)
    })
    .as_deref()
}

/// flycode's own cgroup directory, for tests (taken under the spawn lock, like every use).
#[cfg(test)]
pub(super) fn home_dir() -> Option<&'static Path> {
    let _spawns = super::tree::live_children();
    home()
}

/// The directory of this process's cgroup v2 from `/proc/self/cgroup` and
/// `/proc/self/mountinfo`, if the unified hierarchy is mounted where it can be reached.
fn locate(cgroup: &str, mountinfo: &str) -> Option<PathBuf> {
    let path = cgroup.lines().find_map(|line| line.strip_prefix("0::"))?;
    if !path.starts_with('/') || path.ends_with(" (deleted)") {
        return None;
    }
    mountinfo.lines().find_map(|line| {
        let (mount, fstype) = line.split_once(" - ")?;
        if fstype.split_whitespace().next() != Some("cgroup2") {
            return None;
        }
        let mut fields = mount.split_whitespace().skip(3);
        let (root, point) = (unescape(fields.next()?), unescape(fields.next()?));
        let inner = Path::new(path).strip_prefix(&root).ok()?;
        Some(Path::new(&point).join(inner))
    })
}

/// A `mountinfo` field with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|digits| {
            bytes[i] == b'\\' && digits.iter().all(|digit| (b'0'..=b'7').contains(digit))
        });
        match octal {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |value, digit| value * 8 + u32::from(digit - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Kills and removes the call cgroups of flycode processes that no longer run (killed before
/// they could clean up): what they started does not outlive them for long.
pub(super) fn remove_stale(home: &Path) {
    let Ok(entries) = fs::read_dir(home) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("flycode-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let dir = entry.path();
            empty(&dir);
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// A call's cgroup. Dropping it kills whatever is still inside and removes it.
#[derive(Debug)]
pub(super) struct CallGroup {
    dir: PathBuf,
    /// flycode's own cgroup, to step back into after the spawn.
    home: &'static Path,
    /// The program was started inside (stepping in worked).
    holds_program: bool,
    /// flycode could not step back out: the cgroup must never be killed.
    holds_flycode: bool,
}

impl CallGroup {
    /// A fresh cgroup for run `run` of this process, or `None` where cgroups cannot be used.
    /// Call it holding the spawn lock (see the module documentation).
    pub(super) fn create(run: u64) -> Option<CallGroup> {
        #[cfg(test)]
        if SWEEPS_ONLY.with(std::cell::Cell::get) {
            return None;
        }
        if UNAVAILABLE.load(Ordering::Relaxed) {
            return None;
        }
        let home = home();
        let Some(home) = home else {
            UNAVAILABLE.store(true, Ordering::Relaxed);
            return None;
        };
        retry_leftovers();
        let dir = home.join(format!("flycode-{}-{run}", std::process::id()));
        if fs::create_dir(&dir).is_err() {
            UNAVAILABLE.store(true, Ordering::Relaxed);
            return None;
        }
        if !dir.join("cgroup.kill").exists() {
            // A kernel before 5.14: no atomic kill.
            let _ = fs::remove_dir(&dir);
            UNAVAILABLE.store(true, Ordering::Relaxed);
            return None;
        }
        Some(CallGroup {
            dir,
            home,
            holds_program: false,
            holds_flycode: false,
        })
    }

    /// Runs `spawn` with flycode standing in this cgroup, so the process it starts is born
    /// here. If flycode cannot step in, `spawn` runs where flycode is (the call falls back to
    /// sweeps); call it holding the spawn lock.
    pub(super) fn spawn_inside<T>(
        &mut self,
        spawn: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        if write_pid(&self.dir).is_err() {
            UNAVAILABLE.store(true, Ordering::Relaxed);
            return spawn();
        }
        let spawned = spawn();
        if write_pid(self.home).is_err() {
            // Never kill a cgroup flycode stands in; its program is swept instead.
            self.holds_flycode = true;
            UNAVAILABLE.store(true, Ordering::Relaxed);
        } else {
            self.holds_program = spawned.is_ok();
        }
        spawned
    }

    /// Whether the program was started in this cgroup, so that [`CallGroup::kill`] reaches
    /// everything it started.
    pub(super) fn holds_program(&self) -> bool {
        self.holds_program && !self.holds_flycode
    }

    /// Kills every process in the cgroup and waits (boundedly) until it is empty; whether it is.
    /// Nothing to do, and `true`, when it is already empty.
    pub(super) fn kill(&self) -> bool {
        self.may_kill() && empty(&self.dir)
    }

    /// Whether killing the cgroup spares flycode: it holds the program and flycode is (put
    /// back, if a program that could write there moved it) in its own cgroup.
    fn may_kill(&self) -> bool {
        self.holds_program() && (!is_populated(&self.dir) || write_pid(self.home).is_ok())
    }
}

impl Drop for CallGroup {
    fn drop(&mut self) {
        if self.holds_flycode {
            return;
        }
        if self.may_kill() {
            empty(&self.dir);
        }
        if fs::remove_dir(&self.dir).is_err() {
            LEFTOVERS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(self.dir.clone());
        }
    }
}

/// Tries again to remove call cgroups that were still emptying, without waiting: a process
/// stuck in the kernel must not hold up every later call. The kill is sent again (a process
/// with it pending dies when it can).
fn retry_leftovers() {
    LEFTOVERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|dir| {
            if is_populated(dir) {
                let _ = send_kill(dir);
            }
            fs::remove_dir(dir).is_err() && dir.exists()
        });
}

/// Moves this process into the cgroup `dir`.
fn write_pid(dir: &Path) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))?
        .write_all(std::process::id().to_string().as_bytes())
}

/// Whether anything runs in the cgroup `dir` or beneath it (`true` when it cannot be told).
fn is_populated(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.events")).map_or(true, |events| {
        !events.lines().any(|line| line == "populated 0")
    })
}

/// Sends `SIGKILL` to every process in the cgroup `dir` and beneath it, forks in flight
/// included (the kernel's `cgroup.kill`).
fn send_kill(dir: &Path) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))?
        .write_all(b"1")
}

/// Kills everything in the cgroup `dir` (if anything is there) and waits until it is empty, for
/// at most [`EMPTYING_WAIT`]; whether it is.
fn empty(dir: &Path) -> bool {
    if !is_populated(dir) {
        return true;
    }
    if send_kill(dir).is_err() {
        return false;
    }
    let give_up = Instant::now() + EMPTYING_WAIT;
    let mut pause = Duration::from_micros(100);
    while is_populated(dir) {
        if Instant::now() >= give_up {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 /docker/abc /sys/fs/cgroup/uni\\040fied rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn the_unified_line_is_found_beneath_the_cgroup2_mount_root() {
        let cgroup = "4:memory:/x\n0::/docker/abc/sub\n";
        assert_eq!(
            locate(cgroup, MOUNTINFO),
            Some(PathBuf::from("/sys/fs/cgroup/uni fied/sub"))
        );
        assert_eq!(
            locate("0::/docker/abc\n", MOUNTINFO),
            Some(PathBuf::from("/sys/fs/cgroup/uni fied"))
        );
    }

    #[test]
    fn no_cgroup_when_v1_only_outside_the_mount_or_deleted() {
        assert_eq!(locate("4:memory:/x\n", MOUNTINFO), None);
        assert_eq!(locate("0::/elsewhere\n", MOUNTINFO), None);
        assert_eq!(locate("0::/docker/abc (deleted)\n", MOUNTINFO), None);
        let v1 = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert_eq!(locate("0::/\n", v1), None);
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape("a\\040b\\011c\\\\d"), "a b\tc\\\\d");
        assert_eq!(unescape("end\\04"), "end\\04");
    }
}
