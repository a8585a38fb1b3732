//! How the `flycode` binary is linked on Linux (issue 41): both choices make a one-shot
//! `flycode exec` start faster, and neither changes what it does.
//!
//! - **Position-dependent** (`-no-pie`). A position-independent flycode spends most of a
//!   one-shot `flycode exec` before `main`: the loader patches about 40,000 relative
//!   relocations, which copies some 160 pages of the binary into private memory, one page fault
//!   each; a trivial call took 3.9 ms where `cat` takes 1.7. Linked at a fixed address the
//!   binary needs none of that. What it gives up is the random placement of the binary's own
//!   code (the libraries, the stack, the heap and every mapping stay random); flycode's own
//!   crates forbid `unsafe` code, so the memory-corruption attacks that this placement hardens
//!   against have to start in a dependency. README.md, "Speed", says this too.
//! - **The start-up code together** (`link/startup.order`, release builds linked by LLD). The
//!   few hundred functions a one-shot call runs are otherwise spread over the binary's 15 MB of
//!   code, and the kernel maps each 64 KB stretch of it that a call touches with a page fault of
//!   its own. The file lists them (`link/startup_order.sh` writes it from callgrind runs of the
//!   common calls); LLD places them side by side. A name the binary no longer has is skipped, so
//!   a stale list only costs speed.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=link/startup.order");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        return;
    }
    println!("cargo::rustc-link-arg-bins=-no-pie");
    if std::env::var("PROFILE").as_deref() == Ok("release") && links_with_rusts_lld() {
        let order = Path::new(env!("CARGO_MANIFEST_DIR")).join("link/startup.order");
        if order.is_file() {
            println!(
                "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
                order.display()
            );
            println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
}

/// Whether the binary is linked by the LLD that rustc brings, the default for
/// `x86_64-unknown-linux-gnu` since Rust 1.90 where the toolchain ships it (rustup's does; a
/// distribution's rustc may not): only LLD reads a symbol-ordering file (GNU ld and gold stop
/// at the option), so with any other linker, or a linker the user chose, nothing is added.
#[allow(
    clippy::disallowed_methods,
    reason = "the build script asks rustc its version and sysroot; flycode's own programs start in the sandbox"
)]
fn links_with_rusts_lld() -> bool {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target != "x86_64-unknown-linux-gnu" {
        return false;
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags.contains("linker") || flags.contains("link-self-contained") {
        return false;
    }
    let linker_var = format!(
        "CARGO_TARGET_{}_LINKER",
        target.to_uppercase().replace('-', "_")
    );
    if std::env::var_os(linker_var).is_some() {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let ask = |question: &str| {
        Command::new(&rustc)
            .arg(question)
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let Some(version) = ask("--version") else {
        return false;
    };
    let mut numbers = version
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|number| number.parse::<u32>().unwrap_or(0));
    let major = numbers.next().unwrap_or(0);
    let minor = numbers.next().unwrap_or(0);
    if (major, minor) < (1, 90) {
        return false;
    }
    // The LLD rustc links with when it is its default.
    ask("--print=sysroot").is_some_and(|sysroot| {
        Path::new(&sysroot)
            .join("lib/rustlib")
            .join(&target)
            .join("bin/gcc-ld/ld.lld")
            .is_file()
    })
}
