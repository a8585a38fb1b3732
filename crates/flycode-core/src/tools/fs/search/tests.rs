//! The engine against real files in temporary directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime};

use tempfile::TempDir;

use super::{MAX_LINE_CHARS, SearchError, SearchLine, SearchRequest, search};
use crate::protocol::ErrorCode;

/// A temporary tree made of `(relative path, contents)` pairs; directories are created on the way.
fn tree(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, contents) in files {
        write(dir.path(), path, contents.as_bytes());
    }
    dir
}

fn write(root: &Path, path: &str, contents: &[u8]) -> PathBuf {
    let path = root.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, contents).unwrap();
    path
}

/// `(path relative to root, line number, is_context)` for every output line.
fn found(root: &Path, request: &SearchRequest) -> Vec<(String, u64, bool)> {
    let out = search(request).unwrap();
    out.lines
        .iter()
        .map(|l| {
            let rel = l.path.strip_prefix(root).unwrap_or(&l.path);
            (rel.display().to_string(), l.line_number, l.is_context)
        })
        .collect()
}

/// The relative paths of the files with matches, in output order, without repeats.
fn files(root: &Path, request: &SearchRequest) -> Vec<String> {
    let mut names: Vec<String> = found(root, request).into_iter().map(|f| f.0).collect();
    names.dedup();
    names
}

#[test]
fn literal_query_has_no_regex_semantics() {
    let dir = tree(&[("a.txt", "a.c\nabc\n(x+\n")]);
    let request = SearchRequest::new(dir.path(), "a.c");
    assert_eq!(found(dir.path(), &request), [("a.txt".into(), 1, false)]);
    let request = SearchRequest::new(dir.path(), "(x+");
    assert_eq!(found(dir.path(), &request), [("a.txt".into(), 3, false)]);
}

#[test]
fn regex_query_matches_the_pattern() {
    let dir = tree(&[("a.txt", "a.c\nabc\nxyz\n")]);
    let request = SearchRequest {
        regex: true,
        ..SearchRequest::new(dir.path(), "^a.c$")
    };
    let lines = found(dir.path(), &request);
    assert_eq!(
        lines,
        [("a.txt".into(), 1, false), ("a.txt".into(), 2, false)]
    );
}

#[test]
fn invalid_regex_is_invalid_args_with_the_regex_message() {
    let dir = tree(&[("a.txt", "x\n")]);
    let request = SearchRequest {
        regex: true,
        ..SearchRequest::new(dir.path(), "a(b")
    };
    let err = search(&request).unwrap_err();
    assert!(matches!(err, SearchError::InvalidRegex { .. }), "{err:?}");
    assert_eq!(err.code(), ErrorCode::InvalidArgs);
    assert!(err.to_string().contains("unclosed group"), "{err}");
}

#[test]
fn query_with_a_line_break_is_invalid_args() {
    let dir = tree(&[("a.txt", "x\n")]);
    let err = search(&SearchRequest::new(dir.path(), "a\nb")).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgs);
}

#[test]
fn invalid_glob_is_invalid_args() {
    let dir = tree(&[("a.txt", "x\n")]);
    let request = SearchRequest {
        glob: Some("a[".into()),
        ..SearchRequest::new(dir.path(), "x")
    };
    let err = search(&request).unwrap_err();
    assert!(matches!(err, SearchError::InvalidGlob { .. }), "{err:?}");
    assert_eq!(err.code(), ErrorCode::InvalidArgs);
}

#[test]
fn missing_path_is_not_found() {
    let dir = tree(&[]);
    let err = search(&SearchRequest::new(dir.path().join("nope"), "x")).unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
}

#[test]
fn context_lines_render_with_separators_like_ripgrep() {
    let text = "1\n2 hit\n3\n4\n5\n6\n7 hit\n8 hit\n9\n";
    let dir = tree(&[("a.txt", text), ("b.txt", "hit\n")]);
    let request = SearchRequest {
        context_lines: 1,
        ..SearchRequest::new(dir.path(), "hit")
    };
    let out = search(&request).unwrap();
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    let (a, b) = (a.display(), b.display());
    let expected = format!(
        "{a}-1-1\n{a}:2:2 hit\n{a}-3-3\n--\n{a}-6-6\n{a}:7:7 hit\n{a}:8:8 hit\n{a}-9-9\n--\n{b}:1:hit\n"
    );
    assert_eq!(out.render(), expected);
    assert_eq!((out.files_matched, out.files_searched), (2, 2));
}

