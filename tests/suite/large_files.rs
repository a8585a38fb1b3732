//! Partial reads of files of any size (PROTOCOL.md §9 (Tools: fs.read)), through the real binary: `head`, `tail`,
//! `range` and `lines` read only what they need, so a 100 MiB log reads like a small one, and a
//! 1 GiB file reads under a 256 MiB address-space limit no whole-file load could fit in.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::common::{Workspace, flycode};

/// The bytes of each line of [`numbered_log`]: `line 000000001 xxxxxxxxxxxxxxxx\n`.
const LINE_BYTES: u64 = 32;

fn numbered_line(number: u64) -> String {
    format!("line {number:09} xxxxxxxxxxxxxxxx\n")
}

impl Workspace {
    /// Runs one slash command with `flycode exec --json`; its report.
    fn slash(&self, command: &str) -> Value {
        self.slash_in(command, None)
    }

    /// The same, the address space limited to `limit_kib` (by `ulimit -v` in a shell).
    fn slash_in(&self, command: &str, limit_kib: Option<u64>) -> Value {
        let output = match limit_kib {
            None => self.exec_command(&["--slash", command]).output().unwrap(),
            Some(limit) => std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("ulimit -v {limit} && exec \"$@\""))
                .arg("sh")
                .arg(env!("CARGO_BIN_EXE_flycode"))
                .args(["exec", "--json", "--root"])
                .arg(&self.root)
                .args(["--slash", command])
                .env("FLYCODE_STATE_DIR", &self.state)
                .output()
                .unwrap(),
        };
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "{command}: {e}; stdout {:?}, stderr {:?}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }
}

fn content(report: &Value) -> &str {
    assert_eq!(report["ok"], true, "{report}");
    report["result"]["content"].as_str().unwrap()
}

fn error_code(report: &Value) -> &str {
    assert_eq!(report["ok"], false, "{report}");
    report["error"]["code"].as_str().unwrap()
}

/// A log of `lines` numbered lines of [`LINE_BYTES`] each, written a megabyte at a time.
fn numbered_log(path: &Path, lines: u64) {
    let mut file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    for number in 1..=lines {
        file.write_all(numbered_line(number).as_bytes()).unwrap();
    }
    file.flush().unwrap();
}

#[test]
fn a_100_mib_log_reads_its_head_tail_and_deep_lines() {
    let w = Workspace::new();
    let lines = 100 * 1024 * 1024 / LINE_BYTES;
    let log = w.path("big.log");
    numbered_log(Path::new(&log), lines);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 100 * 1024 * 1024);

    let head = w.slash(&format!("/fs.read {log} --head 200"));
    let expected: String = (1..=7).map(numbered_line).collect();
    assert_eq!(content(&head), &expected[..200]);
    assert_eq!(
        head["text"]
            .as_str()
            .unwrap()
            .lines()
            .find(|l| l.starts_with("[range]")),
        Some("[range] 0-200 of ? chars (file 104857600 bytes, read in part)")
    );

    let tail = w.slash(&format!("/fs.read {log} --tail 96"));
    let expected: String = (lines - 2..=lines).map(numbered_line).collect();
    assert_eq!(content(&tail), expected);
    assert_eq!(
        tail["result"]["selection"]["bytes"]["start"],
        100 * 1024 * 1024 - 96
    );

    let deep = w.slash(&format!("/fs.read {log} --lines 1000000-1000010"));
    let expected: String = (1_000_000..=1_000_010).map(numbered_line).collect();
    assert_eq!(content(&deep), expected);
    assert_eq!(
        deep["result"]["selection"]["bytes"]["start"],
        999_999 * LINE_BYTES
    );
    let one = w.slash(&format!("/fs.read {log} --line {lines}"));
    assert_eq!(content(&one), numbered_line(lines));

    // Bytes seek straight to the offset.
    let hex = w.slash(&format!(
        "/fs.read {log} --range {}-{} --encoding hex",
        50 * 1024 * 1024,
        50 * 1024 * 1024 + 4
    ));
    assert_eq!(content(&hex), "6c696e65"); // "line": a line starts at every 32nd byte

    // A whole read of it is still refused, pointing at the partial reads.
    let whole = w.slash(&format!("/fs.read {log}"));
    assert_eq!(error_code(&whole), "too_large");
    assert!(
        whole["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("\"head\""),
        "{whole}"
    );
}

