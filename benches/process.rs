//! The cost of running a command through the sandbox's process runner, against a bare spawn.
//!
//! Target: `run_process("/bin/true")` within 2 ms of `Command::new("/bin/true").status()` (pipes,
//! three watcher threads, the process-group and stray-child clean-up), and the Landlock
//! containment (`run_process_contained`: the ruleset built in the parent, applied between fork
//! and exec, the private TMPDIR made and removed) under 1 ms more than `run_process`.

#![allow(clippy::disallowed_methods)] // a benchmark makes its fixtures directly

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flycode::sandbox::contain::{Containment, ProgramSandbox};
use flycode::sandbox::{ProcessSpec, run_process};

fn spawn_true(c: &mut Criterion) {
    let spec = ProcessSpec {
        program: "/bin/true".to_owned(),
        args: Vec::new(),
        cwd: PathBuf::from("/"),
        env_set: Vec::new(),
        env_remove: vec!["FLYCODE_API_KEY".to_owned()],
        timeout: Duration::from_secs(60),
        output_cap: 64 * 1024,
        cancel: None,
        containment: None,
    };
    let mut group = c.benchmark_group("spawn_true");
    group.bench_function("run_process", |b| {
        b.iter(|| run_process(black_box(&spec)).map(|outcome| outcome.exit_code))
    });
    let contained = ProcessSpec {
        containment: Containment::new(
            ProgramSandbox::WorkspaceWrite,
            false,
            &[std::env::temp_dir()],
        ),
        ..spec.clone()
    };
    group.bench_function("run_process_contained", |b| {
        b.iter(|| run_process(black_box(&contained)).map(|outcome| outcome.exit_code))
    });
    // Where the containment's cost goes: what is built before the fork (the private TMPDIR and
    // the ruleset, which opens the allowed paths), against the whole contained run.
    if let Some(containment) = contained.containment.clone() {
        group.bench_function("contain_prepare", |b| {
            b.iter(|| flycode::sandbox::contain::prepare(black_box(&containment)).is_ok())
        });
    }
    group.bench_function("containment_new", |b| {
        b.iter(|| {
            Containment::new(
                ProgramSandbox::WorkspaceWrite,
                false,
                black_box(&[std::env::temp_dir()]),
            )
        })
    });
    group.bench_function("command_status", |b| {
        b.iter(|| {
            Command::new(black_box("/bin/true"))
                .status()
                .map(|s| s.code())
        })
    });
    group.finish();
}

criterion_group!(benches, spawn_true);
criterion_main!(benches);
