//! Integration test modules.

mod agent_client;
mod agent_prompt;
mod api_server;
mod cli_approval;
mod cli_check;
mod cli_clipboard;
mod cli_exec;
mod cli_prompt;
mod cli_run;
mod cli_watch;
mod common;
mod crash_safety;
mod hostile;
mod prompt_matches_schemas;
mod properties;
mod reply_fixtures;
mod result_snapshots;
mod search_race;
mod tool_scenarios;
mod tool_sets;
mod transcript_fixtures;
mod validate_formats;
mod watch_sessions;