#[test]
fn no_separators_without_context() {
    let dir = tree(&[("a.txt", "hit\nx\nhit\n")]);
    let out = search(&SearchRequest::new(dir.path(), "hit")).unwrap();
    let a = dir.path().join("a.txt");
    assert_eq!(out.render(), format!("{0}:1:hit\n{0}:3:hit\n", a.display()));
}

#[test]
fn limit_stops_and_sets_truncated() {
    let dir = tree(&[("a.txt", "hit\nhit\nhit\n"), ("b.txt", "hit\n")]);
    let request = SearchRequest {
        limit: 2,
        ..SearchRequest::new(dir.path(), "hit")
    };
    let out = search(&request).unwrap();
    assert_eq!(out.lines.len(), 2);
    assert!(out.truncated);
    let request = SearchRequest {
        limit: 3,
        ..request
    };
    let out = search(&request).unwrap();
    assert_eq!(out.lines.len(), 3);
    assert!(out.truncated, "b.txt still had a match");
    assert_eq!(out.files_matched, 1);
}

#[test]
fn exact_limit_is_not_truncated() {
    let dir = tree(&[
        ("a.txt", "hit\nhit\n"),
        ("b.txt", "hit\n"),
        ("c.txt", "none\n"),
    ]);
    let request = SearchRequest {
        limit: 3,
        ..SearchRequest::new(dir.path(), "hit")
    };
    let out = search(&request).unwrap();
    assert_eq!(out.lines.len(), 3);
    assert!(!out.truncated);
    assert_eq!(out.files_searched, 3);
}

#[test]
fn context_lines_do_not_count_toward_the_limit() {
    let dir = tree(&[("a.txt", "0\nhit\n2\n3\n4\nhit\n6\n")]);
    let request = SearchRequest {
        limit: 1,
        context_lines: 1,
        ..SearchRequest::new(dir.path(), "hit")
    };
    let out = search(&request).unwrap();
    let lines: Vec<_> = out
        .lines
        .iter()
        .map(|l| (l.line_number, l.is_context))
        .collect();
    assert_eq!(lines, [(1, true), (2, false), (3, true)]);
    assert!(out.truncated);
}

#[test]
fn limit_keeps_the_first_matches_in_path_order_across_many_files() {
    let files: Vec<(String, String)> = (0..600)
        .map(|i| (format!("d{}/f{i:04}.txt", i % 7), format!("x\nhit {i}\n")))
        .collect();
    let pairs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let dir = tree(&pairs);
    let request = SearchRequest {
        limit: 25,
        ..SearchRequest::new(dir.path(), "hit")
    };
    let out = search(&request).unwrap();
    let mut all: Vec<PathBuf> = files.iter().map(|(p, _)| dir.path().join(p)).collect();
    all.sort();
    let got: Vec<PathBuf> = out.lines.iter().map(|l| l.path.clone()).collect();
    assert_eq!(got, all[..25]);
    assert!(out.truncated);
    assert_eq!(out.files_searched, 26);
}

#[test]
fn order_is_sorted_and_the_same_on_every_run() {
    let files: Vec<(String, &str)> = (0..300)
        .map(|i| {
            (
                format!("{}/{}/n{}.rs", i % 5, i % 11, i * 7919 % 1000),
                "fn hit() {}\n",
            )
        })
        .collect();
    let pairs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    let dir = tree(&pairs);
    let request = SearchRequest {
        limit: 10_000,
        ..SearchRequest::new(dir.path(), "hit")
    };
    let first = search(&request).unwrap();
    let paths: Vec<&PathBuf> = first.lines.iter().map(|l| &l.path).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    for _ in 0..5 {
        assert_eq!(search(&request).unwrap(), first);
    }
}

