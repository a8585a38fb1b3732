//! Snapshots of what the model reads back: the result block every invalid reply fixture earns,
//! and the normalized call of every valid one.

use flycode::protocol::verdict::violation_result;
use flycode::protocol::{ClassifyOptions, ResultBlock, ToolSet, Verdict, classify_reply};

use super::common::{files_in, repo_root};

#[test]
fn answers_to_reply_fixtures() {
    let mut out = String::new();
    for verdict in ["call", "invalid"] {
        for path in files_in(&repo_root().join("fixtures/replies").join(verdict), "md") {
            let reply = std::fs::read_to_string(&path).unwrap();
            let expect = std::fs::read_to_string(path.with_extension("expect")).unwrap();
            let tools = expect
                .lines()
                .find_map(|l| l.strip_prefix("tools: "))
                .and_then(ToolSet::from_name)
                .unwrap_or_default();
            let classification = classify_reply(
                &reply,
                ClassifyOptions {
                    lenient: expect.contains("lenient: true"),
                    tools,
                },
            );
            let name = path.file_stem().unwrap().to_string_lossy();
            out.push_str(&format!("## {verdict}/{name}\n"));
            match classification.verdict {
                Verdict::Call(call) => {
                    let mut json = serde_json::to_string(&call).unwrap();
                    if json.len() > 300 {
                        json = format!(
                            "{}... ({} bytes)",
                            json.chars().take(300).collect::<String>(),
                            json.len()
                        );
                    }
                    out.push_str(&json);
                    out.push('\n');
                }
                Verdict::Invalid { error, attempt } => {
                    out.push_str(&violation_result(&error, &attempt).render())
                }
                Verdict::None => {}
            }
            out.push('\n');
        }
    }
    insta::assert_snapshot!(out);
}

#[test]
fn rendered_results() {
    let mut ok = ResultBlock::success(
        Some("call-001".into()),
        "/fs.read /root/work/app/README.md --head 1200".into(),
        Some("# App\n\n```sh\ncargo run\n```\n".into()),
    );
    ok.fields.push(("durationMs".into(), "2".into()));
    let failed = ResultBlock::failure(
        None,
        "/fs.ls /etc".into(),
        flycode::protocol::ErrorCode::OutsideRoots,
        "/etc is outside the allowed roots".into(),
        Some("use a path inside /root/work".into()),
    );
    let capped = ResultBlock::success(
        Some("call-002".into()),
        "/shell.exec 'yes'".into(),
        Some("y\n".repeat(40)),
    )
    .capped(32, Some("run a narrower command"));
    insta::assert_snapshot!(format!(
        "{}\n{}\n{}",
        ok.render(),
        failed.render(),
        capped.render()
    ));
}
