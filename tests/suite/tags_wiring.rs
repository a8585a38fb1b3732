//! `flycode run --dialect tags` wired to the rest of flycode (PROTOCOL.md §15 (The tag dialect:
//! run)): seed 000's own prompt as the system message, background jobs that `get_job_log` reads
//! and that end with the run, predefined agents for `<create_agent name=NAME>`, and
//! `memory_query`, `hint` and `get_resource` through `<builtin>`. The real binary against
//! scripted models on loopback.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::api_server::{RecordedRequest, Reply, ScriptedServer, text_of as content};
use super::common::{flycode, temp_base_with_root};

/// A temporary home with a project root, a configuration folder and a state folder.
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

    /// The user's configuration folder of flycode (`$XDG_CONFIG_HOME/flycode`).
    fn config(&self) -> PathBuf {
        self.base.join("cfg/flycode")
    }

    /// `flycode run --dialect tags TASK` against `server`, with `light` as the light model.
    fn run(&self, server: &ScriptedServer, light: Option<&ScriptedServer>, task: &str) -> Output {
        let mut command = flycode();
        command
            .current_dir(&self.root)
            .env("HOME", &self.base)
            .env("XDG_CONFIG_HOME", self.base.join("cfg"))
            .env("FLYCODE_STATE_DIR", self.base.join("state"))
            .env("NO_COLOR", "1")
            .env_remove("LIGHT_LLM_MODEL_ID")
            .env_remove("LIGHT_LLM_BASE_URL")
            .args(["run", "--dialect", "tags", "--base-url"])
            .arg(server.base_url())
            .args(["--model", "scripted-model", "--yes", "--root"])
            .arg(&self.root)
            .arg(task)
            .write_stdin("");
        if let Some(light) = light {
            command
                .env("LIGHT_LLM_MODEL_ID", "light-model")
                .env("LIGHT_LLM_BASE_URL", light.base_url());
        }
        command.output().unwrap()
    }
}

