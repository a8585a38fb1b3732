//! Finding, killing and reaping every process of a run: the process *tree*, not just the process
//! group (SECURITY.md: "A process group is not a process tree"). Knows nothing of pipes or output.
//!
//! On Linux flycode is a child subreaper, so a descendant whose parent dies is reparented to
//! flycode instead of init. A run's processes are then: the main child and everything below it
//! by `/proc/<pid>/stat` parent links, plus the orphans reparented to flycode that are not
//! another run's, and everything below them. The tag ([`RUN_TAG_VAR`]) in an orphan's
//! environment tells two concurrent runs' orphans apart; an orphan without a readable tag
//! (`env -i`, a setuid program) is nobody else's, so it is killed too. Elsewhere only the process
//! group is killed. Where the run has a cgroup (`cgroup.rs`) it is killed first, at once; the
//! walk then finds only the dead to reap (or a process that moved itself out of the cgroup,
//! which only an uncontained program running as root can).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::process::{Pid, Signal, kill_process_group};

use super::cgroup::CallGroup;

/// The environment variable whose value tags every process of one run.
pub(super) const RUN_TAG_VAR: &str = "FLYCODE_RUN";

/// Main children that are spawned and not yet reaped by their own waiter: `(pid, run id)`.
///
/// Held across `spawn` and across the orphan reaper's decisions, so that a main child is never
/// reaped by anyone but its waiter (which would make `Child::wait` fail).
static LIVE_CHILDREN: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());

/// Locks the live-children list, ignoring poisoning (the list stays consistent).
pub(super) fn live_children() -> MutexGuard<'static, Vec<(i32, u64)>> {
    LIVE_CHILDREN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The tags of the runs under way: an orphan carrying one of them belongs to that run.
static LIVE_RUNS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Locks the live-runs list, ignoring poisoning.
fn live_runs() -> MutexGuard<'static, Vec<String>> {
    LIVE_RUNS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One run's identity: a number unique in this process and the tag its processes carry. Listed
/// as under way from its creation until it is dropped.
#[derive(Debug)]
pub(super) struct RunId {
    /// Unique among the runs of this process.
    pub(super) id: u64,
    /// The value of [`RUN_TAG_VAR`]: flycode's pid and the id.
    pub(super) tag: String,
}

impl RunId {
    /// A fresh run identity.
    pub(super) fn next() -> RunId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}.{id}", std::process::id());
        live_runs().push(tag.clone());
        RunId { id, tag }
    }
}

impl Drop for RunId {
    fn drop(&mut self) {
        live_runs().retain(|tag| tag != &self.tag);
    }
}

/// Records that the main child `pid` of run `id` has been reaped by its waiter.
pub(super) fn forget_child(pid: i32, id: u64) {
    live_children().retain(|&entry| entry != (pid, id));
}

/// The fallback when no waiter thread could be started: blocks until the (killed) main
/// child `pid` is reaped, then forgets it.
pub(super) fn reap_main_child(pid: i32, run: &RunId) {
    if let Some(child) = Pid::from_raw(pid) {
        let _ = rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty());
    }
    forget_child(pid, run.id);
}

/// Makes this process a child subreaper (Linux, once; best effort: without it a descendant that
/// leaves the tree is reparented to init and survives, as on other Unix systems).
pub(super) fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        static DONE: std::sync::Once = std::sync::Once::new();
        DONE.call_once(|| {
            let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
        });
    }
}

/// Kills every process of the run whose main child is `pid` (process group `pid`) and reaps the
/// orphans among them: the run's cgroup at once where it has one, then the walk (the only
/// mechanism without a cgroup, a second pass with one). `main_alive`: the main child has not
/// been reaped yet, so its pid still names it and the walk may start there.
pub(super) fn kill_run(pid: i32, main_alive: bool, run: &RunId, group: Option<&CallGroup>) {
    if let Some(group) = group {
        group.kill();
    }
    // Everything still in the group, at once; the only mechanism outside Linux.
    if let Some(group) = Pid::from_raw(pid) {
        let _ = kill_process_group(group, Signal::KILL);
    }
    #[cfg(target_os = "linux")]
    linux::kill_tree(main_alive.then_some(pid), &run.tag);
    #[cfg(not(target_os = "linux"))]
    let _ = (main_alive, run);
}

