//! One step below an open directory handle, never following a link and never blocking: what a
//! walk that must stay inside the roots opens (fs.search). A directory swapped for a link after it
//! was listed fails to open here instead of leading outside; a directory already open stays the
//! one that was checked, whatever its name leads to now.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;

use cap_std::fs::Dir;

/// Opens the directory `name` (one component) of `dir`, refusing a link.
#[cfg(unix)]
pub fn open_subdir(dir: &Dir, name: &OsStr) -> io::Result<Dir> {
    use rustix::fs::{Mode, OFlags, openat};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = openat(dir, name, flags, Mode::empty())?;
    Ok(Dir::from_std_file(File::from(fd)))
}

/// Opens the directory `name` (one component) of `dir`, never leaving it.
#[cfg(not(unix))]
pub fn open_subdir(dir: &Dir, name: &OsStr) -> io::Result<Dir> {
    dir.open_dir(name)
}

/// Opens the file `name` (one component) of `dir` for reading, refusing a link and never
/// blocking (a FIFO opens at once); the caller checks what the metadata says it is.
#[cfg(unix)]
pub fn open_file(dir: &Dir, name: &OsStr) -> io::Result<(File, Metadata)> {
    use rustix::fs::{Mode, OFlags, openat};
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = File::from(openat(dir, name, flags, Mode::empty())?);
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// Opens the file `name` (one component) of `dir` for reading, never leaving it.
#[cfg(not(unix))]
pub fn open_file(dir: &Dir, name: &OsStr) -> io::Result<(File, Metadata)> {
    let file = dir
        .open_with(name, &super::files::read_options())?
        .into_std();
    let meta = file.metadata()?;
    Ok((file, meta))
}
