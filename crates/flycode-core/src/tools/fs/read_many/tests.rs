use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::*;
use crate::sandbox::Roots;

struct Fixture {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    sandbox: Sandbox,
}

/// A root (`base/root`) holding `files`, and a directory beside it (`base/outside`).
fn fixture(files: &[(&str, &[u8])]) -> Fixture {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret.txt"), "SECRET\n").unwrap();
    for (name, content) in files {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let sandbox = Sandbox::open(&Roots::resolve(std::slice::from_ref(&root)).unwrap()).unwrap();
    Fixture {
        _temp: temp,
        base,
        root,
        sandbox,
    }
}

impl Fixture {
    fn path(&self, relative: &str) -> String {
        format!("{}/{relative}", self.root.display())
    }

    fn run_with(&self, args: Value, cap: usize) -> Result<ToolOutput, ToolError> {
        let args: ReadManyArgs = serde_json::from_value(args).unwrap();
        let limits = Limits {
            output_cap: cap,
            ..Limits::default()
        };
        run(&self.sandbox, &limits, &args)
    }

    /// Runs with `relative` paths made absolute below the root.
    fn run(&self, relative: &[&str], extra: Value) -> Result<ToolOutput, ToolError> {
        let mut args = json!({"paths": relative.iter().map(|p| self.path(p)).collect::<Vec<_>>()});
        if let Value::Object(extra) = extra {
            args.as_object_mut().unwrap().extend(extra);
        }
        self.run_with(args, crate::protocol::DEFAULT_BODY_CAP)
    }

    /// The body with the root shown as `R`.
    fn body(&self, output: &ToolOutput) -> String {
        output
            .body
            .as_deref()
            .unwrap()
            .replace(self.root.to_str().unwrap(), "R")
    }
}

fn data_paths(output: &ToolOutput, key: &str, root: &Path) -> Vec<String> {
    output.data[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v.get("path")
                .and_then(Value::as_str)
                .or_else(|| v.as_str())
                .unwrap()
                .replace(root.to_str().unwrap(), "R")
        })
        .collect()
}

#[test]
fn reads_files_in_the_order_given_in_seed_001s_format() {
    let f = fixture(&[("b.rs", b"fn b() {}\n"), ("a.rs", b"fn a() {}\nfn a2() {}")]);
    let output = f.run(&["b.rs", "a.rs"], json!({})).unwrap();
    assert_eq!(
        f.body(&output),
        "=== File: R/b.rs (10 B, 1 line) ===\nfn b() {}\n\n\
         === File: R/a.rs (20 B, 2 lines) ===\nfn a() {}\nfn a2() {}\n\n\
         --- Summary ---\nTotal: 2 files, 30 B\nErrors: 0\n"
    );
    assert_eq!(output.data["totalFiles"], 2);
    assert_eq!(output.data["totalBytes"], 30);
    assert!(output.fields.is_empty(), "{:?}", output.fields);
    assert_eq!(FsReadMany.summary(&output), "Read 2 files (30 B)");
}

#[test]
fn failing_entries_are_listed_and_the_rest_is_read() {
    let f = fixture(&[
        ("a.rs", b"a\n"),
        ("dir/x.rs", b"x\n"),
        ("bin.dat", b"\x00\x01\x02"),
    ]);
    let outside = format!("{}/outside/secret.txt", f.base.display());
    let args = json!({"paths": [f.path("a.rs"), f.path("missing.rs"), outside, f.path("dir"), f.path("bin.dat")]});
    let output = f.run_with(args, 65536).unwrap();
    let body = f.body(&output);
    assert!(
        body.contains("=== File: R/a.rs (2 B, 1 line) ===\na\n"),
        "{body}"
    );
    assert!(
        body.contains("=== Errors ===\n- R/missing.rs: does not exist (not_found)\n"),
        "{body}"
    );
    assert!(
        body.contains("secret.txt: is outside the allowed roots"),
        "{body}"
    );
    assert!(body.contains("(outside_roots)\n"), "{body}");
    assert!(
        body.contains("- R/dir: is a directory (is_directory)\n"),
        "{body}"
    );
    assert!(
        body.contains("- R/bin.dat: is not UTF-8 text (a NUL or invalid byte at offset 0)"),
        "{body}"
    );
    assert!(body.ends_with("Total: 1 file, 2 B\nErrors: 4\n"), "{body}");
    assert!(!body.contains("SECRET"));
    let codes: Vec<&str> = output.data["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "not_found",
            "outside_roots",
            "is_directory",
            "binary_content"
        ]
    );
    assert_eq!(FsReadMany.summary(&output), "Read 1 file (2 B), 4 errors");
}

