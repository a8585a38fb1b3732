//! `flycode mcp`: serve the tools to an MCP client over standard input and output (PROTOCOL.md
//! §14 (The MCP server)). Standard output carries the protocol alone; this command's own words go to standard
//! error.

use super::{ApproveMode, McpArgs, Outcome, RunFlags, hand_off_secrets, open_sandbox};
use crate::mcp::{McpServer, McpSettings, serve_stdio};
use crate::protocol::ToolSet;
use crate::sandbox::AuditLog;

/// The flycode.toml a user edits to allow a call: the trusted project file, else the user's
/// configuration file (an untrusted project file cannot allow a call: PROTOCOL.md §10).
fn settings_file(config: &crate::config::Config) -> std::path::PathBuf {
    config
        .settings_file()
        .unwrap_or_else(|| "flycode.toml".into())
}

/// Runs `flycode mcp` until the client closes the connection.
pub(crate) fn run(args: McpArgs) -> anyhow::Result<Outcome> {
    let approve = args.approve;
    let flags = RunFlags {
        roots: args.roots,
        approve: args.approve,
        yes: false,
        lenient: false,
        tools: None,
        dialect: None,
    };
    let loaded = crate::config::Config::load(&super::config_flags(&flags));
    hand_off_secrets(loaded.as_ref().ok());
    let (config, sandbox) = open_sandbox(&flags, loaded)?;
    // flycode.toml's `tools` is the chat front ends' set; an MCP client gets the extended set.
    let tool_set = args.tools.map_or(ToolSet::Extended, Into::into);
    let roots = sandbox
        .roots()
        .iter()
        .map(|root| root.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    eprintln!(
        "flycode mcp: serving {} tools over stdio; allowed roots: {roots}",
        tool_set.as_str()
    );
    let server = McpServer::new(
        sandbox,
        McpSettings {
            policy: config.policy.clone(),
            limits: crate::tools::Limits {
                tool_set,
                ..super::door_limits(&config)
            },
            tool_set,
            protected: config.protected.clone(),
            audit: AuditLog::default_location(),
            config_file: settings_file(&config),
            configuration_note: crate::config::show::brief_notice(&config.layers),
            undo: super::undo_recorder(&config, "mcp"),
            approve_flag: match approve {
                Some(ApproveMode::Ask) => Some("--approve ask".to_owned()),
                Some(ApproveMode::ReadOnly) => Some("--approve read-only".to_owned()),
                Some(ApproveMode::Auto) | None => None,
            },
        },
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve_stdio(server))?;
    Ok(Outcome::Success)
}
