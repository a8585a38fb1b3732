//! `{tree_info}`: a tree of each root for the tag dialect's prompt. The walk honours
//! `.gitignore`, `.ignore` and git's exclude files and skips hidden entries (the `ignore`
//! crate, as `fs.search` does), is capped in depth and entries, and never follows links. A root
//! that is a git repository adds its branch and status, read by `git status` run through the
//! sandbox's process runner, contained to the root with no network, and falling back to
//! `.git/HEAD` when git cannot run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::protocol::prompt::PromptLanguage;
use crate::sandbox::contain::{Containment, ProgramSandbox};
use crate::sandbox::{ProcessSpec, run_process};

/// How deep the tree goes below a root.
const MAX_DEPTH: usize = 3;
/// How many entries of one root are listed.
const MAX_ENTRIES: usize = 120;
/// How many changed files of `git status` are listed.
const MAX_STATUS_LINES: usize = 20;

/// The `{tree_info}` section for `roots`.
pub(super) fn tree_info(language: PromptLanguage, roots: &[PathBuf]) -> String {
    let heading = match language {
        PromptLanguage::Zh => "**工作目录（允许访问的根目录，第一个为当前目录）：**",
        PromptLanguage::En => {
            "**Working folders (the allowed roots; the first is the current folder):**"
        }
    };
    let mut body = String::new();
    for root in roots {
        body.push_str(&root_section(language, root));
    }
    let fence = crate::protocol::result::backtick_fence_for(&body);
    format!("{heading}\n{fence}\n{}{fence}", body)
}

fn root_section(language: PromptLanguage, root: &Path) -> String {
    let mut out = format!("{}/\n", printable(&root.display().to_string()));
    let (entries, more) = entries(root);
    for (depth, name, is_dir) in &entries {
        let slash = if *is_dir { "/" } else { "" };
        out.push_str(&format!("{}{name}{slash}\n", "  ".repeat(*depth)));
    }
    if more > 0 {
        out.push_str(&match language {
            PromptLanguage::Zh => format!("  …（另有 {more} 项未列出）\n"),
            PromptLanguage::En => format!("  … ({more} more entries not listed)\n"),
        });
    }
    if let Some(git) = git_state(root) {
        let (branch_word, clean, changed) = match language {
            PromptLanguage::Zh => ("git 分支", "工作区干净", "未提交的改动"),
            PromptLanguage::En => ("git branch", "working tree clean", "uncommitted changes"),
        };
        out.push_str(&format!("[{branch_word}: {}]\n", printable(&git.branch)));
        match &git.status {
            Some(lines) if lines.is_empty() => out.push_str(&format!("[{clean}]\n")),
            Some(lines) => {
                out.push_str(&format!("[{changed}: {}]\n", lines.len()));
                for line in lines.iter().take(MAX_STATUS_LINES) {
                    out.push_str(&format!("  {}\n", printable(line)));
                }
            }
            None => {}
        }
    }
    out
}

/// The entries below `root` as (depth from 1, name, is a folder), and how many more were left
/// out.
fn entries(root: &Path) -> (Vec<(usize, String, bool)>, usize) {
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .follow_links(false)
        .max_depth(Some(MAX_DEPTH))
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let mut listed = Vec::new();
    let mut more = 0;
    for entry in walker.flatten() {
        let depth = entry.depth();
        if depth == 0 {
            continue;
        }
        if listed.len() >= MAX_ENTRIES {
            more += 1;
            continue;
        }
        let name = printable(&entry.file_name().to_string_lossy());
        let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
        listed.push((depth, name, is_dir));
    }
    (listed, more)
}

/// What `git status` is run with so that the repository's own configuration runs nothing: no
/// fsmonitor (`core.fsmonitor` names a program git would start, or the built-in daemon, which
/// keeps running), no hooks, no untracked cache written. Given as `-c`, which wins over every
/// configuration file and reaches any git that git starts.
const GIT_GUARDS: [&str; 6] = [
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.untrackedCache=false",
];

/// Variables of flycode's environment that would point git at another repository or feed it
/// configuration: removed, so the status is the root's, read under [`GIT_GUARDS`] alone.
const GIT_REDIRECTS: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG",
];

/// A repository's branch and, when git could run, its changed files.
struct GitState {
    branch: String,
    status: Option<Vec<String>>,
}

fn git_state(root: &Path) -> Option<GitState> {
    crate::sandbox::host::symlink_metadata(&root.join(".git")).ok()?;
    if let Some(state) = git_status(root) {
        return Some(state);
    }
    let head = crate::sandbox::host::read_to_string(&root.join(".git").join("HEAD")).ok()?;
    let branch = head
        .trim()
        .strip_prefix("ref: refs/heads/")
        .map_or_else(|| "(detached HEAD)".to_owned(), str::to_owned);
    Some(GitState {
        branch,
        status: None,
    })
}

fn git_status(root: &Path) -> Option<GitState> {
    let spec = ProcessSpec {
        program: "git".to_owned(),
        args: GIT_GUARDS
            .iter()
            .chain(&[
                "--no-optional-locks",
                "status",
                "--porcelain=v1",
                "--branch",
            ])
            .map(|arg| (*arg).to_owned())
            .collect(),
        cwd: root.to_path_buf(),
        env_set: [
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_TERMINAL_PROMPT", "0"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .to_vec(),
        env_remove: flycode_core::tools::Limits::default()
            .secret_names()
            .into_iter()
            .chain(GIT_REDIRECTS.map(str::to_owned))
            .collect(),
        timeout: Duration::from_secs(5),
        output_cap: 64 * 1024,
        cancel: None,
        containment: Containment::new(ProgramSandbox::ReadOnly, false, &[root.to_path_buf()]),
    };
    let outcome = run_process(&spec).ok()?;
    if outcome.exit_code != Some(0) {
        return None;
    }
    let text = String::from_utf8_lossy(&outcome.stdout.head).into_owned();
    let mut lines = text.lines();
    let first = lines.next()?.strip_prefix("## ")?;
    let branch = first
        .strip_prefix("No commits yet on ")
        .unwrap_or(first)
        .split("...")
        .next()
        .unwrap_or_default()
        .to_owned();
    let branch = if branch.starts_with("HEAD (no branch)") {
        "(detached HEAD)".to_owned()
    } else {
        branch
    };
    let status = lines.map(str::to_owned).collect();
    Some(GitState {
        branch,
        status: Some(status),
    })
}

/// `text` with control characters shown as `?`: a file name never breaks the prompt's lines.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // fixtures are made directly, outside the sandbox
mod tests {
    use super::*;

    #[test]
    fn the_tree_honours_ignore_files_and_hides_hidden_entries() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/main.rs"), "").unwrap();
        std::fs::write(root.join(".ignore"), "skipped.txt\n").unwrap();
        std::fs::write(root.join("skipped.txt"), "").unwrap();
        std::fs::write(root.join("bad\nname"), "").unwrap();
        let info = tree_info(PromptLanguage::En, &[root]);
        assert!(info.contains("  src/\n    main.rs\n"), "{info}");
        assert!(
            !info.contains("skipped.txt") && !info.contains(".ignore"),
            "{info}"
        );
        assert!(info.contains("bad?name"), "{info}");
    }
}
