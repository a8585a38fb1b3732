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
//! - **The unwinder linked in** (GNU/Linux targets whose C compiler has the static
//!   `libgcc_eh.a`). The standard library asks for the shared `libgcc_s` (panics and backtraces
//!   unwind with it), a library every start then loads, relocates and runs the start-up code of;
//!   without it a trivial `exec` takes about 7 % less (issue 41). A one-line linker script named
//!   `libgcc_s.so`, found before the real one, hands the linker `libgcc_eh.a` instead: the same
//!   unwinder, the one `gcc -static-libgcc` links, inside the binary. Where the compiler has no
//!   `libgcc_eh.a`, nothing changes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=link/startup.order");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    println!("cargo::rerun-if-env-changed=CC");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        return;
    }
    println!("cargo::rustc-link-arg-bins=-no-pie");
    if let Some(folder) = unwinder_linked_in() {
        println!("cargo::rustc-link-arg-bins=-L{}", folder.display());
    }
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

/// The folder of the linker script that hands the linker the static unwinder when the standard
/// library asks for `-lgcc_s`, if this is a native glibc build and the C compiler has
/// `libgcc_eh.a`.
#[allow(
    clippy::disallowed_methods,
    reason = "the build script asks the C compiler where its library is and writes into its own OUT_DIR; flycode's own programs and files go through the sandbox"
)]
fn unwinder_linked_in() -> Option<PathBuf> {
    let is_gnu = std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    // A static build links libgcc_eh itself.
    if !is_gnu || features.split(',').any(|feature| feature == "crt-static") {
        return None;
    }
    // The compiler asked is the host's: its archive is only the target's when they are one.
    if std::env::var("HOST").ok() != std::env::var("TARGET").ok() {
        return None;
    }
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let output = Command::new(compiler)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .filter(|output| output.status.success())?;
    // The full path when the compiler has it, the bare name when it does not.
    let archive = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    if !archive.is_absolute() || !archive.is_file() {
        return None;
    }
    let folder = PathBuf::from(std::env::var_os("OUT_DIR")?).join("unwinder");
    std::fs::create_dir_all(&folder).ok()?;
    let script = format!("INPUT(\"{}\")\n", archive.display());
    std::fs::write(folder.join("libgcc_s.so"), script).ok()?;
    Some(folder)
}
