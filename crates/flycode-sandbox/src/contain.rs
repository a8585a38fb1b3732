//! What a program flycode runs may do (PROTOCOL.md §9 (What programs may do)): on Linux, a Landlock domain that lets it
//! write only inside the allowed roots, a private temporary directory and the null-like devices,
//! and read everywhere except flycode's own state and configuration directories. Knows nothing of
//! tool names; the runner ([`super::process`]) applies what [`prepare`] builds.
//!
//! The domain in detail (Landlock ABI 1 at least; newer rights are used where the kernel has them):
//!
//! - **Read and execute**: every directory beneath `/` except flycode's state directory
//!   ([`super::state::state_dir`]) and configuration directory
//!   ([`super::protect::user_config_dir`]). Landlock only allows, so "everywhere but X" is built
//!   by [`readable_set`]: each ancestor of X is split into its entries, all allowed but the one
//!   leading to X. Entries that are symbolic links are left out at those levels (a rule would
//!   follow the link); their targets have rules of their own. Directory *listing* is allowed
//!   everywhere, so the names inside those two directories can be listed but no file in them read.
//!   `/dev` is not readable as a whole (a raw disk would show every file): only the devices of
//!   [`DEVICES`] are.
//! - **Write** (create, remove, rename, truncate): beneath the allowed roots (`workspace-write`
//!   only), a private temporary directory made for the call (mode 0700, `TMPDIR`, `TMP` and `TEMP`
//!   point at it, removed after the call), and the devices of [`DEVICES`]. `read-only` keeps the
//!   temporary directory and the devices: nothing written survives the call.
//! - **flycode's own directories inside a root** (the state directory in `~/.local/state` when a
//!   root is `$HOME`): the roots' read and write rules are split around them the same way
//!   ([`allowed_beneath`]), so a program can neither read nor change them (the key that seals
//!   flycode's records, the journal, the audit log). The cost: in the folders on the way from
//!   the root to them (`$HOME`, `~/.local`, `~/.local/state`), a program can change the
//!   existing entries but not create, remove or rename entries directly in them. Keeping the
//!   state directory outside the roots (`FLYCODE_STATE_DIR`) avoids it.
//! - **Network** (`process_network = false`): no TCP bind or connect (Landlock ABI 4). A kernel
//!   without network rules refuses to run programs rather than run them with a network.
//! - **Scopes** (ABI 6, where present): no signals to processes outside the domain and no
//!   connection to abstract UNIX sockets created outside it.
//! - **Devices**: no rule grants making character or block devices (`mknod`), not even in
//!   the writable places; FIFOs and sockets may be made there.
//! - **Capabilities**: none (bounding, ambient, effective, permitted and inheritable sets
//!   empty, `SECBIT_NOROOT` locked; see `sandbox/privileges.rs`), so a program run by flycode as root
//!   is root without root's powers: the kernel's own checks answer for what needs them (`EPERM`,
//!   `EACCES`). Files owned by other users are then reached only as their mode allows.
//! - **ptrace and flycode's environment**: Landlock denies a domain's processes ptrace access to
//!   processes outside it (attaching, `/proc/<pid>/mem`). Some kernels still let them read
//!   `/proc/<pid>/environ` of a process outside; without `CAP_SYS_PTRACE` a program cannot
//!   override flycode being non-dumpable ([`super::process::protect_own_environment`]), and
//!   where a kernel lets a program running as root read that file anyway, what keeps the API
//!   key out of reach is that flycode's environment no longer holds it (the secret hand-off).
//!   Other processes of the user (the shell that started flycode, with its exported API key) are
//!   not flycode's to protect.
//! - The program is started by a short-lived thread that entered the domain first; until that
//!   thread ends, the program could signal it (it is in the same domain), not any other of
//!   flycode's threads.
//! - `no_new_privs` is set: a setuid program (sudo) gains no privileges.
//!
//! Partial enforcement: on a kernel older than ABI 5 the rights it lacks are not enforced
//! (truncate(2) before ABI 3, device ioctls before ABI 5, cross-directory renames always denied on
//! ABI 1); the write and read rules above hold from ABI 1. A kernel without Landlock (not built,
//! or disabled at boot) runs no program unless `process_sandbox = "off"`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// `process_sandbox`: how programs are contained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProgramSandbox {
    /// Writes inside the roots, the private temporary directory and the null-like devices.
    #[default]
    WorkspaceWrite,
    /// Writes only to the private temporary directory and the null-like devices.
    ReadOnly,
    /// No containment: programs run with the user's rights.
    Off,
}