/// Clean-up after a main child that exited with its pipes closed: kills whatever it left behind.
/// Cheap when it left nothing, which is the common case.
pub(super) fn sweep_after_exit(pid: i32, run: &RunId, group: Option<&CallGroup>) {
    // With the program in a cgroup, its kill is exact: the check below only decides whether
    // there are dead to reap, so the quick list of children will do.
    let exact = group.is_some_and(|group| group.kill());
    // On Linux anything of the run that outlived the main child was reparented to us (the
    // subreaper), so no child of ours but the live main children means nothing is left.
    #[cfg(target_os = "linux")]
    if !linux::has_stray_children(exact) {
        return;
    }
    #[cfg(not(target_os = "linux"))]
    let _ = exact;
    kill_run(pid, false, run, None);
}

#[cfg(target_os = "linux")]
mod linux {
    //! The `/proc` walk behind [`super::kill_run`].

    use std::collections::{HashMap, HashSet};
    use std::fs;
    use std::time::{Duration, Instant};

    use rustix::process::{Pid, Signal, WaitOptions, kill_process, waitpid};

    use super::{RUN_TAG_VAR, live_children, live_runs};

    /// How long the sweeps may chase a tree that keeps changing (a fork bomb, or a process stuck
    /// in uninterruptible sleep that never turns into a zombie) before giving up.
    const CHASE_LIMIT: Duration = Duration::from_secs(5);

    /// The pause before a sweep when every process seen is already dying, or to confirm that
    /// nothing is left.
    const ROUND_PAUSE: Duration = Duration::from_millis(2);

    /// One line of the process table.
    #[derive(Clone, Copy, Debug)]
    struct Proc {
        pid: i32,
        ppid: i32,
        zombie: bool,
    }

