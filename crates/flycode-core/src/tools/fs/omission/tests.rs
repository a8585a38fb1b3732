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

#[test]
fn the_prefilter_lets_every_placeholder_through() {
    for line in [
        "// ... rest of the code unchanged",
        "REST OF THE CODE UNCHANGED",
        "# (as is)",
        "// (other methods unchanged)",
        "// existing code here",
        "{/* ... existing components ... */}",
        // A Kelvin sign lowers to an ASCII `k`: non-ASCII lines always go to the full test.
        "// s\u{212A}ipped",
        "// 其余代码不变",
        "// …existing imports…",
    ] {
        assert!(may_be_placeholder(line.trim()), "{line:?}");
        assert!(is_placeholder_line(line), "{line:?}");
    }
}

#[test]
fn the_prefilter_stops_near_misses_and_code() {
    for line in [
        "// rest of the code unchanged!x",
        "// your code here",
        "foo(); // unchanged",
        "let rest = code.unchanged();",
        "...",
        "}",
        "// unchangedness",
        "// implementationsx unchanged",
    ] {
        assert!(!may_be_placeholder(line.trim()), "{line:?}");
        assert!(!is_placeholder_line(line), "{line:?}");
    }
}

#[test]
fn the_vocabulary_fits_the_prefilter_buffer() {
    assert!(VOCABULARY.iter().all(|word| word.len() <= LONGEST_WORD));
    assert!(VOCABULARY.contains("implementations") && VOCABULARY.contains("remainder"));
}

#[test]
fn a_placeholder_the_old_file_held_does_not_hide_a_new_one() {
    let old: String = (0..40)
        .map(|i| format!("fn f{i}() {{}} // padding padding padding\n"))
        .chain(["// ...\n".to_owned(), "// unchanged\n".to_owned()])
        .collect();
    let new = "// unchanged\nfn a() {}\n// ... rest of the code unchanged\n";
    let found = judge_overwrite(old.as_bytes(), new).map(|o| (o.line, o.text));
    assert_eq!(
        found,
        Some((3, "// ... rest of the code unchanged".to_owned()))
    );
}
