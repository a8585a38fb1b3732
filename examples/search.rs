//! A command-line front to the `fs.search` engine, for `bench/search-vs-rg.sh`: it runs one search
//! and prints the rendered lines, as `rg -n` would.
//!
//! Usage: `search PATH QUERY [--regex] [--glob GLOB] [--limit N] [--context N]`.

use std::io::Write;
use std::process::ExitCode;

use flycode::tools::fs::search::{SearchRequest, search};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(query)) = (args.next(), args.next()) else {
        eprintln!("usage: search PATH QUERY [--regex] [--glob GLOB] [--limit N] [--context N]");
        return ExitCode::from(2);
    };
    let mut request = SearchRequest::new(path, query);
    request.limit = usize::MAX;
    while let Some(flag) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match flag.as_str() {
            "--regex" => request.regex = true,
            "--glob" => request.glob = Some(value()),
            "--limit" => request.limit = value().parse().unwrap_or(100),
            "--context" => request.context_lines = value().parse().unwrap_or(0),
            other => {
                eprintln!("unknown flag {other}");
                return ExitCode::from(2);
            }
        }
    }
    match search(&request) {
        Ok(output) => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(output.render().as_bytes());
            eprintln!(
                "{} lines, {} files searched, {} matched, truncated {}",
                output.lines.len(),
                output.files_searched,
                output.files_matched,
                output.truncated
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e} ({})", e.code());
            ExitCode::from(1)
        }
    }
}