fn ran(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    stderr
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A user hint `style` with a resource.
fn style_hint(place: &Place) {
    let hint = place.config().join("hints/style");
    write(
        &hint.join("HINT.md"),
        "# House style\nAnswer in haiku. HINTMARK-7\n",
    );
    write(&hint.join("res/a.txt"), "resource inside\n");
}

/// A user agent `counter` that may only list folders.
fn counter_agent(place: &Place) {
    write(
        &place.config().join("agents/counter.md"),
        "---\ndescription: Counts the files of a folder\ntools: fs.ls\n---\nROLEMARK-3: you count files.\n",
    );
}

#[test]
fn a_tags_run_sends_seed_000s_prompt_with_the_tree_the_agents_and_the_hints() {
    let place = Place::new();
    write(&place.root.join("src/main.rs"), "fn main() {}\n");
    style_hint(&place);
    counter_agent(&place);
    let server = ScriptedServer::replying(vec!["<return>\ndone\n</return>".to_owned()]);
    let output = place.run(&server, None, "Look around.");
    ran(&output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "done\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0].messages();
    assert_eq!(sent[0]["role"], "system");
    let system = content(&sent[0]);
    assert!(system.contains("main.rs"), "the tree: {system}");
    assert!(
        system.contains("**Predefined agents (for <create_agent name=NAME>):**\n- counter: Counts the files of a folder (tools: fs.ls)"),
        "{system}"
    );
    assert!(
        system.contains("**Hints you can load:**\n- style:"),
        "{system}"
    );
    assert!(!system.contains("{tree_info}"), "{system}");
    assert_eq!(content(&sent[1]), "Look around.");
}

#[test]
fn a_background_bash_call_is_a_job_that_get_job_log_reads_and_the_run_ends() {
    let place = Place::new();
    let server = ScriptedServer::replying(vec![
        "<bash_call background=true> python3 -u -c \"print('ready'); open('flag', 'w').close(); import time; time.sleep(30)\" </bash_call>".to_owned(),
        "<bash_call timeout=60> while [ ! -f flag ]; do sleep 0.1; done; echo seen </bash_call>".to_owned(),
        "<builtin>\nget_job_log\njob_id: job-1\nstart_line: 1\nmax_lines: 10\n</builtin>".to_owned(),
        "<return>\nthe server is ready\n</return>".to_owned(),
    ]);
    let output = place.run(&server, None, "Start the server.");
    ran(&output);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "the server is ready\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let started = requests[1].last_text();
    assert!(
        started.starts_with("<bash_call_result exit_code=-1 duration_ms=")
            && started.lines().next().unwrap().contains(" job_id=job-1"),
        "{started}"
    );
    assert!(started.contains("get_job_log"), "{started}");
    assert!(!started.contains("[job] "), "{started}");
    let pid: u32 = started
        .lines()
        .find_map(|line| line.strip_prefix("[pid] "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(requests[2].last_text().contains("seen\n"));
    let log = requests[3].last_text();
    assert!(
        log.starts_with("<builtin_result name=get_job_log ok=true>"),
        "{log}"
    );
    assert!(log.contains("ready"), "{log}");
    // The run was the job's session: its program is gone.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} still runs"
    );
}

#[test]
fn create_agent_with_a_name_runs_the_predefined_agent_with_its_role_and_tools() {
    let place = Place::new();
    counter_agent(&place);
    let server = ScriptedServer::replying(vec![
        "<create_agent name=nobody> Count the files. </create_agent>".to_owned(),
        "<create_agent name=counter> Count the files. </create_agent>".to_owned(),
        "<bash_call> ls | wc -l </bash_call>".to_owned(),
        "<create_agent> Help me count. </create_agent>".to_owned(),
        "<return>\nchild: counted none\n</return>".to_owned(),
        "<return>\nall done\n</return>".to_owned(),
    ]);
    let output = place.run(&server, None, "Count.");
    ran(&output);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "all done\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let unknown = requests[1].last_text();
    assert!(unknown.contains("ok=false"), "{unknown}");
    assert!(
        unknown.contains("\"nobody\"") && unknown.contains("available: counter"),
        "{unknown}"
    );
    // The child: the run's prompt with its role, and its task.
    let child = requests[2].messages();
    assert_eq!(child.len(), 2);
    let system = content(&child[0]);
    assert!(system.contains("ROLEMARK-3"), "{system}");
    assert!(system.contains("The tools you may use: fs.ls."), "{system}");
    assert_eq!(content(&child[1]), "Count the files.");
    // Its tools are only those its file names.
    let refused = requests[3].last_text();
    assert!(
        refused.starts_with("<bash_call_result exit_code=-1")
            && refused.contains("denied_by_policy")
            && refused.contains("fs.ls"),
        "{refused}"
    );
    let delegated = requests[4].last_text();
    assert!(
        delegated.contains("ok=false") && delegated.contains("agent.task"),
        "{delegated}"
    );
    let summary = requests[5].last_text();
    assert!(
        summary.starts_with("<child_summary ok=true agent=counter>"),
        "{summary}"
    );
    assert!(summary.contains("child: counted none"), "{summary}");
}

/// What an earlier run's model said.
const ZEBRA: &str = "The zebra migration runs with flyway from scripts/zebra.sh.";
/// What the light model answers every condensing request with.
const SUMMARY: &str = "Earlier work: zebra migration uses flyway (scripts/zebra.sh).";

#[test]
fn memory_query_hint_and_get_resource_work_through_builtin() {
    let place = Place::new();
    style_hint(&place);
    for said in [ZEBRA, "The cache keeps entries for 42 seconds."] {
        let earlier = ScriptedServer::replying(vec![format!("<return>\n{said}\n</return>")]);
        ran(&place.run(&earlier, None, "What do you know?"));
    }
    let server = ScriptedServer::replying(vec![
        "<builtin>\nmemory_query\nquery: zebra migration\n</builtin>\n<builtin>\nhint\naction: load\nname: style\n</builtin>".to_owned(),
        "<builtin>\nget_resource\npath: res/a.txt\n</builtin>".to_owned(),
        "<return>\ndone\n</return>".to_owned(),
    ]);
    let light = ScriptedServer::start(|_, _| Reply::completion_text(SUMMARY));
    ran(&place.run(&server, Some(&light), "Recall the migration."));
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    // The light model condensed the zebra window.
    let asked = light.requests();
    assert_eq!(asked.len(), 1);
    assert!(content(&asked[0].messages()[1]).contains(ZEBRA));
    let results = requests[1].last_text();
    assert!(
        results.contains("<builtin_result name=memory_query ok=true>") && results.contains(SUMMARY),
        "{results}"
    );
    assert!(
        results.contains("<builtin_result name=hint ok=true>"),
        "{results}"
    );
    // The loaded hint's HINT.md joins the requests after hint load.
    let holds_hint = |request: &RecordedRequest| {
        request.messages().iter().any(|m| {
            content(m).starts_with("[flycode] Loaded hints") && content(m).contains("HINTMARK-7")
        })
    };
    assert!(!holds_hint(&requests[0]));
    assert!(holds_hint(&requests[1]));
    let resource = requests[2].last_text();
    assert!(
        resource.starts_with("<builtin_result name=get_resource ok=true>")
            && resource.contains("resource inside"),
        "{resource}"
    );
}

#[test]
fn watch_with_tags_keeps_background_jobs_until_it_stops() {
    use super::common::{send_signal, spawn_watch, wait_for_file};

    let place = Place::new();
    let inbox = place.base.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let config = place.base.join("cfg");
    let child = spawn_watch(
        &inbox,
        &place.root,
        &place.base.join("state"),
        &["--dialect", "tags"],
        &[("XDG_CONFIG_HOME", &config)],
    );
    std::fs::write(
        inbox.join("one.md"),
        "<bash_call background=true> python3 -u -c \"print('ready'); open('flag', 'w').close(); import time; time.sleep(30)\" </bash_call>\n<bash_call timeout=60> while [ ! -f flag ]; do sleep 0.1; done; echo seen </bash_call>\n<builtin>\nget_job_log\njob_id: job-1\n</builtin>\n",
    )
    .unwrap();
    let answer = wait_for_file(&inbox.join("one.result.md"));
    assert!(
        answer.starts_with("<bash_call_result exit_code=-1 duration_ms=")
            && answer.lines().next().unwrap().contains(" job_id=job-1"),
        "{answer}"
    );
    assert!(
        answer.contains("<builtin_result name=get_job_log ok=true>"),
        "{answer}"
    );
    let log = answer.split("name=get_job_log").nth(1).unwrap();
    assert!(log.contains("ready"), "{answer}");
    let pid: u32 = answer
        .lines()
        .find_map(|line| line.strip_prefix("[pid] "))
        .unwrap()
        .parse()
        .unwrap();
    send_signal(child.id(), "TERM");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} outlived watch"
    );
}