impl ProgramSandbox {
    /// The setting's value as written in `flycode.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProgramSandbox::WorkspaceWrite => "workspace-write",
            ProgramSandbox::ReadOnly => "read-only",
            ProgramSandbox::Off => "off",
        }
    }
}

/// Devices a contained program may read and write (besides reading everything else it may).
pub const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The OS error a child reports when it could not enter its Landlock domain (never one that
/// exec itself returns), so the runner can tell it from a failed exec.
#[cfg(unix)]
pub const CONTAIN_FAILED_ERRNO: i32 = rustix::io::Errno::NOTRECOVERABLE.raw_os_error();

/// The containment of one run: what the runner needs to build the domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Containment {
    /// `workspace-write` or `read-only` (never `off`: that is no containment at all).
    pub sandbox: ProgramSandbox,
    /// Whether TCP bind and connect are allowed.
    pub network: bool,
    /// The allowed roots: writable under `workspace-write`, readable always.
    pub roots: Vec<PathBuf>,
    /// Directories the program may not read: flycode's state and configuration directories.
    pub hidden: Vec<PathBuf>,
}

impl Containment {
    /// The containment for programs run in `roots` under the settings, `None` for `off`.
    pub fn new(sandbox: ProgramSandbox, network: bool, roots: &[PathBuf]) -> Option<Containment> {
        (sandbox != ProgramSandbox::Off).then(|| Containment {
            sandbox,
            network,
            roots: roots.to_vec(),
            hidden: flycode_private_dirs(),
        })
    }
}

impl Containment {
    /// The same containment, with `paths` (absolute, links resolved) hidden too: the files this
    /// run records (its transcripts, `--transcript` inside a root included), which programs may
    /// neither read nor change (PROTOCOL.md §11 (Security), "What a program can and cannot do to
    /// flycode's own files"). A path inside a root splits the root's rules around it as the state
    /// directory does.
    pub fn hiding(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Containment {
        for path in paths {
            if !self.hidden.contains(&path) {
                self.hidden.push(path);
            }
        }
        self
    }
}

/// flycode's state and configuration directories, as absolute paths with links resolved as far
/// as they exist (Landlock acts on the real files; a directory not made yet is hidden where it
/// will be made, so no program can make it first).
pub fn flycode_private_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = [super::state::state_dir(), super::protect::user_config_dir()]
        .into_iter()
        .flatten()
        .filter(|dir| dir.is_absolute())
        .map(|dir| super::protect::settled(&dir))
        .collect();
    dirs.dedup();
    dirs
}

/// What the running kernel offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Landlock with network rules (ABI 4 or later).
    Full,
    /// Landlock without network rules (ABI 1 to 3).
    NoNetworkRules,
    /// No Landlock: not built into the kernel, or disabled at boot. Also every other platform.
    Unavailable,
}

/// What this kernel offers, asked once.
pub fn kernel_support() -> Support {
    #[cfg(target_os = "linux")]
    {
        static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
        *SUPPORT.get_or_init(linux::probe)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Support::Unavailable
    }
}

/// Why programs cannot run under these settings on this kernel, if they cannot: the message
/// (naming the missing feature) and the advice for the person.
pub fn refusal(
    support: Support,
    sandbox: ProgramSandbox,
    network: bool,
) -> Option<(&'static str, &'static str)> {
    if sandbox == ProgramSandbox::Off || !cfg!(target_os = "linux") {
        return None;
    }
    match support {
        Support::Unavailable => Some((
            "this Linux kernel has no Landlock (not built in, or disabled at boot), so flycode cannot contain programs",
            "set process_sandbox = \"off\" in flycode.toml to run programs uncontained, or boot a kernel with Landlock (lsm=landlock)",
        )),
        Support::NoNetworkRules if !network => Some((
            "this Linux kernel's Landlock has no network rules (ABI 4, Linux 6.7), so flycode cannot keep programs off the network",
            "set process_network = true in flycode.toml (programs then reach the network), or use Linux 6.7 or later",
        )),
        _ => None,
    }
}

/// The warning a command that runs programs prints once at its start, if programs will be
/// refused here.
pub fn startup_warning(sandbox: ProgramSandbox, network: bool) -> Option<String> {
    refusal(kernel_support(), sandbox, network)
        .map(|(why, advice)| format!("{why}: process.run and shell.exec will be refused; {advice}"))
}