#[test]
fn gitignore_applies_inside_a_git_repository() {
    let dir = tree(&[
        (".gitignore", "ignored.txt\nbuild/\n"),
        ("ignored.txt", "hit\n"),
        ("build/out.txt", "hit\n"),
        ("kept.txt", "hit\n"),
    ]);
    fs::create_dir(dir.path().join(".git")).unwrap();
    let request = SearchRequest::new(dir.path(), "hit");
    assert_eq!(files(dir.path(), &request), ["kept.txt"]);
}

#[test]
fn gitignore_outside_a_git_repository_is_not_applied_like_ripgrep() {
    let dir = tree(&[(".gitignore", "ignored.txt\n"), ("ignored.txt", "hit\n")]);
    let request = SearchRequest::new(dir.path(), "hit");
    assert_eq!(files(dir.path(), &request), ["ignored.txt"]);
}

#[test]
fn dot_ignore_and_rgignore_apply_everywhere() {
    let dir = tree(&[
        (".ignore", "a.txt\n"),
        ("sub/.rgignore", "b.txt\n"),
        ("a.txt", "hit\n"),
        ("sub/b.txt", "hit\n"),
        ("sub/c.txt", "hit\n"),
    ]);
    let request = SearchRequest::new(dir.path(), "hit");
    assert_eq!(files(dir.path(), &request), ["sub/c.txt"]);
}

#[test]
fn hidden_files_and_directories_are_skipped() {
    let dir = tree(&[
        (".hidden.txt", "hit\n"),
        (".config/x.txt", "hit\n"),
        ("visible.txt", "hit\n"),
    ]);
    let request = SearchRequest::new(dir.path(), "hit");
    assert_eq!(files(dir.path(), &request), ["visible.txt"]);
}

#[test]
fn binary_files_are_skipped() {
    let dir = tree(&[("text.txt", "hit\n")]);
    write(dir.path(), "bin.dat", b"hit\n\0\x01\x02hit\n");
    // A NUL byte far beyond the first buffer: skipped whole, no early matches shown.
    let mut late = b"hit\n".to_vec();
    late.extend_from_slice(&b"filler\n".repeat(100_000));
    late.extend_from_slice(b"\0");
    write(dir.path(), "late.dat", &late);
    let out = search(&SearchRequest::new(dir.path(), "hit")).unwrap();
    let names: Vec<_> = out
        .lines
        .iter()
        .map(|l| l.path.file_name().unwrap())
        .collect();
    assert_eq!(names, ["text.txt"]);
    assert_eq!(out.binary_files, 2);
}

#[test]
fn limit_reached_before_a_late_nul_byte_shows_the_matches_like_ripgrep() {
    let mut late = b"hit\n".repeat(3);
    late.extend_from_slice(&b"filler\n".repeat(100_000));
    late.extend_from_slice(b"hit\n\0");
    let dir = tree(&[]);
    write(dir.path(), "late.dat", &late);
    let request = SearchRequest {
        limit: 2,
        ..SearchRequest::new(dir.path(), "hit")
    };
    let out = search(&request).unwrap();
    assert_eq!(out.lines.len(), 2);
    assert!(out.truncated);
}

#[cfg(unix)]
#[test]
fn symbolic_links_out_of_the_directory_are_not_followed() {
    let outside = tree(&[("secret.txt", "hit\n"), ("dir/secret.txt", "hit\n")]);
    let dir = tree(&[("inside.txt", "hit\n")]);
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        dir.path().join("link.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path().join("dir"), dir.path().join("linkdir")).unwrap();
    let out = search(&SearchRequest::new(dir.path(), "hit")).unwrap();
    assert_eq!(out.lines.len(), 1);
    assert_eq!(out.lines[0].path, dir.path().join("inside.txt"));
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// Runs `search` on another thread and fails instead of hanging if it blocks.
#[cfg(unix)]
fn search_within_timeout(request: SearchRequest) -> Result<super::SearchOutput, SearchError> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(search(&request)));
    rx.recv_timeout(Duration::from_secs(20))
        .expect("search blocked on a FIFO")
}