    /// Kills the tree under `root` (when given) and under this run's orphans, then reaps.
    ///
    /// Sweeps repeat until two in a row find nothing of the run alive. Each sweep first kills
    /// the run's orphans listed as this process's children (a few reads, so a process that keeps
    /// forking and leaving its child behind, a pid-hopper, is caught between two hops), then
    /// reads the whole process table, selects the run's processes and sends `SIGKILL` to every
    /// one still alive. `SIGKILL` freezes as it kills: a process with it pending cannot finish a
    /// fork (the kernel aborts it), so whatever a killed process started exists already and is
    /// found by a later sweep, below a zombie or reparented to us (the subreaper). A sweep that
    /// found only processes already killed (still dying) pauses before the next; one that found
    /// a new process does not.
    ///
    /// What makes "nothing alive" true rather than a process slipping past: the table alone
    /// cannot tell (a hopper's pid can keep ahead of the reading, and another run may reap the
    /// zombies it leaves), so a sweep counts as finding nothing only when, besides the table,
    /// the lists of this process's children read the same twice with no live orphan of the run
    /// ([`stable_children`]) and the main child is dead: every living process of the run then
    /// has a living parent in the run, and the topmost one, reparented to us, would be listed.
    pub(super) fn kill_tree(root: Option<i32>, tag: &str) {
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        let give_up = Instant::now() + CHASE_LIMIT;
        let mut killed = HashSet::new();
        let mut quiet = 0;
        while quiet < 2 && Instant::now() < give_up {
            let others: Vec<String> = live_runs()
                .iter()
                .filter(|other| other.as_str() != tag)
                .cloned()
                .collect();
            let is_ours = |pid| run_tag(pid).is_none_or(|found| !others.contains(&found));
            let reading = children_by_thread();
            let mut alive = reading
                .as_ref()
                .map(|reading| kill_own_orphans(reading, is_ours))
                .unwrap_or_default();
            let table = read_process_table();
            // Held while choosing, so that a main child being spawned right now (its
            // environment not yet its own) is registered before it could be taken for an orphan.
            let live = live_children();
            let mains: Vec<i32> = live.iter().map(|&(pid, _)| pid).collect();
            let selected = select_run(&table, root, me, &mains, is_ours);
            drop(live);
            for proc in selected.into_iter().filter(|proc| !proc.zombie) {
                alive.push(proc.pid);
                if let Some(pid) = Pid::from_raw(proc.pid) {
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
            let fresh = alive.iter().any(|pid| killed.insert(*pid));
            // Without lists of children (CONFIG_PROC_CHILDREN off) the table is all there is.
            let exact = match reading {
                Some(reading) => {
                    children_by_thread().as_ref() == Some(&reading) && root.is_none_or(is_zombie)
                }
                None => true,
            };
            quiet = if alive.is_empty() && exact {
                quiet + 1
            } else {
                0
            };
            if !fresh {
                std::thread::sleep(ROUND_PAUSE);
            }
        }
        reap_orphans(me);
    }

    /// Sends `SIGKILL` to every child of this process in `reading` that is not a live main
    /// child, that `is_ours` accepts and that is not dead; returns their pids.
    fn kill_own_orphans(reading: &Children, is_ours: impl Fn(i32) -> bool) -> Vec<i32> {
        // Held throughout, as in the full sweep: a child being spawned is registered first.
        let live = live_children();
        let mut found = Vec::new();
        for &pid in reading.iter().flat_map(|(_, children)| children) {
            let main = live.iter().any(|&(main, _)| main == pid);
            if main || is_zombie(pid) || !is_ours(pid) {
                continue;
            }
            if let Some(target) = Pid::from_raw(pid) {
                let _ = kill_process(target, Signal::KILL);
            }
            found.push(pid);
        }
        found
    }

    /// Whether `pid` is a zombie or gone.
    fn is_zombie(pid: i32) -> bool {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| parse_stat(&stat))
            .is_none_or(|(zombie, _)| zombie)
    }

    /// How many times [`stable_children`] reads before it gives up.
    const READINGS: usize = 8;

    /// Whether this process has a child that is not a live main child: an orphan reparented to
    /// us, or (when it cannot be told) possibly one. `quick`: one reading of the lists of
    /// children (enough after a cgroup's kill, when only the dead are left to reap); otherwise
    /// a stable one ([`stable_children`]).
    pub(super) fn has_stray_children(quick: bool) -> bool {
        let reading = if quick {
            children_by_thread()
        } else {
            stable_children()
        };
        let Some(reading) = reading else {
            return true;
        };
        let live = live_children();
        reading
            .iter()
            .flat_map(|(_, children)| children)
            .any(|&pid| !live.iter().any(|&(main, _)| main == pid))
    }

    /// Each thread of this process with the pids of its children, sorted by thread.
    type Children = Vec<(std::ffi::OsString, Vec<i32>)>;

    /// A reading of the lists of children that can be trusted: two in a row that are the same.
    /// The kernel walks such a list without holding it, and when the child it printed last is
    /// reaped (or moved to another thread) before the next is fetched it may skip one; that
    /// child is then missing from the next reading, so two equal readings mean the first
    /// skipped nothing. `None` after [`READINGS`] readings without two equal, or without lists.
    fn stable_children() -> Option<Children> {
        let mut last = children_by_thread()?;
        for _ in 1..READINGS {
            let next = children_by_thread()?;
            if next == last {
                return Some(next);
            }
            last = next;
        }
        None
    }

    /// Each thread of this process with the pids of its children (`None` when a list cannot be
    /// read: CONFIG_PROC_CHILDREN is off; a pid that does not parse is `0`, which no live main
    /// child has).
    fn children_by_thread() -> Option<Children> {
        let mut threads = Vec::new();
        for task in fs::read_dir("/proc/self/task").ok()?.flatten() {
            let Ok(children) = fs::read_to_string(task.path().join("children")) else {
                // A thread that just ended has no list; one that never could means no support.
                if task.path().exists() {
                    return None;
                }
                continue;
            };
            let pids = children
                .split_whitespace()
                .map(|pid| pid.parse().unwrap_or(0))
                .collect();
            threads.push((task.file_name(), pids));
        }
        threads.sort();
        Some(threads)
    }

    /// Reaps zombies reparented to us that no waiter owns: the dead of killed runs, and orphans
    /// that ended by themselves. Holds the live-children lock so a main child is never taken.
    fn reap_orphans(me: i32) {
        let live = live_children();
        for proc in read_process_table() {
            let unowned = !live.iter().any(|&(pid, _)| pid == proc.pid);
            if proc.ppid == me
                && proc.zombie
                && unowned
                && let Some(pid) = Pid::from_raw(proc.pid)
            {
                let _ = waitpid(Some(pid), WaitOptions::NOHANG);
            }
        }
    }

    /// The run's processes: `root`'s tree and the trees of the orphans (children of `me` that are
    /// not live main children) that `is_ours` accepts.
    fn select_run(
        table: &[Proc],
        root: Option<i32>,
        me: i32,
        mains: &[i32],
        is_ours: impl Fn(i32) -> bool,
    ) -> Vec<Proc> {
        let mut children: HashMap<i32, Vec<Proc>> = HashMap::new();
        for proc in table {
            children.entry(proc.ppid).or_default().push(*proc);
        }
        let mut pending: Vec<Proc> = table
            .iter()
            .filter(|proc| Some(proc.pid) == root)
            .copied()
            .collect();
        let orphans = children.get(&me).map(Vec::as_slice).unwrap_or_default();
        pending.extend(orphans.iter().filter(|proc| {
            Some(proc.pid) != root
                && !proc.zombie
                && !mains.contains(&proc.pid)
                && is_ours(proc.pid)
        }));
        let mut selected = Vec::new();
        while let Some(proc) = pending.pop() {
            if let Some(below) = children.get(&proc.pid) {
                pending.extend(below);
            }
            selected.push(proc);
        }
        selected
    }

    /// The run tag process `pid` started with, if its environment can be read and has one.
    fn run_tag(pid: i32) -> Option<String> {
        let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
        let prefix = format!("{RUN_TAG_VAR}=");
        environ
            .split(|&byte| byte == 0)
            .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
            .map(|tag| String::from_utf8_lossy(tag).into_owned())
    }

    /// Every process's pid, parent and whether it is a zombie; processes that vanish while
    /// being read are skipped.
    fn read_process_table() -> Vec<Proc> {
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|pid| {
                let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let (zombie, ppid) = parse_stat(&stat)?;
                Some(Proc { pid, ppid, zombie })
            })
            .collect()
    }