/// The sandbox a program runs in, in words for the person asked to approve it.
pub fn describe(sandbox: ProgramSandbox, network: bool) -> String {
    let uncontained = "the program runs with your user's rights and can read and write anything you can (flycode's roots bind only its file tools)";
    if !cfg!(target_os = "linux") {
        return format!("none on this platform: {uncontained}");
    }
    if sandbox == ProgramSandbox::Off {
        return format!("none (process_sandbox = \"off\"): {uncontained}");
    }
    if let Some((why, _)) = refusal(kernel_support(), sandbox, network) {
        return format!("unavailable: {why}; flycode will refuse to run it");
    }
    let writes = match sandbox {
        ProgramSandbox::ReadOnly => {
            "Landlock, read-only: it writes nowhere but a private temporary directory (removed afterwards) and /dev/null"
        }
        _ => {
            "Landlock: it writes only inside the allowed roots, a private temporary directory and /dev/null"
        }
    };
    let net = if network {
        "network allowed"
    } else {
        "no network"
    };
    format!("{writes}; reads anything but flycode's state and configuration; {net}")
}

/// The directories to allow reading beneath so that everything under `/` is readable except the
/// `hidden` paths (absolute, links resolved): `/` itself when nothing is hidden; otherwise every
/// ancestor of a hidden path is split into its entries (`list` gives a directory's entries and
/// whether each is a symbolic link), each allowed whole unless it is hidden (left out) or an
/// ancestor of a hidden path (split in turn). Links at split levels are left out: a rule on one
/// would apply to its target, which may be hidden. Sorted.
pub fn readable_set<F>(hidden: &[PathBuf], list: F) -> Vec<PathBuf>
where
    F: FnMut(&Path) -> Vec<(std::ffi::OsString, bool)>,
{
    allowed_beneath(Path::new("/"), hidden, list)
}

/// The same for everything beneath `base`: `base` itself when no hidden path lies inside it
/// (a root that lies inside a hidden directory, as in tests, is the user's and stays whole);
/// nothing when `base` is hidden; otherwise its entries, split as [`readable_set`] splits `/`.
/// The allowed roots go through this too, so a program cannot read or write flycode's state or
/// configuration directory when it lies inside a root.
pub fn allowed_beneath<F>(base: &Path, hidden: &[PathBuf], mut list: F) -> Vec<PathBuf>
where
    F: FnMut(&Path) -> Vec<(std::ffi::OsString, bool)>,
{
    let hidden: Vec<PathBuf> = hidden
        .iter()
        .filter(|dir| dir.starts_with(base))
        .cloned()
        .collect();
    if hidden.is_empty() {
        return vec![base.to_owned()];
    }
    if hidden.iter().any(|dir| dir == base) {
        return Vec::new();
    }
    let mut allowed = Vec::new();
    let mut pending = vec![base.to_owned()];
    while let Some(dir) = pending.pop() {
        for (name, is_link) in list(&dir) {
            let path = dir.join(name);
            if is_link || hidden.contains(&path) {
                continue;
            }
            if hidden.iter().any(|dir| dir.starts_with(&path)) {
                pending.push(path);
            } else {
                allowed.push(path);
            }
        }
    }
    allowed.sort();
    allowed
}

/// A directory's entries and whether each is a symbolic link; nothing if it cannot be listed.
fn list_dir(dir: &Path) -> Vec<(std::ffi::OsString, bool)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| {
            let is_link = entry.file_type().is_ok_and(|kind| kind.is_symlink());
            (entry.file_name(), is_link)
        })
        .collect()
}

/// Why a run's containment could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    /// These settings cannot be enforced on this kernel.
    #[error("{0}")]
    Unsupported(&'static str, &'static str),
    /// The private temporary directory could not be made.
    #[error("cannot create a private temporary directory: {0}")]
    TempDir(std::io::Error),
    /// The kernel refused the ruleset.
    #[error("cannot build the Landlock ruleset: {0}")]
    Ruleset(String),
}

/// A run's containment, ready to apply: the private temporary directory (removed when this is
/// dropped) and, on Linux, the ruleset built in the parent.
#[derive(Debug)]
pub struct PreparedContainment {
    /// The private temporary directory.
    temp: tempfile::TempDir,
    #[cfg(target_os = "linux")]
    ruleset: Option<landlock::RulesetCreated>,
}

