//! `flycode trust`: trust the project file that applies in a folder, list the trusted folders,
//! or revoke one (PROTOCOL.md §10 "Configuration").

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{Outcome, TrustArgs};
use crate::config::layers::{self, FileKind, Ignored, find_project_file};
use crate::config::trust::TrustStore;
use crate::config::{Config, ConfigError};
use crate::protocol::display::escape_for_terminal;
use crate::sandbox::protect::{CONFIG_FILE_NAME, user_config_dir};
use crate::sandbox::sha256_hex;

/// Runs `flycode trust`.
pub(crate) fn run(args: &TrustArgs) -> anyhow::Result<Outcome> {
    let store = TrustStore::user()?;
    if args.list {
        return list(&store);
    }
    let start = start_folder(args)?;
    let found = find_project_file(&start);
    if args.revoke {
        return revoke(&store, found.as_deref(), start);
    }
    let Some(file) = found else {
        return Err(crate::config::trust::TrustError::NoProjectFile(start).into());
    };
    trust(&store, &file)
}

/// The folder the command is about: the one named, else the current one.
fn start_folder(args: &TrustArgs) -> anyhow::Result<PathBuf> {
    Ok(match &args.dir {
        // A folder that is gone can still be revoked, by the name it was trusted under.
        Some(dir) if args.revoke => crate::sandbox::host::canonicalize(dir)
            .or_else(|_| std::path::absolute(dir))
            .with_context(|| format!("cannot name the folder {}", dir.display()))?,
        Some(dir) => crate::sandbox::host::canonicalize(dir)
            .with_context(|| format!("cannot open the folder {}", dir.display()))?,
        None => std::env::current_dir()?,
    })
}

/// `flycode trust --revoke`: forgets the folder of the project file `found` in `start`, else
/// `start` itself.
fn revoke(store: &TrustStore, found: Option<&Path>, start: PathBuf) -> anyhow::Result<Outcome> {
    // The folder of the file that applies there, else the folder named itself.
    let dir = found.and_then(|file| folder_of(file).ok()).unwrap_or(start);
    let text = if store.revoke(&dir)? {
        format!(
            "flycode: {} is no longer trusted: its flycode.toml may only tighten settings\n",
            dir.display()
        )
    } else {
        format!(
            "flycode: {} was not trusted; nothing changed\n",
            dir.display()
        )
    };
    print(&text)?;
    Ok(Outcome::Success)
}

/// Trusts the project file `file` (not the user's own configuration file) and says which of
/// its settings now apply.
fn trust(store: &TrustStore, file: &Path) -> anyhow::Result<Outcome> {
    let canonical = crate::sandbox::host::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    if user_config_dir().is_some_and(|dir| canonical == dir.join(CONFIG_FILE_NAME)) {
        print(&format!(
            "flycode: {} is your own configuration file: it always applies, there is nothing to trust\n",
            file.display()
        ))?;
        return Ok(Outcome::Success);
    }
    let dir = folder_of(file)?;
    let (sha256, unlocked) = judge(file, &dir)?;
    let record = store.trust_sha256(&dir, &sha256)?;
    let mut text = format!(
        "flycode: trusted {} (sha256 {}): its settings apply in {} and the folders below it; a change to the file makes it untrusted again\n",
        file.display(),
        &record.sha256[..12],
        dir.display()
    );
    if !unlocked.is_empty() {
        text.push_str("flycode: these settings of it now apply:\n");
        for ignored in &unlocked {
            text.push_str(&format!(
                "  {}:{}: {} = {}\n",
                ignored.path.display(),
                ignored.line,
                ignored.key,
                ignored.value
            ));
        }
    }
    print(&text)?;
    Ok(Outcome::Success)
}