    /// State and parent from `/proc/<pid>/stat`: `pid (comm) S ppid ...`, where `comm` may hold
    /// spaces and parentheses, so the fields start after the last `)`.
    fn parse_stat(stat: &str) -> Option<(bool, i32)> {
        let (_, fields) = stat.rsplit_once(')')?;
        let mut fields = fields.split_whitespace();
        let state = fields.next()?;
        let ppid = fields.next()?.parse().ok()?;
        Some((state == "Z", ppid))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn stat_with_odd_command_name_parses() {
            let stat = "4242 (a) b (c) Z 17 4242 4242 0 -1 4194304";
            assert_eq!(parse_stat(stat), Some((true, 17)));
            assert_eq!(parse_stat("1 (init) S 0 1 1"), Some((false, 0)));
            assert_eq!(parse_stat("garbage"), None);
        }

        #[test]
        fn selection_follows_parent_links_and_takes_orphans_that_are_no_other_runs() {
            let me = std::process::id() as i32;
            let proc = |pid, ppid| Proc {
                pid,
                ppid,
                zombie: false,
            };
            // Pids above Linux's largest pid_max, so none names a real process. 5_000_010 is the
            // main child with a grandchild; 5_000_020 is another run's live main child and
            // 5_000_030 another run's orphan: both are left alone with their children;
            // 5_000_040 is an orphan nobody claims (it cleared its environment) and is taken.
            let table = [
                proc(5_000_010, me),
                proc(5_000_011, 5_000_010),
                proc(5_000_012, 5_000_011),
                proc(5_000_020, me),
                proc(5_000_021, 5_000_020),
                proc(5_000_030, me),
                proc(5_000_031, 5_000_030),
                proc(5_000_040, me),
                proc(5_000_041, 5_000_040),
            ];
            let mut pids: Vec<i32> = select_run(&table, Some(5_000_010), me, &[5_000_020], |pid| {
                pid != 5_000_030
            })
            .iter()
            .map(|proc| proc.pid)
            .collect();
            pids.sort_unstable();
            assert_eq!(
                pids,
                [5_000_010, 5_000_011, 5_000_012, 5_000_040, 5_000_041]
            );
        }
    }
}