#[cfg(unix)]
#[test]
fn fifo_is_skipped_without_blocking() {
    let dir = tree(&[("a.txt", "hit\n")]);
    mkfifo(&dir.path().join("pipe.txt"));
    let out = search_within_timeout(SearchRequest::new(dir.path(), "hit")).unwrap();
    assert_eq!(out.lines.len(), 1);
    assert_eq!(out.files_searched, 1);
}

#[cfg(unix)]
#[test]
fn fifo_as_the_search_path_is_special_file() {
    let dir = tree(&[]);
    let pipe = dir.path().join("pipe");
    mkfifo(&pipe);
    let err = search_within_timeout(SearchRequest::new(&pipe, "hit")).unwrap_err();
    assert_eq!(err.code(), ErrorCode::SpecialFile);
}

#[test]
fn glob_matches_the_path_relative_to_the_search_path() {
    let dir = tree(&[
        ("src/a.ts", "hit\n"),
        ("src/deep/b.ts", "hit\n"),
        ("lib/c.ts", "hit\n"),
        ("src/d.rs", "hit\n"),
    ]);
    let request = SearchRequest {
        glob: Some("src/**/*.ts".into()),
        ..SearchRequest::new(dir.path(), "hit")
    };
    assert_eq!(files(dir.path(), &request), ["src/a.ts", "src/deep/b.ts"]);
    let request = SearchRequest {
        glob: Some("*.ts".into()),
        ..request
    };
    assert_eq!(
        files(dir.path(), &request),
        ["lib/c.ts", "src/a.ts", "src/deep/b.ts"]
    );
    let request = SearchRequest {
        glob: Some("!*.ts".into()),
        ..request
    };
    assert_eq!(files(dir.path(), &request), ["src/d.rs"]);
}

#[test]
fn extensions_filter_with_or_without_a_dot() {
    let dir = tree(&[
        ("a.ts", "hit\n"),
        ("b.tsx", "hit\n"),
        ("c.rs", "hit\n"),
        ("d.TS", "hit\n"),
        ("ts", "hit\n"),
    ]);
    let request = SearchRequest {
        extensions: vec!["ts".into(), ".tsx".into()],
        ..SearchRequest::new(dir.path(), "hit")
    };
    assert_eq!(files(dir.path(), &request), ["a.ts", "b.tsx"]);
}

#[test]
fn size_filters_are_inclusive() {
    let dir = tree(&[
        ("small.txt", "hit\n"),
        ("mid.txt", "hit 12345\n"),
        ("big.txt", &"hit\n".repeat(100)),
    ]);
    let request = SearchRequest {
        min_bytes: Some(5),
        max_bytes: Some(10),
        ..SearchRequest::new(dir.path(), "hit")
    };
    assert_eq!(files(dir.path(), &request), ["mid.txt"]);
    let request = SearchRequest {
        min_bytes: Some(4),
        max_bytes: Some(4),
        ..request
    };
    assert_eq!(files(dir.path(), &request), ["small.txt"]);
}

#[test]
fn mtime_filters_are_inclusive() {
    let dir = tree(&[
        ("old.txt", "hit\n"),
        ("mid.txt", "hit\n"),
        ("new.txt", "hit\n"),
    ]);
    let day = |d: &str| super::parse_rfc3339_bound(d, false).unwrap();
    for (name, date) in [
        ("old.txt", "2020-01-01"),
        ("mid.txt", "2023-06-15"),
        ("new.txt", "2026-01-31"),
    ] {
        let time = filetime::FileTime::from_system_time(day(date));
        filetime::set_file_mtime(dir.path().join(name), time).unwrap();
    }
    let request = SearchRequest {
        mtime_from: Some(day("2023-06-15")),
        mtime_to: Some(super::parse_rfc3339_bound("2023-06-15", true).unwrap()),
        ..SearchRequest::new(dir.path(), "hit")
    };
    assert_eq!(files(dir.path(), &request), ["mid.txt"]);
    let request = SearchRequest {
        mtime_from: Some(day("2023-01-01")),
        mtime_to: None,
        ..request
    };
    assert_eq!(files(dir.path(), &request), ["mid.txt", "new.txt"]);
    let request = SearchRequest {
        mtime_from: None,
        mtime_to: Some(SystemTime::UNIX_EPOCH),
        ..request
    };
    assert!(files(dir.path(), &request).is_empty());
}