#[test]
fn the_call_fails_only_when_every_entry_fails() {
    let f = fixture(&[("dir/x.rs", b"x\n")]);
    let error = f.run(&["missing.rs", "dir"], json!({})).unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
    assert!(
        error.message.starts_with("fs.readMany read no file: "),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("missing.rs: does not exist"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("dir: is a directory"),
        "{}",
        error.message
    );
    let body = error.output.unwrap().body.unwrap();
    assert!(body.contains("=== Errors ===\n"), "{body}");
    assert!(body.ends_with("Total: 0 files, 0 B\nErrors: 2\n"), "{body}");
}

#[test]
fn globs_expand_sorted_follow_ignore_files_and_skip_hidden_and_binary_files() {
    let f = fixture(&[
        (".ignore", b"generated.rs\n"),
        ("src/z.rs", b"z\n"),
        ("src/a.rs", b"a\n"),
        ("src/generated.rs", b"gen\n"),
        ("src/.hidden.rs", b"hidden\n"),
        ("src/sub/b.rs", b"b\n"),
        ("src/notes.txt", b"notes\n"),
        ("src/blob.rs", b"\x00binary"),
    ]);
    let output = f.run(&["src/**/*.rs"], json!({})).unwrap();
    assert_eq!(
        data_paths(&output, "files", &f.root),
        ["R/src/a.rs", "R/src/sub/b.rs", "R/src/z.rs"]
    );
    let body = f.body(&output);
    assert!(
        body.contains("- R/src/blob.rs: binary file, skipped (binary_content)\n"),
        "{body}"
    );
    let shallow = f.run(&["src/*.rs"], json!({})).unwrap();
    assert_eq!(
        data_paths(&shallow, "files", &f.root),
        ["R/src/a.rs", "R/src/z.rs"]
    );
}

#[test]
fn exclude_duplicates_and_empty_globs() {
    let f = fixture(&[
        ("src/a.rs", b"a\n"),
        ("src/tests/t.rs", b"t\n"),
        ("src/b.rs", b"b\n"),
    ]);
    let output = f
        .run(
            &["src/b.rs", "src/**/*.rs", "src/a.rs", "src/*.py"],
            json!({"exclude": ["**/tests/**"]}),
        )
        .unwrap();
    assert_eq!(
        data_paths(&output, "files", &f.root),
        ["R/src/b.rs", "R/src/a.rs"]
    );
    let body = f.body(&output);
    assert!(
        body.contains("- R/src/*.py: no file matches (hidden files"),
        "{body}"
    );
    let excluded = f
        .run(&["src/tests/*.rs"], json!({"exclude": ["t.rs"]}))
        .unwrap_err();
    assert_eq!(excluded.code, ErrorCode::NotFound);
    assert!(
        excluded
            .message
            .contains("no file matches outside the exclude patterns (1 excluded)"),
        "{}",
        excluded.message
    );
}

#[test]
fn a_glob_whose_directory_is_outside_the_roots_is_an_error() {
    let f = fixture(&[("a.rs", b"a\n")]);
    let pattern = format!("{}/outside/*.txt", f.base.display());
    let args = json!({"paths": [pattern, f.path("a.rs")]});
    let output = f.run_with(args, 65536).unwrap();
    let errors = &output.data["errors"][0];
    assert_eq!(errors["code"], "outside_roots");
    assert!(
        errors["error"]
            .as_str()
            .unwrap()
            .starts_with("its directory "),
        "{errors}"
    );
    assert!(!output.body.unwrap().contains("SECRET"));
}

#[cfg(unix)]
#[test]
fn links_out_of_the_roots_are_refused_or_never_followed() {
    let f = fixture(&[("src/a.rs", b"a\n")]);
    let secret = f.base.join("outside/secret.txt");
    std::os::unix::fs::symlink(&secret, f.root.join("src/leak.rs")).unwrap();
    std::os::unix::fs::symlink(f.base.join("outside"), f.root.join("src/out")).unwrap();
    let output = f
        .run(&["src/**", "src/leak.rs", "src/out/secret.txt"], json!({}))
        .unwrap();
    assert_eq!(data_paths(&output, "files", &f.root), ["R/src/a.rs"]);
    let codes: Vec<&str> = output.data["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["outside_roots", "outside_roots"]);
    assert!(!output.body.unwrap().contains("SECRET"));
}

#[test]
fn a_file_named_with_glob_characters_is_read_as_named() {
    let f = fixture(&[("pages/[id].tsx", b"export {}\n"), ("pages/i.tsx", b"i\n")]);
    let output = f.run(&["pages/[id].tsx"], json!({})).unwrap();
    assert_eq!(data_paths(&output, "files", &f.root), ["R/pages/[id].tsx"]);
}

#[test]
fn crlf_and_byte_order_marks_are_shown_as_they_are() {
    let f = fixture(&[("win.txt", b"\xef\xbb\xbfone\r\ntwo\r\n")]);
    let output = f.run(&["win.txt"], json!({})).unwrap();
    assert!(
        f.body(&output)
            .starts_with("=== File: R/win.txt (13 B, 2 lines) ===\n\u{feff}one\r\ntwo\r\n\n"),
        "{:?}",
        f.body(&output)
    );
}

#[test]
fn max_bytes_per_file_cuts_each_file_at_a_character_and_says_so() {
    let f = fixture(&[
        ("long.txt", "αβγδ\n".repeat(100).as_bytes()),
        ("s.txt", b"s\n"),
    ]);
    let output = f
        .run(&["long.txt", "s.txt"], json!({"maxBytesPerFile": 7}))
        .unwrap();
    let body = f.body(&output);
    assert!(
        body.starts_with(
            "=== File: R/long.txt (900 B, first 6 B shown) ===\nαβγ\n[cut by maxBytesPerFile 7: 6 of 900 bytes shown; read on with fs.read \"range\": \"3-\" (characters)]\n\n=== File: R/s.txt (2 B, 1 line) ===\ns\n\n"
        ),
        "{body}"
    );
    assert_eq!(output.data["files"][0]["truncated"], true);
    assert_eq!(output.data["files"][0]["sha256"], Value::Null);
    assert!(
        output.fields.is_empty(),
        "a per-file cut is asked for, not a truncation"
    );
    let args: ReadManyArgs = serde_json::from_value(json!({"paths": ["/x"]})).unwrap();
    let changes = FsReadMany.session_changes(&args, &output);
    assert_eq!(changes.len(), 1, "only the file shown whole was seen");
}

#[test]
fn what_does_not_fit_the_output_cap_is_listed_not_dropped() {
    let files: Vec<(String, Vec<u8>)> = (0..30)
        .map(|i| {
            (
                format!("f{i:02}.txt"),
                format!("{i:02}\n").repeat(200).into_bytes(),
            )
        })
        .collect();
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_slice()))
        .collect();
    let f = fixture(&borrowed);
    let cap = 4096;
    let output = f
        .run_with(json!({"paths": [f.path("*.txt")]}), cap)
        .unwrap();
    let body = output.body.clone().unwrap();
    assert!(body.len() <= cap, "{} > {cap}", body.len());
    assert_eq!(
        output.fields,
        vec![("truncated".to_owned(), "true".to_owned())]
    );
    let shown = output.data["files"].as_array().unwrap().len();
    let not_read = output.data["notRead"].as_array().unwrap().len();
    assert_eq!(shown + not_read, 30, "every file is shown or listed");
    assert!(shown >= 3, "{shown} shown");
    let listed = f.body(&output);
    assert!(
        listed.contains("=== Not read (output cap) ===\n"),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("Not read: {not_read} files (output cap)")),
        "{listed}"
    );
    assert_eq!(
        output.data["files"][shown - 1]["cutBy"],
        Value::Null,
        "small files are shown whole or not started"
    );
    assert!(
        FsReadMany
            .summary(&output)
            .ends_with(&format!(", {not_read} not read (output cap)"))
    );
}