/// The hash of the project file `file` in `dir` and what trusting it changes.
fn judge(file: &Path, dir: &Path) -> anyhow::Result<(String, Vec<Ignored>)> {
    // What trusting changes: the settings the file says that are ignored while it is untrusted,
    // judged from the very bytes whose hash is recorded, read once. Files that do not load
    // (not UTF-8) are trusted by their bytes, with nothing to list.
    let loaded = layers::load(Some(dir), user_config_dir().as_deref(), None).ok();
    let judged = loaded.and_then(|layers| {
        let sha256 = layers.files.iter().find_map(|file| match &file.kind {
            FileKind::Project { sha256, .. } => Some(sha256.clone()),
            FileKind::User => None,
        })?;
        Some((sha256, layers.ignored))
    });
    Ok(match judged {
        Some(judged) => judged,
        None => {
            let bytes = crate::sandbox::host::read(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            (sha256_hex(&bytes), Vec::new())
        }
    })
}

/// `watch` and `run` on a terminal: when an untrusted project file's settings are ignored, shows
/// the notice and asks on the terminal whether to trust the folder now (PROTOCOL.md §10
/// "Configuration"). Trusts only the very bytes that were judged: a file changed since is left
/// untrusted. Nothing is asked under `--yes` (an unattended run) or without a terminal; a
/// configuration that does not load is left for the command to report. The configuration
/// `loaded` once at the command's start comes back, its project file's settings applied when
/// the person trusted it (merged again from the bytes read then, not read a second time).
pub(crate) fn offer_trust(
    flags: &super::RunFlags,
    loaded: Result<Config, ConfigError>,
) -> Result<Config, ConfigError> {
    use std::io::IsTerminal;
    // An image the secrets hand-off restarted was asked already, before the restart.
    let restarted = std::env::var_os(crate::sandbox::secret_env::HANDOFF_VARIABLE).is_some();
    if flags.yes || restarted || !std::io::stderr().is_terminal() {
        return loaded;
    }
    let config = loaded?;
    if ask_to_trust(&config) {
        return config.trusting_project();
    }
    Ok(config)
}

/// Asks whether to trust the untrusted project file of `config` and records the trust; whether
/// it is trusted now.
fn ask_to_trust(config: &Config) -> bool {
    use std::io::BufRead;
    let Some(notice) = crate::config::show::notice(&config.layers) else {
        return false;
    };
    let project = config
        .layers
        .files
        .iter()
        .find_map(|file| match &file.kind {
            FileKind::Project {
                dir,
                trusted: false,
                sha256,
            } => Some((file.parsed.path.clone(), dir.clone(), sha256.clone())),
            _ => None,
        });
    let (Some((file, dir, shown_sha)), Ok(tty)) = (project, crate::sandbox::host::open_terminal())
    else {
        return false;
    };
    super::show_notice_once(&notice);
    let Ok(mut writer) = tty.try_clone() else {
        return false;
    };
    let question = format!(
        "Trust {} now, so all its settings apply? [y/N] ",
        file.display()
    );
    if writer
        .write_all(escape_for_terminal(&question).as_bytes())
        .and_then(|()| writer.flush())
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    if std::io::BufReader::new(tty).read_line(&mut answer).is_err()
        || !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    {
        return false;
    }
    let outcome = crate::sandbox::host::read(&file)
        .map_err(|error| error.to_string())
        .and_then(|bytes| {
            if sha256_hex(&bytes) != shown_sha {
                return Err("it changed since it was read; review it and run flycode trust".into());
            }
            let store = TrustStore::user().map_err(|error| error.to_string())?;
            store.trust(&dir, &bytes).map_err(|error| error.to_string())
        });
    // Asked before the secrets hand-off (`run` and `watch` call this first), so a key variable
    // that only this file names is handed off in this very run.
    match outcome {
        Ok(_) => {
            eprintln!(
                "flycode: trusted {}; a change to it makes it untrusted again",
                escape_for_terminal(&file.display().to_string())
            );
            true
        }
        Err(why) => {
            eprintln!(
                "flycode: {} was not trusted: {}",
                escape_for_terminal(&file.display().to_string()),
                escape_for_terminal(&why)
            );
            false
        }
    }
}

/// The trusted folders, each with whether its file is still the one trusted.
fn list(store: &TrustStore) -> anyhow::Result<Outcome> {
    let trusted = store.list()?;
    let mut text = String::new();
    if trusted.is_empty() {
        text.push_str(&format!(
            "no trusted folders ({} lists none)\n",
            store.file().display()
        ));
    }
    for entry in &trusted {
        let file = entry.dir.join(CONFIG_FILE_NAME);
        let state = match crate::sandbox::host::read(&file) {
            Ok(bytes) if sha256_hex(&bytes) == entry.sha256 => "trusted",
            Ok(_) => "changed since: untrusted until trusted again",
            Err(_) => "no flycode.toml there now",
        };
        text.push_str(&format!(
            "{}  sha256 {}  {state}\n",
            entry.dir.display(),
            entry.sha256.get(..12).unwrap_or(&entry.sha256)
        ));
    }
    print(&text)?;
    Ok(Outcome::Success)
}

/// The folder a project file was found in, links resolved (as the loader names it).
fn folder_of(file: &Path) -> anyhow::Result<PathBuf> {
    layers::project_dir(file)
        .with_context(|| format!("cannot open the folder of {}", file.display()))
}

fn print(text: &str) -> anyhow::Result<()> {
    std::io::stdout()
        .lock()
        .write_all(escape_for_terminal(text).as_bytes())?;
    Ok(())
}
