//! A setting as the configuration layers leave it, and where its value comes from
//! (PROTOCOL.md §10 "Configuration"). [`super::layers`] merges the files into these, and the
//! judgement of whether an untrusted project file would loosen safety reads them: a file of its
//! own, so that both use it and neither uses the other.

use std::path::PathBuf;

/// Where a setting's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingSource {
    /// flycode's default.
    Default,
    /// A line of a file.
    File {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
    },
    /// An environment variable.
    Variable(String),
    /// A command-line flag.
    Flag(String),
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingSource::Default => f.write_str("default"),
            SettingSource::File { path, line } => write!(f, "{}:{line}", path.display()),
            SettingSource::Variable(name) => write!(f, "variable {name}"),
            SettingSource::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// A setting as the layers left it.
#[derive(Clone, Debug, PartialEq)]
pub struct AppliedSetting {
    /// The value (for `protected` and `secret_env`, every layer's items together).
    pub value: toml::Value,
    /// The lines it comes from (several for the lists that add up).
    pub sources: Vec<SettingSource>,
    /// The folder of the file that set it: relative paths in it are relative to this.
    pub base: PathBuf,
}