/// A 1 GiB file, mostly a hole, with text at both ends: its head, tail and first lines read
/// with the address space limited to 256 MiB.
#[test]
#[cfg(unix)]
fn a_1_gib_file_reads_in_bounded_memory() {
    let w = Workspace::new();
    let path = w.path("huge.log");
    let size: u64 = 1 << 30;
    let start: String = (1..=4096).map(numbered_line).collect();
    let end: String = (9_000_001..=9_004_096).map(numbered_line).collect();
    {
        use std::io::{Seek, SeekFrom};
        let mut file = std::fs::File::create(&path).unwrap();
        file.set_len(size).unwrap();
        file.write_all(start.as_bytes()).unwrap();
        file.seek(SeekFrom::Start(size - end.len() as u64)).unwrap();
        file.write_all(end.as_bytes()).unwrap();
    }
    let limit = Some(256 * 1024);
    let head = w.slash_in(&format!("/fs.read {path} --head 64"), limit);
    assert_eq!(content(&head), &start[..64]);
    let tail = w.slash_in(&format!("/fs.read {path} --tail 64"), limit);
    assert_eq!(content(&tail), &end[end.len() - 64..]);
    let lines = w.slash_in(&format!("/fs.read {path} --lines 4000-4002"), limit);
    assert_eq!(
        content(&lines),
        (4000..=4002).map(numbered_line).collect::<String>()
    );
    let hex = w.slash_in(
        &format!("/fs.read {path} --range 536870912-536870916 --encoding hex"),
        limit,
    );
    assert_eq!(content(&hex), "00000000");
}

/// Characters of 2, 3 and 4 bytes across the 64 KiB blocks a streamed read uses.
#[test]
fn multi_byte_characters_straddling_blocks_read_whole() {
    let w = Workspace::new();
    let path = w.path("wide.txt");
    // 2 MiB and more of a 9-character, 20-byte pattern: no block boundary falls between
    // characters the same way twice.
    let pattern = "aé€😀b\n€😀é";
    let text = pattern.repeat(2 * 1024 * 1024 / pattern.len() + 1);
    std::fs::write(&path, &text).unwrap();
    let chars: Vec<char> = text.chars().collect();
    for n in [1, 7, 21_845, 30_000, 65_537, 100_003] {
        let head = w.slash(&format!("/fs.read {path} --head {n}"));
        assert_eq!(
            content(&head),
            chars[..n].iter().collect::<String>(),
            "head {n}"
        );
        let tail = w.slash(&format!("/fs.read {path} --tail {n}"));
        assert_eq!(
            content(&tail),
            chars[chars.len() - n..].iter().collect::<String>(),
            "tail {n}"
        );
    }
    let range = w.slash(&format!("/fs.read {path} --range 500000-500020"));
    assert_eq!(
        content(&range),
        chars[500_000..500_020].iter().collect::<String>()
    );
    // Read to the end, the characters are counted: the header is exact.
    let total = chars.len();
    let rest = w.slash(&format!("/fs.read {path} --range {}-", total - 3));
    assert_eq!(
        rest["result"]["selection"],
        serde_json::json!({
            "kind": "range", "start": total - 3, "end": total, "total": total, "count": 3,
            "bytes": {"start": text.len() - 9, "end": text.len(), "fileSize": text.len()}
        })
    );
}

