//! `flycode watch --dialect tags --inbox`: replies in seed 000's tag dialect dropped into a folder
//! are answered in the tag form beside them (PROTOCOL.md §15 (The tag dialect: doors)).

use super::common::spawn_watch;

use super::common::{send_signal, wait_for_file};

#[test]
fn tag_replies_are_answered_in_the_tag_form_and_violations_run_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let (inbox, root) = (base.join("inbox"), base.join("root"));
    std::fs::create_dir_all(&inbox).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "\u{feff}a\r\nb\r\n").unwrap();
    let child = spawn_watch(
        &inbox,
        &root,
        &base.join("state"),
        &["--dialect", "tags"],
        &[],
    );

    std::fs::write(
        inbox.join("one.md"),
        "Running it.\n<bash_call> echo from-tags > made.txt; cat made.txt </bash_call>\n<builtin>\nsmart_edit\npath: notes.txt\nmode: Append\nnew_text:\n<<<\nc\n>>>\n</builtin>\n",
    )
    .unwrap();
    let answer = wait_for_file(&inbox.join("one.result.md"));
    assert!(
        answer.starts_with("<bash_call_result exit_code=0 duration_ms="),
        "{answer}"
    );
    assert!(answer.contains("from-tags"), "{answer}");
    assert!(
        answer.contains("<builtin_result name=smart_edit ok=true>"),
        "{answer}"
    );
    assert_eq!(
        std::fs::read(root.join("notes.txt")).unwrap(),
        "\u{feff}a\r\nb\r\nc\r\n".as_bytes()
    );

    std::fs::write(
        inbox.join("two.md"),
        "<create_agent> x <bash_call> touch nested.txt </bash_call> </create_agent>\n",
    )
    .unwrap();
    let answer = wait_for_file(&inbox.join("two.result.md"));
    assert!(
        answer.contains("<builtin_result name=reply ok=false>\n[code] nested_tags"),
        "{answer}"
    );
    assert!(!root.join("nested.txt").exists());

    // Prose and a copied result are left alone; the next reply is still answered.
    std::fs::write(
        inbox.join("prose.md"),
        "Just thinking aloud about `<bash_call>`.",
    )
    .unwrap();
    std::fs::write(
        inbox.join("copy.md"),
        "<bash_call_result exit_code=0 duration_ms=1>\nx\n</bash_call_result>\n",
    )
    .unwrap();
    std::fs::write(
        inbox.join("zz.md"),
        "<builtin>\nread_file\npath: made.txt\n</builtin>",
    )
    .unwrap();
    let answer = wait_for_file(&inbox.join("zz.result.md"));
    assert!(
        answer.contains("[more] false\n[data]\nfrom-tags\n"),
        "{answer}"
    );
    assert!(!inbox.join("prose.result.md").exists());
    assert!(!inbox.join("copy.result.md").exists());

    send_signal(child.id(), "TERM");
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_tag_reply_copied_again_is_replayed_never_run_twice() {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let (inbox, root, state) = (base.join("inbox"), base.join("root"), base.join("state"));
    std::fs::create_dir_all(&inbox).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "a\n").unwrap();
    let reply = "Appending.\n<bash_call> echo ran >> log.txt </bash_call>\n<builtin>\nsmart_edit\npath: notes.txt\nmode: Append\nnew_text:\n<<<\nb\n>>>\n</builtin>\n";
    let child = spawn_watch(&inbox, &root, &state, &["--dialect", "tags"], &[]);
    std::fs::write(inbox.join("one.md"), reply).unwrap();
    let first = wait_for_file(&inbox.join("one.result.md"));
    assert!(!first.contains("replayed"), "{first}");
    // The same reply saved again under another name, with CRLF line ends and a BOM.
    let again = format!("\u{feff}{}", reply.replace('\n', "\r\n"));
    std::fs::write(inbox.join("two.md"), &again).unwrap();
    let second = wait_for_file(&inbox.join("two.result.md"));
    assert_eq!(second.matches("replayed=true>").count(), 2, "{second}");
    send_signal(child.id(), "TERM");
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
    // After a restart, the store still knows the reply.
    let child = spawn_watch(&inbox, &root, &state, &["--dialect", "tags"], &[]);
    std::fs::write(inbox.join("three.md"), reply).unwrap();
    let third = wait_for_file(&inbox.join("three.result.md"));
    assert_eq!(third.matches("replayed=true>").count(), 2, "{third}");
    // Another reply with the same tags is another reply: it runs.
    std::fs::write(
        inbox.join("four.md"),
        format!("Again, on purpose.\n{reply}"),
    )
    .unwrap();
    let fourth = wait_for_file(&inbox.join("four.result.md"));
    assert!(!fourth.contains("replayed"), "{fourth}");
    send_signal(child.id(), "TERM");
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(root.join("log.txt")).unwrap(),
        "ran\nran\n",
        "one run for the first reply, one for the fourth"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "a\nb\nb\n"
    );
}