#[test]
fn single_file_search_uses_its_absolute_path() {
    let dir = tree(&[("one.txt", "x\nhit\n"), ("two.txt", "hit\n")]);
    let file = dir.path().join("one.txt");
    let out = search(&SearchRequest::new(&file, "hit")).unwrap();
    assert_eq!(
        out.lines,
        [SearchLine {
            path: file.clone(),
            line_number: 2,
            text: "hit".into(),
            is_context: false
        }]
    );
    assert_eq!(out.render(), format!("{}:2:hit\n", file.display()));
}

#[test]
fn single_file_is_searched_even_if_hidden_but_filters_apply() {
    let dir = tree(&[(".env", "hit\n")]);
    let file = dir.path().join(".env");
    assert_eq!(
        search(&SearchRequest::new(&file, "hit"))
            .unwrap()
            .lines
            .len(),
        1
    );
    let request = SearchRequest {
        extensions: vec!["rs".into()],
        ..SearchRequest::new(&file, "hit")
    };
    assert!(search(&request).unwrap().lines.is_empty());
    let request = SearchRequest {
        glob: Some("*.rs".into()),
        ..SearchRequest::new(&file, "hit")
    };
    assert!(search(&request).unwrap().lines.is_empty());
}

#[test]
fn long_lines_are_cut_with_a_marker_and_crlf_is_dropped() {
    let long = format!("hit{}\r\n", "é".repeat(MAX_LINE_CHARS + 500));
    let dir = tree(&[("a.txt", &long), ("b.txt", "hit\r\n")]);
    let out = search(&SearchRequest::new(dir.path(), "hit")).unwrap();
    let text = &out.lines[0].text;
    assert!(text.starts_with("hité"));
    assert!(
        text.ends_with(" [... 503 more characters cut]"),
        "{}",
        &text[text.len() - 40..]
    );
    assert_eq!(
        text.chars().count(),
        MAX_LINE_CHARS + " [... 503 more characters cut]".len()
    );
    assert_eq!(out.lines[1].text, "hit");
}

#[test]
fn invalid_utf8_is_replaced_not_an_error() {
    let dir = tree(&[]);
    write(dir.path(), "a.txt", b"hit \xff\xfe end\n");
    let out = search(&SearchRequest::new(dir.path(), "hit")).unwrap();
    assert_eq!(out.lines[0].text, "hit \u{fffd}\u{fffd} end");
}

/// The files holding `hit` that `ignore`'s own walker picks, configured as ripgrep (and the engine before it walked
/// through handles) configures it, in its order.
fn walker_files(root: &Path, glob: Option<&str>) -> Vec<PathBuf> {
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .standard_filters(true)
        .require_git(true)
        .follow_links(false)
        .add_custom_ignore_filename(".rgignore")
        .sort_by_file_name(|a, b| a.cmp(b));
    if let Some(glob) = glob {
        let mut overrides = ignore::overrides::OverrideBuilder::new(root);
        overrides.add(glob).unwrap();
        builder.overrides(overrides.build().unwrap());
    }
    builder
        .build()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        // Only files holding a match show in the engine's output.
        .filter(|p| fs::read_to_string(p).unwrap().contains("hit"))
        .collect()
}

/// The files the engine searched (every file holds a match), in its order.
fn engine_files(root: &Path, glob: Option<&str>) -> Vec<PathBuf> {
    let request = SearchRequest {
        glob: glob.map(str::to_owned),
        limit: usize::MAX,
        ..SearchRequest::new(root, "hit")
    };
    let mut paths: Vec<PathBuf> = search(&request)
        .unwrap()
        .lines
        .into_iter()
        .map(|l| l.path)
        .collect();
    paths.dedup();
    paths
}

