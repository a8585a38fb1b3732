//! `check`, `exec` and `mcp` read integer arguments by one rule (PROTOCOL.md §6, The schemas):
//! the numbers JSON Schema alone would take (`1.0`, `5e0`, 2^64) and the ones it refuses (`-1`,
//! `1.5`) get the same `invalid_args`, message and hint at every door.

use serde_json::Value;

use super::common::{Workspace, flycode};
use super::mcp_framing::mcp_verdict_on_head;

const NOT_WHOLE: [&str; 5] = ["1.0", "5e0", "18446744073709551616", "-1", "1.5"];

fn reply(w: &Workspace, head: &str) -> String {
    let path = serde_json::to_string(&w.path("notes.txt")).unwrap();
    format!(
        "```flycode-call\n{{\"id\":\"n1\",\"tool\":\"fs.read\",\"args\":{{\"path\":{path},\"head\":{head}}}}}\n```\n"
    )
}

fn check(w: &Workspace, head: &str) -> (i32, Value) {
    let output = flycode()
        .args(["check", "--json"])
        .write_stdin(reply(w, head))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap();
    (output.status.code().unwrap(), report)
}

fn exec(w: &Workspace, head: &str) -> (i32, Value) {
    let output = w
        .exec_command(&[])
        .write_stdin(reply(w, head))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap();
    (output.status.code().unwrap(), report)
}

#[test]
fn check_exec_and_mcp_give_one_verdict_on_numbers_that_are_not_whole() {
    let w = Workspace::new();
    std::fs::write(w.root.join("notes.txt"), "first\nsecond\n").unwrap();
    let mcp = mcp_verdict_on_head(&w, &NOT_WHOLE);
    for (head, mcp) in NOT_WHOLE.iter().zip(mcp) {
        let (check_code, checked) = check(&w, head);
        let (exec_code, executed) = exec(&w, head);
        assert_eq!(
            (check_code, exec_code),
            (1, 1),
            "{head}: {checked} {executed}"
        );
        assert_eq!(
            checked["error"]["code"], "invalid_args",
            "{head}: {checked}"
        );
        assert_eq!(
            checked["error"], executed["error"],
            "{head}: check and exec differ"
        );
        let hint = checked["error"]["hint"].as_str().unwrap();
        assert!(
            hint.starts_with("Send \"head\" as digits only, 1 or more, e.g. \"head\": "),
            "{head}: {hint}"
        );
        let message = checked["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("argument \"head\" must be a whole number 1 or more"),
            "{head}: {message}"
        );
        assert_eq!(
            mcp,
            Some(("invalid_args".to_owned(), hint.to_owned())),
            "{head}: mcp differs"
        );
    }
    // 5e0 means 5: the hint says how to write it.
    let (_, checked) = check(&w, "5e0");
    assert!(
        checked["error"]["hint"]
            .as_str()
            .unwrap()
            .ends_with("\"head\": 5.")
    );
    // A whole number still runs at every door.
    assert_eq!(check(&w, "1").0, 0);
    let (code, executed) = exec(&w, "1");
    assert_eq!(code, 0, "{executed}");
    assert_eq!(executed["result"]["content"], "f", "head counts bytes");
    assert_eq!(mcp_verdict_on_head(&w, &["1"]), [None]);
}