#[test]
fn a_file_larger_than_the_cap_is_cut_there_and_the_rest_not_read() {
    let f = fixture(&[
        ("big.txt", &b"0123456789\n".repeat(1000)),
        ("small.txt", b"s\n"),
    ]);
    let cap = 4096;
    let output = f
        .run_with(
            json!({"paths": [f.path("big.txt"), f.path("small.txt")]}),
            cap,
        )
        .unwrap();
    let body = f.body(&output);
    assert!(output.body.as_ref().unwrap().len() <= cap);
    assert_eq!(output.data["files"][0]["cutBy"], "outputCap");
    assert!(
        body.starts_with("=== File: R/big.txt (10.7 KB, first "),
        "{body}"
    );
    assert!(
        body.contains(" of 11000 bytes shown; read on with fs.read \"range\": \""),
        "{body}"
    );
    assert!(
        body.contains("=== Not read (output cap) ===\n- R/small.txt\n"),
        "{body}"
    );
    assert_eq!(
        output.fields,
        vec![("truncated".to_owned(), "true".to_owned())]
    );
}

#[test]
fn a_long_not_read_list_ends_with_how_many_more() {
    let files: Vec<(String, Vec<u8>)> = (0..300)
        .map(|i| {
            (
                format!("dir/a-rather-long-file-name-{i:03}.txt"),
                b"x".repeat(100),
            )
        })
        .collect();
    let borrowed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_slice()))
        .collect();
    let f = fixture(&borrowed);
    let cap = 4096;
    let output = f
        .run_with(json!({"paths": [f.path("dir/*.txt")]}), cap)
        .unwrap();
    let body = output.body.clone().unwrap();
    assert!(body.len() <= cap, "{} > {cap}", body.len());
    let shown = output.data["files"].as_array().unwrap().len();
    let listed = body.lines().filter(|l| l.starts_with("- /")).count();
    let more: usize = body
        .lines()
        .find_map(|l| {
            l.strip_prefix("- … and ")?
                .strip_suffix(" more")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no '… and N more' line in {body}"));
    assert_eq!(shown + listed + more, 300, "{body}");
    assert!(
        body.ends_with(&format!(
            "Not read: {} files (output cap); read them in another call\n",
            300 - shown
        )),
        "{body}"
    );
}

#[test]
fn the_subject_names_one_path_or_counts_them() {
    let roots = [PathBuf::from("/w")];
    let one: ReadManyArgs = serde_json::from_value(json!({"paths": ["/w/src/a.rs"]})).unwrap();
    assert_eq!(FsReadMany.subject(&one, &roots), "src/a.rs");
    let three: ReadManyArgs =
        serde_json::from_value(json!({"paths": ["/w/a", "/w/b", "/w/c/**"]})).unwrap();
    assert_eq!(FsReadMany.subject(&three, &roots), "3 files");
}

#[test]
fn a_bad_exclude_glob_is_invalid_args() {
    let f = fixture(&[("a.rs", b"a\n")]);
    let error = f.run(&["a.rs"], json!({"exclude": ["[z-a"]})).unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidArgs);
}