#[test]
fn ignore_rules_and_order_are_those_of_ignores_own_walker() {
    let hit = "hit\n";
    let dir = tree(&[
        (".ignore", "parent-ignored.txt\n"),
        (".gitignore", "normal.txt\n"),
        ("repo/.git/info/exclude", "excluded.txt\n"),
        (
            "repo/.gitignore",
            "*.log\n!keep.log\nbuild/\n/anchored.txt\nsub/**/deep.txt\n",
        ),
        ("repo/.ignore", "!.hidden-kept\nby-ignore.txt\n"),
        ("repo/.rgignore", "!by-ignore.txt\nby-rgignore.txt\n"),
        ("repo/a.log", hit),
        ("repo/keep.log", hit),
        ("repo/excluded.txt", hit),
        ("repo/anchored.txt", hit),
        ("repo/normal.txt", hit),
        ("repo/parent-ignored.txt", hit),
        ("repo/.hidden-kept", hit),
        ("repo/.hidden-dropped", hit),
        ("repo/by-ignore.txt", hit),
        ("repo/by-rgignore.txt", hit),
        ("repo/build/out.txt", hit),
        ("repo/sub/.gitignore", "!a.log\n"),
        ("repo/sub/a.log", hit),
        ("repo/sub/b.log", hit),
        ("repo/sub/anchored.txt", hit),
        ("repo/sub/deep.txt", hit),
        ("repo/sub/x/deep.txt", hit),
        ("repo/sub/build/y.txt", hit),
        ("repo/nested/.gitignore", "n.txt\n"),
        ("repo/nested/n.txt", hit),
        ("repo/nested/a.log", hit),
        ("repo/a-b.txt", hit),
        ("repo/a/x.txt", hit),
        ("repo/x.d/x.txt", hit),
        ("repo/x/x.txt", hit),
        ("repo/.config/c.txt", hit),
        ("plain/.gitignore", "g.txt\n"),
        ("plain/g.txt", hit),
        ("plain/.ignore", "i.txt\n"),
        ("plain/i.txt", hit),
    ]);
    fs::create_dir(dir.path().join("repo/nested/.git")).unwrap();
    // An ignore file that is a link (inside the tree) is read like ripgrep reads it.
    #[cfg(unix)]
    {
        write(dir.path(), "plain/shared-ignore", b"s.txt\n");
        write(dir.path(), "plain/linked/s.txt", hit.as_bytes());
        write(dir.path(), "plain/linked/t.txt", hit.as_bytes());
        std::os::unix::fs::symlink("../shared-ignore", dir.path().join("plain/linked/.ignore"))
            .unwrap();
    }
    let root = dir.path();
    for (path, glob) in [
        (root.to_path_buf(), None),
        (root.join("repo"), None),
        (root.join("repo/sub"), None),
        (root.join("repo/nested"), None),
        (root.join("plain"), None),
        (root.join("repo"), Some("*.txt")),
        (root.join("repo"), Some("!*.log")),
        (root.join("repo"), Some("sub/**")),
        (root.join("repo"), Some(".hidden-dropped")),
        (root.join("repo"), Some("*.log")),
    ] {
        let expected = walker_files(&path, glob);
        assert!(!expected.is_empty(), "{path:?} {glob:?}");
        assert_eq!(engine_files(&path, glob), expected, "{path:?} {glob:?}");
    }
}

