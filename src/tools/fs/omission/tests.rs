use super::*;

#[test]
fn placeholder_lines_in_english() {
    for line in [
        "... rest of the code unchanged",
        "// ... existing code ...",
        "# (unchanged)",
        "rest of file unchanged",
        "... remaining code ...",
        "    // ... rest of the function (unchanged) ...",
        "// Rest of the code remains the same",
        "<!-- ... existing content ... -->",
        "# ... (rest of the file unchanged) ...",
        "// (other methods unchanged)",
        "// existing code here",
        "// unchanged",
        "/* omitted */",
        "// ...snip...",
        "// rest of code",
        "-- rest of the query unchanged",
        "    # ... previous implementation ...",
        "[... rest of the file is unchanged ...]",
        "// Implementation unchanged",
        "// …existing imports…",
        "  * ... remaining tests unchanged ...",
        "{/* ... existing components ... */}",
        "; rest of config unchanged",
        "// ... same as before ...",
        "REST OF THE CODE UNCHANGED",
        "-- unchanged",
        "% (omitted)",
    ] {
        assert!(is_placeholder_line(line), "{line:?}");
    }
}

#[test]
fn placeholder_lines_in_chinese() {
    for line in [
        "// 其余代码不变",
        "# ...省略...",
        "其余代码不变",
        "// 其他部分保持不变",
        "/* 此处省略 */",
        "# 省略部分代码",
        "// ... 原有代码不变 ...",
        "// 此处省略100行",
        "（省略）",
        "# 略",
        "// 同上",
        "<!-- 其余内容不变 -->",
        "// 以下代码省略",
    ] {
        assert!(is_placeholder_line(line), "{line:?}");
    }
}

#[test]
fn real_lines_are_not_placeholders() {
    for line in [
        "x = y...",
        "...",
        "    ...",
        "[...]",
        "(…)",
        "/* ... */",
        "// ...",
        "pass  # unchanged",
        "foo(); // rest of the code unchanged",
        "print('rest of the code unchanged')",
        "return rest_of_code",
        "let unchanged = 1;",
        "unchanged",
        "# Existing tests",
        "// Rest of the code handles errors",
        "## Unchanged files",
        "// your code here",
        "existing code",
        "def f(): ...",
        "省略",
        "省略号",
        "不变量",
        "// 计算省略的部分",
        "const 其余 = 1;",
        "// 其余代码需要修改",
        "# 保持不变的配置项如下：a, b",
        "",
        "   ",
    ] {
        assert!(!is_placeholder_line(line), "{line:?}");
    }
}

fn numbered(lines: usize) -> String {
    (1..=lines)
        .map(|n| format!("let line_{n} = {n};\n"))
        .collect()
}

#[test]
fn an_abbreviated_overwrite_is_judged() {
    let old = numbered(40);
    let new = "let line_1 = 1;\n// ... rest of the code unchanged ...\n";
    let omission = judge_overwrite(old.as_bytes(), new).unwrap();
    assert_eq!(omission.line, 2);
    assert_eq!(omission.text, "// ... rest of the code unchanged ...");
}

#[test]
fn small_files_long_results_and_kept_placeholders_pass() {
    let new = "let line_1 = 1;\n// ... rest of the code unchanged ...\n";
    // Under 20 lines.
    assert_eq!(judge_overwrite(numbered(19).as_bytes(), new), None);
    // Not less than half.
    let long = format!("{}// ... existing code ...\n", numbered(30));
    assert_eq!(judge_overwrite(numbered(40).as_bytes(), &long), None);
    // No placeholder.
    assert_eq!(
        judge_overwrite(numbered(40).as_bytes(), "fn main() {}\n"),
        None
    );
    // The old file held the same placeholder already.
    let old = format!("{}// ... rest of the code unchanged ...\n", numbered(40));
    assert_eq!(judge_overwrite(old.as_bytes(), new), None);
}

#[test]
fn an_abbreviating_edit_is_judged_by_the_whole_result() {
    let old = numbered(40);
    let pairs = [
        ("let line_1 = 1;\n", "let line_1 = 10;\n"),
        ("let line_2 = 2;\n", "// 其余代码不变\n"),
    ];
    assert_eq!(
        judge_edit(old.as_bytes(), 100, pairs).map(|(i, o)| (i, o.line)),
        Some((1, 1))
    );
    // The same placeholder in a file that stays large is fine.
    assert_eq!(judge_edit(old.as_bytes(), old.len() - 10, pairs), None);
    // A placeholder the oldText already held is carried over, not invented.
    let carried = [("// 其余代码不变\nlet x = 1;\n", "// 其余代码不变\n")];
    assert_eq!(judge_edit(old.as_bytes(), 100, carried), None);
}