impl PreparedContainment {
    /// The private temporary directory's path.
    pub fn temp_dir(&self) -> &Path {
        self.temp.path()
    }

    /// Starts `command` inside the domain (Linux; elsewhere the program runs uncontained). Once
    /// only: the ruleset is used up, and a second call is an error rather than a program
    /// started without it.
    pub fn spawn(
        &mut self,
        command: &mut std::process::Command,
    ) -> std::io::Result<std::process::Child> {
        #[cfg(target_os = "linux")]
        {
            match self.ruleset.take() {
                Some(ruleset) => linux::spawn_restricted(command, ruleset),
                None => Err(std::io::Error::other(
                    "the containment was already used for another program; prepare it again",
                )),
            }
        }
        #[cfg(not(target_os = "linux"))]
        command.spawn()
    }
}

/// Checks the kernel and builds everything a contained run needs before the spawn: the private
/// temporary directory and the ruleset (which opens the allowed paths).
pub fn prepare(containment: &Containment) -> Result<PreparedContainment, ContainError> {
    if let Some((why, advice)) = refusal(kernel_support(), containment.sandbox, containment.network)
    {
        return Err(ContainError::Unsupported(why, advice));
    }
    let temp = tempfile::Builder::new()
        .prefix("flycode-run-")
        .tempdir()
        .map_err(ContainError::TempDir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o700))
            .map_err(ContainError::TempDir)?;
    }
    let temp_path = std::fs::canonicalize(temp.path()).unwrap_or_else(|_| temp.path().to_owned());
    #[cfg(target_os = "linux")]
    {
        let ruleset = linux::build(containment, &temp_path)
            .map_err(|error| ContainError::Ruleset(error.to_string()))?;
        Ok(PreparedContainment {
            temp,
            ruleset: Some(ruleset),
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = temp_path;
        Ok(PreparedContainment { temp })
    }
}

#[cfg(target_os = "linux")]
mod linux {
    //! The Landlock ruleset, and the thread that enters it to start a program.

    use std::path::{Path, PathBuf};

    use landlock::{
        ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, make_bitflags, path_beneath_rules,
    };

    use std::os::unix::fs::MetadataExt;
    use std::sync::{Arc, Mutex, PoisonError};

    use landlock::{PathBeneath, PathFd};

    use super::{
        Containment, DEVICES, ProgramSandbox, Support, allowed_beneath, list_dir, readable_set,
    };

    /// The readable part of a ruleset: every path of [`readable_set`], opened, kept between runs
    /// while the directories it was listed from are unchanged. Opening and checking ~150 paths
    /// was most of a contained run's cost. Stale entries can only deny: the rules allow what the
    /// descriptors point at, so a path replaced since (a new entry, a link put in place of a
    /// directory) is simply not allowed until the listing is made again, which a changed
    /// directory's stamp forces on the next run. A listing is kept only when every directory
    /// had been still for [`SETTLED`] before it was listed: a file system's timestamps may be
    /// coarse, and a change right after the listing must show in the stamp.
    struct ReadableRules {
        /// What was hidden when it was listed.
        hidden: Vec<PathBuf>,
        /// Each directory listed, with its stamp just before it was listed.
        listed: Vec<(PathBuf, Option<DirStamp>)>,
        /// The readable paths, opened, and whether each is a file (a rule on a file may only
        /// carry file rights).
        paths: Vec<(PathBuf, PathFd, bool)>,
    }

    /// What changes when a directory's entries change.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct DirStamp {
        device: u64,
        inode: u64,
        modified: (i64, i64),
        changed: (i64, i64),
    }

    fn stamp(dir: &Path) -> Option<DirStamp> {
        std::fs::symlink_metadata(dir).ok().map(|m| DirStamp {
            device: m.dev(),
            inode: m.ino(),
            modified: (m.mtime(), m.mtime_nsec()),
            changed: (m.ctime(), m.ctime_nsec()),
        })
    }

    static READABLE: Mutex<Option<Arc<ReadableRules>>> = Mutex::new(None);

    /// How long a listed directory must have been unchanged for its listing to be kept (longer
    /// than the coarsest timestamps of the usual file systems).
    const SETTLED: std::time::Duration = std::time::Duration::from_secs(3);

    /// Whether a listing made at `now` (seconds since the epoch) of directories with these
    /// stamps may be kept.
    fn settled(listed: &[(PathBuf, Option<DirStamp>)], now: i64) -> bool {
        let settled = i64::try_from(SETTLED.as_secs()).unwrap_or(i64::MAX);
        listed.iter().all(|(_, stamp)| {
            stamp.is_some_and(|stamp| {
                stamp
                    .modified
                    .0
                    .max(stamp.changed.0)
                    .saturating_add(settled)
                    < now
            })
        })
    }

    /// The readable rules for `hidden`: the kept ones while still current, else listed and
    /// opened afresh (and kept).
    fn readable_rules(hidden: &[PathBuf]) -> Arc<ReadableRules> {
        let mut kept = READABLE.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(rules) = kept.as_ref()
            && rules.hidden == hidden
            && rules.listed.iter().all(|(dir, was)| stamp(dir) == *was)
        {
            return Arc::clone(rules);
        }
        let mut listed = Vec::new();
        let readable = readable_set(hidden, |dir| {
            listed.push((dir.to_owned(), stamp(dir)));
            list_dir(dir)
        });
        let paths = readable
            .iter()
            .filter_map(|path| {
                let fd = PathFd::new(path).ok()?;
                let is_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
                Some((path.clone(), fd, is_file))
            })
            .collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
            });
        let keep = settled(&listed, now);
        let rules = Arc::new(ReadableRules {
            hidden: hidden.to_vec(),
            listed,
            paths,
        });
        *kept = keep.then(|| Arc::clone(&rules));
        rules
    }

    /// The newest file-system rights flycode asks for (ioctl on devices); older kernels enforce
    /// what they have.
    const FS_ABI: ABI = ABI::V5;

    /// Asks the kernel what it supports, with the same requirements [`build`] makes.
    pub(super) fn probe() -> Support {
        let fs = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(Ruleset::create);
        if fs.is_err() {
            return Support::Unavailable;
        }
        let net = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::from_all(ABI::V4))
            .and_then(Ruleset::create);
        if net.is_err() {
            return Support::NoNetworkRules;
        }
        Support::Full
    }

    /// The ruleset of one run (see the module documentation).
    pub(super) fn build(
        containment: &Containment,
        temp: &Path,
    ) -> Result<RulesetCreated, RulesetError> {
        // ABI 1 is required (the core of the promise); newer rights are taken where present.
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(FS_ABI))?;
        if !containment.network {
            ruleset = ruleset
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessNet::from_all(ABI::V4))?
                .set_compatibility(CompatLevel::BestEffort);
        }
        let ruleset = ruleset.scope(Scope::from_all(ABI::V6))?;

        let mut hidden = containment.hidden.clone();
        hidden.push(PathBuf::from("/dev"));
        let readable = readable_rules(&hidden);
        let read = AccessFs::from_read(FS_ABI);
        let read_file = read & AccessFs::from_file(FS_ABI);
        // The roots, without flycode's own directories where those lie inside one.
        let roots: Vec<(PathBuf, bool)> = containment
            .roots
            .iter()
            .flat_map(|root| allowed_beneath(root, &containment.hidden, list_dir))
            .map(|path| {
                let is_file = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
                (path, is_file)
            })
            .collect();
        let file_rights = AccessFs::from_file(FS_ABI);
        let beneath = |paths: &[(PathBuf, bool)], access: BitFlags<AccessFs>| {
            paths
                .iter()
                .filter_map(|(path, is_file)| {
                    let access = if *is_file {
                        access & file_rights
                    } else {
                        access
                    };
                    PathFd::new(path)
                        .ok()
                        .map(|fd| PathBeneath::new(fd, access))
                })
                .map(Ok::<_, RulesetError>)
                .collect::<Vec<_>>()
        };
        // Everything but making character and block devices: a device node made inside a root
        // would open the hardware behind it (`mknod kmsg c 1 11`). FIFOs and sockets stay.
        let write = AccessFs::from_all(FS_ABI) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
        let mut writable = vec![(temp.to_owned(), false)];
        if containment.sandbox == ProgramSandbox::WorkspaceWrite {
            writable.extend(roots.iter().cloned());
        }
        let device: BitFlags<AccessFs> =
            make_bitflags!(AccessFs::{ReadFile | WriteFile | Truncate | IoctlDev});
        ruleset
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::ReadDir))?
            .add_rules(readable.paths.iter().map(|(_, fd, is_file)| {
                let access = if *is_file { read_file } else { read };
                Ok::<_, RulesetError>(PathBeneath::new(fd, access))
            }))?
            .add_rules(beneath(&roots, AccessFs::from_read(FS_ABI)))?
            .add_rules(path_beneath_rules(DEVICES, device))?
            .add_rules(beneath(&writable, write))
    }

    /// Spawns `command` from a thread of its own that first enters the domain of `ruleset`:
    /// Landlock, `no_new_privs` and capabilities belong to a thread, and a child starts with its
    /// creating thread's, so the program is contained from its first instruction, while
    /// flycode's other threads are not restricted at all. Unlike a hook between fork and exec,
    /// this lets the standard library start the program with `posix_spawn` (no fork: measured
    /// at a few hundred microseconds per run in a process of flycode's size) and needs no
    /// `unsafe`. The thread ends right after the spawn.
    pub(super) fn spawn_restricted(
        command: &mut std::process::Command,
        ruleset: RulesetCreated,
    ) -> std::io::Result<std::process::Child> {
        std::thread::scope(|scope| {
            let spawner = std::thread::Builder::new()
                .name("flycode-contain".to_owned())
                .spawn_scoped(scope, move || {
                    // Fail closed: a thread that may still hold a capability starts nothing.
                    super::super::privileges::drop_all()?;
                    match ruleset.restrict_self() {
                        Ok(status) if status.ruleset != landlock::RulesetStatus::NotEnforced => {
                            command.spawn()
                        }
                        _ => Err(std::io::Error::from_raw_os_error(
                            super::CONTAIN_FAILED_ERRNO,
                        )),
                    }
                })?;
            spawner.join().unwrap_or_else(|_| {
                Err(std::io::Error::other(
                    "the thread that starts the contained program stopped",
                ))
            })
        })
    }

    #[cfg(test)]
    #[allow(clippy::disallowed_methods)] // fixtures are made directly
    mod tests {
        use super::*;

        fn stamp_at(seconds: i64) -> Option<DirStamp> {
            Some(DirStamp {
                device: 1,
                inode: 2,
                modified: (seconds, 0),
                changed: (seconds, 0),
            })
        }

        #[test]
        fn a_listing_is_kept_only_when_every_directory_had_settled() {
            let dir = PathBuf::from("/d");
            assert!(settled(&[(dir.clone(), stamp_at(100))], 110));
            assert!(!settled(&[(dir.clone(), stamp_at(100))], 102));
            assert!(
                !settled(&[(dir, None)], 1000),
                "a directory that could not be read"
            );
        }

        #[test]
        fn a_directory_that_just_changed_is_listed_again_and_its_new_entries_readable() {
            let temp = tempfile::tempdir().unwrap();
            let base = std::fs::canonicalize(temp.path()).unwrap();
            let hidden = vec![base.join("hidden")];
            std::fs::create_dir(&hidden[0]).unwrap();
            std::fs::create_dir(base.join("before")).unwrap();
            let first = readable_rules(&hidden);
            std::fs::create_dir(base.join("after")).unwrap();
            let second = readable_rules(&hidden);
            assert!(
                !Arc::ptr_eq(&first, &second),
                "the fresh folder was listed again"
            );
            let listed: Vec<&PathBuf> = second.listed.iter().map(|(dir, _)| dir).collect();
            assert!(listed.contains(&&base), "{listed:?}");
            let readable = |rules: &ReadableRules, path: &Path| {
                rules.paths.iter().any(|(allowed, _, _)| allowed == path)
            };
            assert!(!readable(&first, &base.join("after")));
            assert!(readable(&second, &base.join("after")));
            assert!(readable(&second, &base.join("before")));
            assert!(!readable(&second, &hidden[0]));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use super::*;

    /// A fake tree: `/` holds bin (link), dev, etc, root, tmp; /root holds .config, .local, work;
    /// /root/.local holds share and state; /root/.local/state holds flycode and other;
    /// /root/.config holds flycode and git.
    fn list(dir: &Path) -> Vec<(OsString, bool)> {
        let entries: &[(&str, bool)] = match dir.to_str().unwrap() {
            "/" => &[
                ("bin", true),
                ("dev", false),
                ("etc", false),
                ("root", false),
                ("tmp", false),
            ],
            "/root" => &[
                (".config", false),
                (".local", false),
                ("work", false),
                ("l", true),
            ],
            "/root/.local" => &[("share", false), ("state", false)],
            "/root/.local/state" => &[("flycode", false), ("other", false)],
            "/root/.config" => &[("flycode", false), ("git", false)],
            other => panic!("{other} need not be listed"),
        };
        entries
            .iter()
            .map(|(name, link)| (OsString::from(name), *link))
            .collect()
    }

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn everything_is_readable_when_nothing_is_hidden() {
        assert_eq!(readable_set(&[], list), paths(&["/"]));
    }

    #[test]
    fn hidden_directories_are_cut_out_by_splitting_their_ancestors() {
        let hidden = paths(&[
            "/root/.local/state/flycode",
            "/root/.config/flycode",
            "/dev",
        ]);
        assert_eq!(
            readable_set(&hidden, list),
            paths(&[
                "/etc",
                "/root/.config/git",
                "/root/.local/share",
                "/root/.local/state/other",
                "/root/work",
                "/tmp",
            ])
        );
    }

    #[test]
    fn links_at_split_levels_are_left_out_and_hiding_the_root_hides_all() {
        let allowed = readable_set(&paths(&["/root/.config/flycode"]), list);
        assert!(!allowed.contains(&PathBuf::from("/bin")), "{allowed:?}");
        assert!(!allowed.contains(&PathBuf::from("/root/l")), "{allowed:?}");
        assert!(
            allowed.contains(&PathBuf::from("/root/.local")),
            "{allowed:?}"
        );
        assert!(readable_set(&paths(&["/"]), list).is_empty());
    }

    #[test]
    fn a_root_holding_a_hidden_directory_is_split_and_one_inside_it_stays_whole() {
        let hidden = paths(&["/root/.local/state/flycode"]);
        assert_eq!(
            allowed_beneath(Path::new("/root"), &hidden, list),
            paths(&[
                "/root/.config",
                "/root/.local/share",
                "/root/.local/state/other",
                "/root/work",
            ])
        );
        // Roots beside it, or inside it (a test's root in the state directory), are whole.
        assert_eq!(
            allowed_beneath(Path::new("/root/work"), &hidden, list),
            paths(&["/root/work"])
        );
        let inside = Path::new("/root/.local/state/flycode/ws");
        assert_eq!(allowed_beneath(inside, &hidden, list), vec![inside]);
        assert!(allowed_beneath(Path::new("/root/.local/state/flycode"), &hidden, list).is_empty());
    }

    #[test]
    fn a_hidden_path_that_does_not_exist_hides_nothing_else() {
        let allowed = readable_set(&paths(&["/root/.cache/flycode"]), list);
        assert_eq!(
            allowed,
            paths(&[
                "/dev",
                "/etc",
                "/root/.config",
                "/root/.local",
                "/root/work",
                "/tmp"
            ])
        );
    }

    #[test]
    fn programs_are_refused_only_where_the_settings_cannot_be_kept() {
        let linux = cfg!(target_os = "linux");
        let refused = |support, sandbox, network| refusal(support, sandbox, network).is_some();
        assert_eq!(
            refused(Support::Unavailable, ProgramSandbox::WorkspaceWrite, true),
            linux
        );
        assert_eq!(
            refused(Support::Unavailable, ProgramSandbox::ReadOnly, true),
            linux
        );
        assert!(!refused(Support::Unavailable, ProgramSandbox::Off, false));
        assert_eq!(
            refused(
                Support::NoNetworkRules,
                ProgramSandbox::WorkspaceWrite,
                false
            ),
            linux
        );
        assert!(!refused(
            Support::NoNetworkRules,
            ProgramSandbox::WorkspaceWrite,
            true
        ));
        assert!(!refused(Support::Full, ProgramSandbox::ReadOnly, false));
        let (_, advice) = refusal(Support::Unavailable, ProgramSandbox::ReadOnly, true)
            .unwrap_or(("", "process_sandbox = \"off\""));
        assert!(advice.contains("process_sandbox = \"off\""), "{advice}");
    }

    #[test]
    fn the_description_names_the_sandbox() {
        let off = describe(ProgramSandbox::Off, true);
        assert!(off.starts_with("none"), "{off}");
        if cfg!(target_os = "linux") && kernel_support() == Support::Full {
            let shown = describe(ProgramSandbox::WorkspaceWrite, false);
            assert!(shown.starts_with("Landlock: "), "{shown}");
            assert!(shown.ends_with("no network"), "{shown}");
            let shown = describe(ProgramSandbox::ReadOnly, true);
            assert!(shown.starts_with("Landlock, read-only"), "{shown}");
        }
    }
}
