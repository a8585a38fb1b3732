//! flycode's own files and programs, outside the allowed roots: its configuration, the inputs
//! named on the command line (replies, transcripts, task and prompt files), the inbox folder, the
//! controlling terminal, and itself started again. Not for the model's calls: those go through
//! [`Sandbox`](super::Sandbox), inside the roots.
//!
//! The sandbox is the one module that touches the file system or starts programs (`clippy.toml`
//! forbids `std::fs` and `std::process::Command` elsewhere), so what the rest of flycode needs of
//! its own files is here, each a thin, named door.

use std::fs::{File, Metadata, ReadDir};
use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The whole file as text (a configuration, a task, a role or prompt file).
pub fn read_to_string(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path)
}

/// The whole file as bytes (a reply named on the command line or dropped into the inbox).
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// The file, open for reading (a transcript, streamed).
pub fn open(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// `path` with every link and `..` resolved (a path the caller gives with its own authority,
/// outside any sandbox: the search engine's benchmarks and tests).
pub fn canonicalize(path: &Path) -> io::Result<std::path::PathBuf> {
    std::fs::canonicalize(path)
}

/// The entries of a folder (the inbox).
pub fn read_dir(path: &Path) -> io::Result<ReadDir> {
    std::fs::read_dir(path)
}

/// Creates a folder and its parents (the default inbox, the state directory).
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    std::fs::create_dir_all(path)
}

/// A lock file of flycode's own, open for reading and writing, made if missing, never emptied
/// here (the lock of a watched source, in the state directory).
pub fn open_lock_file(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// What `path` itself is, its last component not followed (is `--transcript` a regular file?).
pub fn symlink_metadata(path: &Path) -> io::Result<Metadata> {
    std::fs::symlink_metadata(path)
}

/// The controlling terminal, for reading and writing (the approval question: never standard
/// input, which may carry the reply).
pub fn open_terminal() -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
}

/// Starts flycode itself again as `flycode ARG`, detached from the terminal's process group (Ctrl-C
/// there is not for it), with a pipe to its standard input and its output discarded: a helper that
/// outlives this command (`prompt --copy` leaves one holding the clipboard, as xclip does).
pub fn spawn_detached_self(arg: &str) -> io::Result<Child> {
    let program = std::env::current_exe()?;
    let mut command = Command::new(program);
    command
        .arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    super::process::spawn_apart(|| command.spawn())
}