#[test]
fn crlf_lines_keep_their_line_endings() {
    let w = Workspace::new();
    let path = w.path("windows.txt");
    let text: String = (1..=200_000).map(|n| format!("row {n}\r\n")).collect();
    std::fs::write(&path, &text).unwrap();
    let lines = w.slash(&format!("/fs.read {path} --lines 150000-150001"));
    assert_eq!(content(&lines), "row 150000\r\nrow 150001\r\n");
    let tail = w.slash(&format!("/fs.read {path} --tail 12"));
    assert_eq!(content(&tail), "row 200000\r\n");
    let last = w.slash(&format!("/fs.read {path} --lines 199999-"));
    assert_eq!(content(&last), "row 199999\r\nrow 200000\r\n");
    assert_eq!(
        last["result"]["selection"]["total"], 200_000,
        "read to the end, the lines are counted"
    );
}

#[test]
fn ranges_and_lines_past_the_end() {
    let w = Workspace::new();
    let path = w.path("short-lines.log");
    numbered_log(Path::new(&path), 65_536); // 2 MiB
    let size = 65_536 * LINE_BYTES;
    let past = w.slash(&format!("/fs.read {path} --range 3000000-3000010"));
    assert_eq!(content(&past), "");
    assert_eq!(
        past["result"]["selection"],
        serde_json::json!({
            "kind": "range", "start": size, "end": size, "total": size, "count": 0,
            "bytes": {"start": size, "end": size, "fileSize": size}
        })
    );
    let hex = w.slash(&format!(
        "/fs.read {path} --range {}- --encoding hex",
        size - 2
    ));
    assert_eq!(content(&hex), "780a");
    let hex_past = w.slash(&format!(
        "/fs.read {path} --range 9999999-99999999 --encoding hex"
    ));
    assert_eq!(content(&hex_past), "");
    let line = w.slash(&format!("/fs.read {path} --line 65537"));
    assert_eq!(error_code(&line), "invalid_args");
    assert!(
        line["error"]["message"]
            .as_str()
            .unwrap()
            .contains("past the end of the file (65536 lines)"),
        "{line}"
    );
}

