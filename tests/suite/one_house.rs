//! Both dialects live in one house (PROTOCOL.md §13 and §15): the tag dialect's `run` is the
//! flycode dialect's loop, so it has `--json`, `--resume`, parallel reads, the prompt language and
//! `--system-prompt-file`, and shows a broken reply on the terminal; seed 000's own answer to
//! `[global quota limit]` (tags, then `<return>`) runs and ends the agent; seed 004's placement
//! holds for tag results; `memory_query` hears the asking agent's live conversation; `check` and
//! `exec` judge a relative path alike; and no door runs again a call that just failed (seed 003,
//! R5). The real binary against scripted models on loopback.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use super::api_server::{RecordedRequest, Reply, ScriptedServer, text_of as content};
use super::common::{clean_run_command, flycode, temp_base_with_root};

/// A temporary home with a project root.
struct Place {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

impl Place {
    fn new() -> Place {
        let (temp, base, root) = temp_base_with_root("app");
        Place {
            _temp: temp,
            base,
            root,
        }
    }

    /// `flycode run ARGS` against `server` in the root, with `env` added.
    fn run(&self, server: &ScriptedServer, args: &[&str], env: &[(&str, String)]) -> Output {
        let mut command = clean_run_command(&self.base, &self.root);
        command
            .env_remove("LIGHT_LLM_MODEL_ID")
            .env_remove("LIGHT_LLM_BASE_URL")
            .env("LANG", "C.UTF-8")
            .env_remove("LC_ALL")
            .env_remove("LC_MESSAGES")
            .args(["run", "--yes", "--base-url"])
            .arg(server.base_url())
            .args(["--model", "scripted-model", "--root"])
            .arg(&self.root)
            .args(args)
            .stdin(std::process::Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    }
}

/// A server that answers the `index`th request with `replies[index]` (the last one after).
fn scripted(replies: &[&str]) -> ScriptedServer {
    ScriptedServer::replying(replies.iter().map(|r| (*r).to_owned()).collect())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn events(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn a_tags_run_reports_its_events_as_json_and_answers_with_its_return() {
    let place = Place::new();
    std::fs::write(place.root.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(place.root.join("b.txt"), "beta\n").unwrap();
    let server = scripted(&[
        "<builtin>\nread_file\npath: a.txt\n</builtin>\n<builtin>\nread_file\npath: b.txt\n</builtin>",
        "<return>\nread both\n</return>",
    ]);
    let output = place.run(
        &server,
        &["--dialect", "tags", "--json", "Read a and b."],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = events(&output);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    // The two reads of one reply ran at once, each reported as it started and finished.
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "parallel_calls" && e["count"] == 2),
        "{kinds:?}"
    );
    let finished_reads = events
        .iter()
        .filter(|e| e["event"] == "call_finished" && e["tool"] == "fs.read" && e["ok"] == true)
        .count();
    assert_eq!(finished_reads, 2, "{kinds:?}");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "finished");
    assert_eq!(last["ending"], "answered");
    assert_eq!(last["answer"], "read both");
    let results = server.requests()[1].last_text();
    assert!(
        results.contains("alpha") && results.contains("beta"),
        "{results}"
    );
}

#[test]
fn seed_000s_quota_answer_runs_its_calls_then_ends_the_agent() {
    let place = Place::new();
    // Seed 000's own example of an answer to `[global quota limit]`.
    let server = scripted(&[
        "<bash_call> printf done > made.txt </bash_call>\n<return>\n任务完成\n</return>",
    ]);
    let output = place.run(&server, &["--dialect", "tags", "Make the file."], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "任务完成\n");
    assert_eq!(
        std::fs::read_to_string(place.root.join("made.txt")).unwrap(),
        "done"
    );
    assert_eq!(server.requests().len(), 1, "the <return> ended the agent");
}

#[test]
fn a_broken_tag_reply_shows_on_the_terminal() {
    let place = Place::new();
    let server = scripted(&[
        "<create_agent> look <bash_call> ls </bash_call> </create_agent>",
        "<return>\nok\n</return>",
    ]);
    let output = place.run(&server, &["--dialect", "tags", "Look."], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("✗") && stderr.contains("nested_tags"),
        "{stderr}"
    );
    // The banner names the dialect, not a calling mode.
    assert!(stderr.contains("tag dialect"), "{stderr}");
}

#[test]
fn a_hint_loaded_in_a_tags_run_follows_the_task_as_seed_004_places_it() {
    let place = Place::new();
    let hint = place.base.join("cfg/flycode/hints/style");
    std::fs::create_dir_all(&hint).unwrap();
    std::fs::write(hint.join("HINT.md"), "# House style\nHINTMARK-9\n").unwrap();
    let server = scripted(&[
        "<builtin>\nhint\naction: load\nname: style\n</builtin>",
        "<bash_call> echo one </bash_call>",
        "<bash_call> echo two </bash_call>",
        "<bash_call> echo three </bash_call>",
        "<return>\ndone\n</return>",
    ]);
    let output = place.run(
        &server,
        &["--dialect", "tags", "Work in style."],
        &[(
            "XDG_CONFIG_HOME",
            place.base.join("cfg").display().to_string(),
        )],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.requests();
    let hint_at = |request: &RecordedRequest| {
        request
            .messages()
            .iter()
            .position(|m| content(m).starts_with("[flycode] Loaded hints"))
    };
    // Fewer than three results: right after the task, never before it.
    let second = requests[1].messages();
    assert_eq!(content(&second[1]), "Work in style.");
    assert_eq!(hint_at(&requests[1]), Some(2), "{second:#?}");
    // Tag results count as results: the block follows the third result from the end.
    let fifth = requests[4].messages();
    let at = hint_at(&requests[4]).unwrap();
    let results_after = fifth[at..]
        .iter()
        .filter(|m| m["role"] == "user" && content(m).starts_with("<b"))
        .count();
    let roles: Vec<String> = fifth
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"],
                content(m).lines().next().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(results_after, 2, "{roles:#?}");
}

#[test]
fn a_tags_run_speaks_the_language_asked_and_takes_the_persons_prompt_file() {
    let place = Place::new();
    let server = scripted(&["<return>\nok\n</return>"]);
    let output = place.run(&server, &["--dialect", "tags", "--lang", "zh", "Hi."], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let system = content(&server.requests()[0].messages()[0]);
    assert!(system.contains("深度优先"), "{system}");

    // Seed 000's prompt as the person keeps it: its placeholders filled, the rest as written.
    let prompt = place.base.join("seed000.md");
    std::fs::write(&prompt, "MY-PROMPT\n{tree_info}\nEND\n").unwrap();
    std::fs::write(place.root.join("marker-file.txt"), "x").unwrap();
    let server = scripted(&["<return>\nok\n</return>"]);
    let output = place.run(
        &server,
        &[
            "--dialect",
            "tags",
            "--system-prompt-file",
            prompt.to_str().unwrap(),
            "Hi.",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let system = content(&server.requests()[0].messages()[0]);
    assert!(system.starts_with("MY-PROMPT\n"), "{system}");
    assert!(
        system.contains("marker-file.txt") && !system.contains("{tree_info}"),
        "{system}"
    );
}

#[test]
fn a_tags_run_resumes_in_the_tag_dialect() {
    let place = Place::new();
    let server = ScriptedServer::start(|_, index| match index {
        0 => Reply::sse_text("<bash_call> printf one > one.txt </bash_call>", 7),
        _ => Reply::error(400, "the model is gone"),
    });
    let transcript = place.base.join("first.jsonl");
    let output = place.run(
        &server,
        &[
            "--dialect",
            "tags",
            "--transcript",
            transcript.to_str().unwrap(),
            "Make one.",
        ],
        &[],
    );
    assert_ne!(output.status.code(), Some(0), "{}", stderr(&output));
    let server = scripted(&["<return>\nresumed and done\n</return>"]);
    // No --dialect: the record says the run spoke tags.
    let output = place.run(&server, &["--resume", transcript.to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "resumed and done\n");
    let request = &server.requests()[0];
    let sent = request.messages();
    assert!(
        sent.iter()
            .any(|m| content(m).starts_with("<bash_call_result exit_code=0")),
        "{sent:#?}"
    );
    assert!(
        request.body.get("tools").is_none_or(Value::is_null)
            || request.body["tools"].as_array().is_some_and(Vec::is_empty)
    );
}

#[test]
fn memory_query_condenses_with_the_asking_agents_own_conversation() {
    let place = Place::new();
    for said in [
        "The zebra migration runs with flyway.",
        "The cache keeps entries for 42 seconds.",
    ] {
        let earlier = scripted(&[&format!("<return>\n{said}\n</return>")]);
        let output = place.run(&earlier, &["--dialect", "tags", "What do you know?"], &[]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
    let query = "<builtin>\nmemory_query\nquery: zebra migration\n</builtin>";
    let server = scripted(&[
        // The top agent asks on its first turn, then its child asks.
        query,
        "<create_agent> CHILD-TASK-5: recall the zebra migration. </create_agent>",
        query,
        "<return>\nchild done\n</return>",
        "<return>\ndone\n</return>",
    ]);
    let light = ScriptedServer::start(|_, _| Reply::completion_text("zebra uses flyway"));
    let output = place.run(
        &server,
        &["--dialect", "tags", "TOP-TASK-4: recall the migration."],
        &[
            ("LIGHT_LLM_MODEL_ID", "light-model".to_owned()),
            ("LIGHT_LLM_BASE_URL", light.base_url()),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let asked = light.requests();
    assert_eq!(asked.len(), 2, "one condensation per query");
    let context = |request: &RecordedRequest| {
        let material = content(&request.messages()[1]);
        material
            .split("<context>")
            .nth(1)
            .and_then(|rest| rest.split("</context>").next())
            .unwrap_or_default()
            .to_owned()
    };
    let top = context(&asked[0]);
    assert!(
        top.contains("TOP-TASK-4"),
        "the first turn's context: {top:?}"
    );
    let child = context(&asked[1]);
    assert!(
        child.contains("CHILD-TASK-5") && !child.contains("TOP-TASK-4"),
        "the child's context: {child:?}"
    );
}

#[test]
fn check_judges_a_relative_builtin_path_as_exec_runs_it() {
    let place = Place::new();
    std::fs::write(place.root.join("notes.txt"), "one\n").unwrap();
    let reply = "<builtin>\nread_file\npath: notes.txt\n</builtin>\n";
    let check = flycode()
        .current_dir(&place.root)
        .env("FLYCODE_STATE_DIR", place.base.join("state"))
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", &place.base)
        .args(["check", "--dialect", "tags", "--json"])
        .write_stdin(reply)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(check.status.code(), Some(0), "{report}");
    let root = place.root.display().to_string();
    assert_eq!(report["calls"][0]["error"], Value::Null, "{report}");
    assert_eq!(
        report["calls"][0]["call"]["args"]["path"],
        format!("{root}/notes.txt")
    );
    let exec = flycode()
        .current_dir(&place.root)
        .env("FLYCODE_STATE_DIR", place.base.join("state"))
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", &place.base)
        .args(["exec", "--dialect", "tags", "--yes"])
        .write_stdin(reply)
        .output()
        .unwrap();
    assert_eq!(exec.status.code(), Some(0), "{}", stderr(&exec));
    assert!(stdout(&exec).contains("one"));
}

#[test]
fn a_task_description_under_its_minimum_says_the_minimum() {
    let place = Place::new();
    let server = scripted(&[
        "```flycode-call\n{\"id\": \"call-001\", \"tool\": \"agent.task\", \"args\": {\"description\": \"ab\", \"prompt\": \"Count the files.\"}}\n```",
        "Done.",
    ]);
    let output = place.run(&server, &["--mode", "text", "Count."], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = server.requests()[1].last_text();
    assert!(
        result.contains("at least 3 characters") && !result.contains("must not be empty"),
        "{result}"
    );
}

/// A call that appends a line to `count.txt` and fails.
fn failing_call(id: &str) -> String {
    format!(
        "```flycode-call\n{{\"id\": \"{id}\", \"tool\": \"shell.exec\", \"args\": {{\"command\": \"echo ran >> count.txt; exit 3\"}}}}\n```"
    )
}

fn count_lines(root: &Path) -> usize {
    std::fs::read_to_string(root.join("count.txt"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn run_does_not_run_again_a_call_that_just_failed() {
    let place = Place::new();
    let (first, again) = (failing_call("call-001"), failing_call("call-002"));
    let server = scripted(&[&first, &again, "Giving up."]);
    let output = place.run(&server, &["--mode", "text", "Count."], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(count_lines(&place.root), 1, "the repeat ran");
    let answer = server.requests()[2].last_text();
    assert!(answer.contains("[code] repeated_failed_call"), "{answer}");
    assert!(stderr(&output).contains("repeated_failed_call"));
}

#[test]
fn a_tags_run_does_not_run_again_a_tag_that_just_failed() {
    let place = Place::new();
    let tag = "<bash_call> echo ran >> count.txt; exit 3 </bash_call>";
    let server = scripted(&[tag, tag, "<return>\ngave up\n</return>"]);
    let output = place.run(&server, &["--dialect", "tags", "Count."], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(count_lines(&place.root), 1, "the repeat ran");
    let answer = server.requests()[2].last_text();
    assert!(answer.contains("repeated_failed_call"), "{answer}");
}

#[test]
fn watch_does_not_run_again_a_call_that_just_failed() {
    use super::common::{send_signal, spawn_watch, wait_for_file};
    let place = Place::new();
    let inbox = place.base.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let child = spawn_watch(&inbox, &place.root, &place.base.join("state"), &[], &[]);
    std::fs::write(inbox.join("one.md"), failing_call("call-001")).unwrap();
    let first = wait_for_file(&inbox.join("one.result.md"));
    assert!(first.contains("[ok] false"), "{first}");
    std::fs::write(inbox.join("two.md"), failing_call("call-002")).unwrap();
    let second = wait_for_file(&inbox.join("two.result.md"));
    send_signal(child.id(), "TERM");
    let _ = child.wait_with_output();
    assert!(second.contains("[code] repeated_failed_call"), "{second}");
    assert_eq!(count_lines(&place.root), 1, "the repeat ran");
}

#[test]
fn a_full_context_is_compacted_in_the_tag_dialect_too() {
    let place = Place::new();
    let line = "filler text of a long line ".repeat(16);
    for name in ["big1.txt", "big2.txt"] {
        std::fs::write(place.root.join(name), format!("{line}\n").repeat(200)).unwrap();
    }
    let read = |name: &str| format!("<builtin>\nread_file\npath: {name}\n</builtin>");
    let (first, second) = (read("big1.txt"), read("big2.txt"));
    let server = scripted(&[&first, &second, "<return>\ndone\n</return>"]);
    let light = ScriptedServer::start(|_, _| Reply::completion_text("SUMMARY-OF-READS"));
    let config = place.base.join(".config/flycode");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("flycode.toml"),
        "[agent]\ncontext_tokens = 12000\nkeep_turns = 1\n",
    )
    .unwrap();
    let output = place.run(
        &server,
        &["--dialect", "tags", "--json", "Read both."],
        &[
            ("LIGHT_LLM_MODEL_ID", "light-model".to_owned()),
            ("LIGHT_LLM_BASE_URL", light.base_url()),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        events(&output).iter().any(|e| e["event"] == "compacted"),
        "{}",
        stdout(&output)
    );
    assert_eq!(light.requests().len(), 1);
    let last = server.requests()[2].messages();
    assert!(
        last.iter().any(|m| content(m).contains("SUMMARY-OF-READS")),
        "{last:#?}"
    );
    assert!(
        last.len() < 7,
        "the older turns were replaced: {}",
        last.len()
    );
}
