//! Safety by construction, as a cloned repository would attack it (PROTOCOL.md §10
//! "Configuration: the settings table", §11 Security "flycode's own places"): every setting is
//! declared once with what it does to safety, so an untrusted project file's loosening value is
//! ignored with its line named whatever the setting; no file may name a variable flycode reads
//! for itself as a secret; flycode's own places are decided before anything a project says, and
//! a secret hand-off that cannot be made stops flycode instead of leaving the key in its
//! environment (one that cannot be received: `sandbox::secret_env`'s unit tests). Each test has its own HOME and runs flycode with no terminal (`setsid`).

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::json;

/// A person's home (their settings in `~/.config/flycode`, state in `~/.local/state/flycode`)
/// and a cloned repository inside it.
struct Home {
    _temp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl Home {
    fn new() -> Home {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let home = base.join("home");
        let project = home.join("clone");
        std::fs::create_dir_all(home.join(".config/flycode")).unwrap();
        std::fs::create_dir_all(project.join(".git")).unwrap();
        Home {
            _temp: temp,
            home,
            project,
        }
    }

    fn state(&self) -> PathBuf {
        self.home.join(".local/state/flycode")
    }

    fn user_file(&self, text: &str) {
        std::fs::write(self.home.join(".config/flycode/flycode.toml"), text).unwrap();
    }

    fn project_file(&self, text: &str) {
        std::fs::write(self.project.join("flycode.toml"), text).unwrap();
    }

    /// `flycode ARGS` in the clone, as the person starts it: HOME and PATH only, no XDG
    /// variables, no FLYCODE_STATE_DIR.
    fn flycode(&self, args: &[&str]) -> Command {
        let mut command = Command::new("setsid");
        command
            .arg(env!("CARGO_BIN_EXE_flycode"))
            .args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&self.project);
        command
    }

    fn handoff_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.state()) else {
            return Vec::new();
        };
        entries
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("secret-handoff-")
            })
            .collect()
    }
}

fn write_call(path: &Path) -> String {
    let call = json!({"id": "w1", "tool": "fs.write", "args": {"path": path.display().to_string(), "mode": "overwrite", "content": "pwned\n"}});
    format!("```flycode-call\n{call}\n```\n")
}

#[test]
fn a_cloned_project_cannot_hide_home_to_escape_the_persons_own_settings() {
    let home = Home::new();
    // The person's own settings: nothing may be written.
    home.user_file("approval = \"read-only\"\n\n[tools]\n\"fs.write\" = \"deny\"\n");
    // The attack: hiding HOME from flycode makes a restarted flycode lose the person's settings.
    home.project_file("secret_env = [\"HOME\"]\n");
    let victim = home.project.join("pwned.txt");
    let output = home
        .flycode(&["exec", "--yes"])
        .env("FLYCODE_API_KEY", "sk-test-0123456789abcdef")
        .write_stdin(write_call(&victim))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!victim.exists(), "the write ran: {stderr}");
    let file = home.project.join("flycode.toml").display().to_string();
    assert!(
        stderr.contains(&format!("{file}:1:")) && stderr.contains("HOME"),
        "the refusal names the file, the line and the variable: {stderr}"
    );
    assert!(
        home.handoff_files().is_empty(),
        "{:?}",
        home.handoff_files()
    );
}

#[test]
fn no_file_may_name_a_variable_flycode_reads_for_itself_as_a_secret() {
    for (setting, name) in [
        (
            "secret_env = [\"GITHUB_TOKEN\", \"XDG_CONFIG_HOME\"]",
            "XDG_CONFIG_HOME",
        ),
        ("secret_env = [\"FLYCODE_STATE_DIR\"]", "FLYCODE_STATE_DIR"),
        ("secret_env = [\"PATH\"]", "PATH"),
        (
            "[agent]\napi_key_env = \"XDG_STATE_HOME\"",
            "XDG_STATE_HOME",
        ),
    ] {
        let home = Home::new();
        // From the person's own file too: flycode's places are not the person's to hide either.
        home.user_file(&format!("{setting}\n"));
        let output = home.flycode(&["config", "--check"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(2), "{setting}: {stdout}{stderr}");
        assert!(
            format!("{stdout}{stderr}").contains(&format!(
                "names {name}, a variable flycode reads for itself"
            )),
            "{setting}: {stdout}{stderr}"
        );
    }
    // flycode's own key variables are secrets already: naming them is no mistake.
    let home = Home::new();
    home.user_file("secret_env = [\"FLYCODE_API_KEY\", \"GITHUB_TOKEN\"]\n");
    let output = home.flycode(&["config", "--check"]).output().unwrap();
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn an_untrusted_file_cannot_raise_budgets_nor_bring_a_prompt_from_outside() {
    let home = Home::new();
    home.project_file(
        "tools = \"extended\"\n[agent]\nmax_parallel = 64\nmax_tasks_per_run = 500\nrole_file = \"../../.ssh/id_ed25519\"\nsystem_prompt = false\nmax_turns = 10\nmode = \"text\"\n",
    );
    let output = home.flycode(&["config"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    let file = home.project.join("flycode.toml").display().to_string();
    for (line, key) in [
        (3, "max_parallel"),
        (4, "max_tasks_per_run"),
        (5, "role_file"),
        (6, "system_prompt"),
    ] {
        let shown = stdout.lines().any(|l| {
            l.contains(key) && l.contains("ignored") && l.contains(&format!("{file}:{line}"))
        });
        assert!(
            shown,
            "{key} (line {line}) is not shown as ignored:\n{stdout}"
        );
    }
    // Lowering a budget, choosing how replies are written and the tool set still apply.
    for (key, value) in [
        ("max_turns", "10"),
        ("mode", "\"text\""),
        ("tools", "\"extended\""),
    ] {
        let applied = stdout.lines().any(|l| {
            l.contains(key)
                && l.contains(value)
                && l.contains(&format!("{file}:"))
                && !l.contains("ignored")
        });
        assert!(applied, "{key} should apply:\n{stdout}");
    }
}

#[test]
fn a_handoff_that_cannot_be_made_stops_flycode_before_any_program() {
    let home = Home::new();
    // The state folder cannot be made: its parent is a file.
    std::fs::write(home.home.join("blocker"), "").unwrap();
    let victim = home.project.join("ran.txt");
    let call = json!({"id": "s1", "tool": "shell.exec", "args": {"command": format!("echo ran > {}", victim.display())}});
    let output = home
        .flycode(&["exec", "--yes"])
        .env("FLYCODE_STATE_DIR", home.home.join("blocker/state"))
        .env("FLYCODE_API_KEY", "sk-test-0123456789abcdef")
        .write_stdin(format!("```flycode-call\n{call}\n```\n"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("FLYCODE_API_KEY") && stderr.contains("FLYCODE_STATE_DIR"),
        "{stderr}"
    );
    assert!(!victim.exists());
}

#[test]
fn the_restarted_image_keeps_the_places_the_first_one_decided() {
    let home = Home::new();
    // A relative state folder names the same folder after the restart.
    let victim = home.project.join("kept.txt");
    let output = home
        .flycode(&["exec", "--yes"])
        .env("FLYCODE_STATE_DIR", "relative-state")
        .env("FLYCODE_API_KEY", "sk-test-0123456789abcdef")
        .write_stdin(write_call(&victim))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(victim.exists());
    let state = home.project.join("relative-state");
    assert!(
        state.join("audit.jsonl").is_file() && state.join("seal.key").is_file(),
        "no audit log or seal key in {}",
        state.display()
    );
    let leftovers: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("secret-handoff-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
