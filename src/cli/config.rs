//! `flycode config`: the effective settings with where each comes from, or (`--check`) every
//! mistake of the configuration files at once (PROTOCOL.md §10 "Configuration").

use std::io::Write;

use serde_json::json;

use super::{ConfigArgs, Outcome};
use crate::config::file::Mistake;
use crate::config::layers::{self, FileKind, Layers};
use crate::config::trust::TrustStore;
use crate::config::{Config, Flags, show};
use crate::protocol::display::escape_for_terminal;
use crate::sandbox::protect::user_config_dir;

/// Runs `flycode config`.
pub(crate) fn run(args: &ConfigArgs) -> anyhow::Result<Outcome> {
    let cwd = std::env::current_dir()?;
    if let Some(file) = &args.check {
        return check(args.json, file.as_deref(), &cwd);
    }
    let flags = Flags {
        roots: args.roots.roots.clone(),
        approval: args.approve.map(Into::into),
        tool_set: args.tools.map(Into::into),
    };
    let config = match Config::load(&flags) {
        Ok(config) => config,
        Err(crate::config::ConfigError::Mistakes(mistakes)) => {
            report_mistakes(args.json, &mistakes, &[])?;
            eprintln!("flycode: fix these mistakes first; the settings cannot be shown until then");
            return Ok(Outcome::Usage);
        }
        Err(error) => return Err(error.into()),
    };
    let rows = show::rows(&config, &cwd, &|name| std::env::var(name).ok());
    let mut out = std::io::stdout().lock();
    if args.json {
        let files = files_json(&config.layers);
        let settings = rows
            .iter()
            .map(|row| json!({"key": row.key, "value": row.value, "source": row.source}))
            .collect::<Vec<_>>();
        let ignored = config
            .layers
            .ignored
            .iter()
            .map(|i| {
                json!({"key": i.key.to_string(), "value": i.value, "file": i.path, "line": i.line, "why": i.why})
            })
            .collect::<Vec<_>>();
        writeln!(
            out,
            "{}",
            json!({"files": files, "settings": settings, "ignored": ignored})
        )?;
        return Ok(Outcome::Success);
    }
    let mut text = files_text(&config.layers);
    let width = rows.iter().map(|row| row.key.len()).max().unwrap_or(0);
    for row in &rows {
        text.push_str(&format!(
            "{:width$} = {}  # {}\n",
            row.key, row.value, row.source
        ));
    }
    if let Some((_, dir, false)) = config.layers.project()
        && !config.layers.ignored.is_empty()
    {
        text.push_str(&format!(
            "# to apply the ignored settings, review the file and run: {}\n",
            show::trust_command(dir)
        ));
    }
    out.write_all(escape_for_terminal(&text).as_bytes())?;
    Ok(Outcome::Success)
}

/// The files read, one comment line each.
fn files_text(layers: &Layers) -> String {
    let mut text = String::new();
    if layers.files.is_empty() {
        text.push_str(
            "# no flycode.toml applies here: every setting is a default, a variable or a flag\n",
        );
    }
    for file in &layers.files {
        let what = match &file.kind {
            FileKind::User => "user file".to_owned(),
            FileKind::Project { trusted: true, .. } => "project file, trusted".to_owned(),
            FileKind::Project {
                dir,
                trusted: false,
                ..
            } => format!(
                "project file, NOT trusted: only settings that do not loosen safety apply ({})",
                show::trust_command(dir)
            ),
        };
        text.push_str(&format!("# {}: {what}\n", file.parsed.path.display()));
    }
    text
}

fn files_json(layers: &Layers) -> Vec<serde_json::Value> {
    layers
        .files
        .iter()
        .map(|file| match &file.kind {
            FileKind::User => json!({"path": file.parsed.path, "layer": "user", "trusted": true}),
            FileKind::Project { dir, trusted, .. } => json!({
                "path": file.parsed.path,
                "layer": "project",
                "trusted": trusted,
                "trust_command": show::trust_command(dir),
            }),
        })
        .collect()
}

/// `--check`: every mistake of `file`, or of every file that applies in `cwd`.
fn check(
    as_json: bool,
    file: Option<&std::path::Path>,
    cwd: &std::path::Path,
) -> anyhow::Result<Outcome> {
    let (mistakes, checked) = match file {
        Some(path) => {
            let parsed = layers::read(path)?;
            (parsed.mistakes, vec![path.to_owned()])
        }
        None => {
            let user_dir = user_config_dir();
            let store = user_dir.as_deref().map(TrustStore::in_dir);
            let layers = layers::load(Some(cwd), user_dir.as_deref(), store.as_ref())?;
            let checked = layers
                .files
                .iter()
                .map(|file| file.parsed.path.clone())
                .collect::<Vec<_>>();
            (layers.mistakes(), checked)
        }
    };
    report_mistakes(as_json, &mistakes, &checked)?;
    Ok(if mistakes.is_empty() {
        Outcome::Success
    } else {
        Outcome::Usage
    })
}

fn report_mistakes(
    as_json: bool,
    mistakes: &[Mistake],
    checked: &[std::path::PathBuf],
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if as_json {
        let list = mistakes
            .iter()
            .map(|m| json!({"file": m.path, "line": m.line, "message": m.message}))
            .collect::<Vec<_>>();
        writeln!(out, "{}", json!({"checked": checked, "mistakes": list}))?;
        return Ok(());
    }
    let mut text = String::new();
    for mistake in mistakes {
        text.push_str(&format!("{mistake}\n"));
    }
    if !checked.is_empty() || !mistakes.is_empty() {
        let files = if checked.is_empty() {
            String::new()
        } else {
            format!(
                " in {}",
                checked
                    .iter()
                    .map(|path| path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        text.push_str(&match mistakes.len() {
            0 => format!("no mistakes{files}\n"),
            1 => format!("1 mistake{files}\n"),
            n => format!("{n} mistakes{files}\n"),
        });
    } else {
        text.push_str("no flycode.toml applies here: nothing to check\n");
    }
    out.write_all(escape_for_terminal(&text).as_bytes())?;
    Ok(())
}