#[cfg(unix)]
#[test]
fn the_opened_directory_is_searched_even_if_its_name_is_swapped_for_a_link_out_afterwards() {
    let outside = tree(&[
        ("secret.txt", "hit SECRET\n"),
        ("sub/two.txt", "hit SECRET\n"),
    ]);
    let dir = tree(&[("work/one.txt", "hit\n"), ("work/sub/two.txt", "hit\n")]);
    let work = dir.path().join("work");
    let start = super::walk::ambient_start(&work).unwrap();
    // Once the search path is open, its name (and so every path below it) leads outside.
    fs::rename(&work, dir.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), &work).unwrap();
    let request = SearchRequest::new(&work, "hit");
    let out = super::Query::new(&request).unwrap().search(start).unwrap();
    let found: Vec<_> = out
        .lines
        .iter()
        .map(|l| {
            (
                l.path.strip_prefix(&work).unwrap().to_owned(),
                l.text.as_str(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (PathBuf::from("one.txt"), "hit"),
            (PathBuf::from("sub/two.txt"), "hit")
        ]
    );
}

#[test]
fn many_directories_are_all_searched_in_path_order() {
    // More directories than may hold a handle at once while their files wait to be reported.
    let files: Vec<(String, &str)> = (0..700)
        .map(|i| (format!("d{i:03}/f.txt"), "hit\n"))
        .collect();
    let pairs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    let dir = tree(&pairs);
    let request = SearchRequest {
        limit: usize::MAX,
        ..SearchRequest::new(dir.path(), "hit")
    };
    let out = search(&request).unwrap();
    let expected: Vec<PathBuf> = files.iter().map(|(p, _)| dir.path().join(p)).collect();
    let got: Vec<PathBuf> = out.lines.into_iter().map(|l| l.path).collect();
    assert_eq!(got, expected);
    assert_eq!(out.files_searched, 700);
    // Stopping early while the walk waits for the report does not hang.
    let out = search(&SearchRequest {
        limit: 5,
        ..request
    })
    .unwrap();
    assert_eq!((out.lines.len(), out.truncated), (5, true));
}

#[test]
fn a_cancelled_search_ends_as_cancelled_and_an_uncancelled_one_does_not() {
    let files: Vec<(String, String)> = (0..50)
        .map(|n| (format!("f{n}.txt"), "needle\n".repeat(10)))
        .collect();
    let listed: Vec<(&str, &str)> = files
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_str()))
        .collect();
    let dir = tree(&listed);
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let running = SearchRequest {
        cancel: Some(std::sync::Arc::clone(&flag)),
        limit: 1000,
        ..SearchRequest::new(dir.path(), "needle")
    };
    assert_eq!(search(&running).unwrap().lines.len(), 500);
    flag.store(true, std::sync::atomic::Ordering::SeqCst);
    let error = search(&running).unwrap_err();
    assert!(matches!(error, SearchError::Cancelled), "{error}");
    assert_eq!(error.code(), ErrorCode::Cancelled);
}

/// Lines show a secret as `*`, context lines too, and no query finds any part of one: the
/// search runs over the masked file, so a match cannot confirm a guessed prefix.
#[test]
fn a_secret_is_masked_in_every_line_shown_and_cannot_be_found() {
    let key = "sk-live-0123456789abcdef";
    let secrets = crate::sandbox::mask::Secrets::from_values([key.to_owned()]);
    let filler = "x".repeat(100_000);
    let dir = tree(&[(
        "a.txt",
        &format!("before\nOPENAI_API_KEY={key}\nafter\n{filler}{key}\n"),
    )]);
    let request = SearchRequest {
        context_lines: 1,
        secrets: secrets.clone(),
        ..SearchRequest::new(dir.path(), "OPENAI_API_KEY")
    };
    let out = search(&request).unwrap();
    let shown = out.render();
    assert!(!shown.contains("sk-live"), "{shown}");
    assert!(
        shown.contains(&format!("OPENAI_API_KEY={}", "*".repeat(key.len()))),
        "{shown}"
    );
    assert!(
        shown.contains("-before") && shown.contains("-after"),
        "{shown}"
    );
    for guess in ["sk-live-0", "0123456789", "live-01234567"] {
        let request = SearchRequest {
            secrets: secrets.clone(),
            ..SearchRequest::new(dir.path(), guess)
        };
        assert!(search(&request).unwrap().lines.is_empty(), "{guess}");
    }
    // A line longer than the reader's chunk, the key at its end: masked too.
    let request = SearchRequest {
        regex: true,
        secrets,
        ..SearchRequest::new(dir.path(), "^x+")
    };
    let out = search(&request).unwrap();
    assert_eq!(out.lines.len(), 1);
    assert!(!out.render().contains("sk-live"));
}
