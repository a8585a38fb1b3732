//! Why the sandbox refused or failed an operation, each with the contract's error code.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

use flycode_protocol::ErrorCode;

/// The operating system's "too many levels of symbolic links".
const ELOOP: i32 = if cfg!(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd"
)) {
    62
} else {
    40
};

/// A sandbox refusal or failure; the message names the path and what to do.
#[derive(Debug, Error)]
pub enum SandboxError {
    /// The resolved path lies outside every allowed root.
    #[error("{path} is outside the allowed roots ({roots}); use a path inside one of them")]
    OutsideRoots {
        /// The path as given.
        path: String,
        /// The roots, for the message.
        roots: String,
    },
    /// A path of the other platform's form.
    #[error(
        "{path} is a Windows path, but this machine is not Windows; use a path of the form /..."
    )]
    UnsupportedPath {
        /// The path as given.
        path: String,
    },
    /// A path that is not absolute.
    #[error("{path} is not an absolute path")]
    RelativePath {
        /// The path as given.
        path: String,
    },
    /// A path no file can have (a NUL byte).
    #[error("{path:?} contains a NUL byte, which no file name can hold")]
    InvalidPath {
        /// The path as given.
        path: String,
    },
    /// Nothing at the path (or a missing directory on the way).
    #[error("{path} does not exist")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A component on the way is not a directory.
    #[error("{path}: {component} is not a directory")]
    NotDirectory {
        /// The path as given.
        path: String,
        /// The offending component.
        component: PathBuf,
    },
    /// A FIFO, socket or device: opening it could block or never end.
    #[error(
        "{path} is a {kind}, not a regular file; flycode never opens FIFOs, sockets or devices"
    )]
    SpecialFile {
        /// The path as given.
        path: String,
        /// What it is: "FIFO", "socket", "device".
        kind: &'static str,
    },
    /// A directory where a file is needed.
    #[error("{path} is a directory")]
    IsDirectory {
        /// The path as given.
        path: String,
    },
    /// Policy forbids the operation.
    #[error("{path}: {reason}")]
    Denied {
        /// The path as given.
        path: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The path exists and must not.
    #[error("{path} already exists")]
    AlreadyExists {
        /// The path as given.
        path: String,
    },
    /// Symbolic links that never end.
    #[error("{path}: too many levels of symbolic links (a link loop?)")]
    LinkLoop {
        /// The path as given.
        path: String,
    },
    /// The operating system refused access.
    #[error("{path}: permission denied")]
    PermissionDenied {
        /// The path as given.
        path: String,
    },
    /// Any other input/output failure.
    #[error("{path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The failure.
        source: io::Error,
    },
}

impl SandboxError {
    /// The contract's code for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            SandboxError::OutsideRoots { .. } => ErrorCode::OutsideRoots,
            SandboxError::UnsupportedPath { .. } => ErrorCode::UnsupportedPath,
            SandboxError::RelativePath { .. } => ErrorCode::RelativePath,
            SandboxError::InvalidPath { .. } => ErrorCode::InvalidArgs,
            SandboxError::NotFound { .. } => ErrorCode::NotFound,
            SandboxError::NotDirectory { .. } => ErrorCode::NotDirectory,
            SandboxError::SpecialFile { .. } => ErrorCode::SpecialFile,
            SandboxError::IsDirectory { .. } => ErrorCode::IsDirectory,
            SandboxError::Denied { .. } => ErrorCode::DeniedByPolicy,
            SandboxError::AlreadyExists { .. } => ErrorCode::AlreadyExists,
            SandboxError::PermissionDenied { .. } => ErrorCode::PermissionDenied,
            SandboxError::LinkLoop { .. } | SandboxError::Io { .. } => ErrorCode::IoError,
        }
    }

    /// Maps an operating-system error on `path` to the closest variant.
    pub fn from_io(path: &str, error: io::Error) -> SandboxError {
        let path = path.to_owned();
        match error.kind() {
            io::ErrorKind::NotFound => SandboxError::NotFound { path },
            io::ErrorKind::PermissionDenied => SandboxError::PermissionDenied { path },
            io::ErrorKind::AlreadyExists => SandboxError::AlreadyExists { path },
            io::ErrorKind::NotADirectory => SandboxError::NotDirectory {
                component: PathBuf::from(&path),
                path,
            },
            io::ErrorKind::IsADirectory => SandboxError::IsDirectory { path },
            _ if error.raw_os_error() == Some(ELOOP) => SandboxError::LinkLoop { path },
            _ => SandboxError::Io {
                path,
                source: error,
            },
        }
    }
}