#[test]
fn large_binary_files_are_judged_by_their_start_and_the_part_read() {
    let w = Workspace::new();
    // Text for 2 MiB, then bytes that are not UTF-8.
    let path = w.path("text-then-binary.dat");
    let mut bytes = "all text here\n".repeat(150_000).into_bytes();
    bytes.extend_from_slice(&[0xff, 0xfe, 0x00, 0x80]);
    std::fs::write(&path, &bytes).unwrap();
    let head = w.slash(&format!("/fs.read {path} --head 14"));
    assert_eq!(content(&head), "all text here\n");
    let tail = w.slash(&format!("/fs.read {path} --tail 10"));
    assert_eq!(error_code(&tail), "binary_content");
    assert!(
        tail["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("offset {}", 150_000 * 14)),
        "{tail}"
    );
    let hex = w.slash(&format!("/fs.read {path} --tail 4 --encoding hex"));
    assert_eq!(content(&hex), "fffe0080");

    // A NUL byte near the start makes the whole file binary, even where the tail is text.
    let path = w.path("binary-then-text.dat");
    let mut bytes = vec![0x7f, b'E', b'L', b'F', 0x02, 0x01, 0x01, 0x00];
    bytes.extend_from_slice("text at the end\n".repeat(100_000).as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let tail = w.slash(&format!("/fs.read {path} --tail 16"));
    assert_eq!(error_code(&tail), "binary_content");
    assert!(
        tail["error"]["message"]
            .as_str()
            .unwrap()
            .contains("NUL byte at offset 7"),
        "{tail}"
    );
    let base64 = w.slash(&format!("/fs.read {path} --head 4 --encoding base64"));
    assert_eq!(content(&base64), "f0VMRg==");
}

/// A whole read printed as a block (`exec` without `--json`) of a file large enough to be
/// written out from the file itself (PROTOCOL.md §9 (fs.read), "A large file written out from
/// where it is") is byte for byte the block `--json` renders from memory: the fence chosen past
/// its longest run of backticks, characters cut by the 128 KiB blocks whole, secrets masked.
#[test]
fn a_large_whole_read_written_out_from_its_file_is_the_block_json_renders() {
    let w = Workspace::new();
    let key = "sk-test-0123456789abcdef";
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 1_200_000 {
        n += 1;
        // Lines of odd lengths, so multi-byte characters fall across block edges.
        text.push_str(&format!(
            "{n} ünïcödé 😀 {} ``{}\n",
            "x".repeat(n % 97),
            if n % 5000 == 0 { key } else { "" }
        ));
    }
    text.push_str("the longest run: `````` ends here\n");
    std::fs::write(w.root.join("big.rs"), &text).unwrap();
    let (printed, rendered) = printed_and_rendered(&w, "big.rs", &[("OPENAI_API_KEY", key)]);
    assert!(
        printed == rendered,
        "the printed block differs from the rendered one"
    );
    assert!(printed.starts_with("```````flycode-result\n"));
    assert!(!printed.contains(key));
    assert_eq!(
        printed.matches('\n').count(),
        text.matches('\n').count() + 7
    );
}

/// A file of several MiB with nothing to mask has its first pass shared by two threads in 1 MiB
/// parts (PROTOCOL.md §9 (fs.read), "A large file written out from where it is"), and is then
/// written straight to the output: the block is still byte for byte the one `--json` renders,
/// with the fence past a run of backticks that crosses a part's end and characters cut by the
/// parts' ends whole.
#[test]
fn a_read_shared_by_two_threads_is_the_block_json_renders() {
    let w = Workspace::new();
    let mib = 1 << 20;
    let mut text = String::new();
    let mut n = 0;
    let mut line = |text: &mut String| {
        n += 1;
        text.push_str(&format!("{n} ünïcödé 😀 {} `x`\n", "y".repeat(n % 89)));
    };
    while text.len() < 2 * mib - 200 {
        line(&mut text);
    }
    // Seven backticks across the end of the second part.
    text.push_str(&"z".repeat(2 * mib - 3 - text.len()));
    text.push_str("```````\n");
    while text.len() < 5 * mib {
        line(&mut text);
    }
    std::fs::write(w.root.join("big.txt"), &text).unwrap();
    let (printed, rendered) = printed_and_rendered(&w, "big.txt", &[]);
    assert!(
        printed == rendered,
        "the printed block differs from the rendered one"
    );
    assert!(printed.starts_with("````````flycode-result\n"));
    assert!(printed.contains(&text));
}

/// A whole read of `name` in `w`'s root by `exec`, printed as a block and as `--json` renders
/// it (its `text`), with an output cap that lets a large file through and `env` set.
fn printed_and_rendered(w: &Workspace, name: &str, env: &[(&str, &str)]) -> (String, String) {
    let config = w.state.parent().unwrap().join("config");
    std::fs::create_dir_all(config.join("flycode")).unwrap();
    std::fs::write(
        config.join("flycode/flycode.toml"),
        "output_cap = 16777216\n",
    )
    .unwrap();
    let run = |json: bool| {
        let mut command = flycode();
        command.arg("exec");
        if json {
            command.arg("--json");
        }
        command
            .arg("--root")
            .arg(&w.root)
            .arg("--slash")
            .arg(format!("/fs.read {}", w.root.join(name).display()))
            .env("FLYCODE_STATE_DIR", &w.state)
            .env("XDG_CONFIG_HOME", &config)
            .envs(env.iter().copied())
            .current_dir(&w.root)
            .output()
            .unwrap()
    };
    let printed = run(false);
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let report: Value = serde_json::from_slice(&run(true).stdout).unwrap();
    (
        String::from_utf8(printed.stdout).unwrap(),
        report["text"].as_str().unwrap().to_owned(),
    )
}
