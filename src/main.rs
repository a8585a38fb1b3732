//! The `flycode` binary: parse the command line, run it, turn the outcome into an exit status.

use std::process::ExitCode;

use flycode::cli::{self, Cli, Outcome};

fn main() -> ExitCode {
    // flycode's own guardian and front (PROTOCOL.md §11 (Security), "No program outlives
    // flycode"): images of this binary started with a hidden first argument.
    if let Some(status) = flycode::sandbox::hidden_mode() {
        return ExitCode::from(status);
    }
    // While this is the only thread (see the function).
    flycode::sandbox::reserve_descriptor_table();
    // Before anything a project or the command line says (PROTOCOL.md §11 Security, "flycode's
    // own places").
    flycode::sandbox::own_places::decide_own_places();
    let outcome = match cli::run(Cli::from_command_line()) {
        Ok(outcome) => outcome,
        Err(error) if is_broken_pipe(&error) => Outcome::Success,
        Err(error) if error.is::<flycode::cli::exec::NoCall>() => Outcome::NoCall,
        Err(error) => {
            eprintln!("flycode: {}", cli::describe_error(&error));
            Outcome::Usage
        }
    };
    // Stopped by a signal: 128 plus the signal, as a shell reports it.
    if let Some(status) = flycode::cli::signals::exit_status() {
        return ExitCode::from(status);
    }
    ExitCode::from(outcome as u8)
}

/// A reader that went away (`flycode prompt | head`) is not an error.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
