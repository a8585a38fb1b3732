//! Links the `flycode` binary as a position-dependent executable on Linux (issue 41).
//!
//! A position-independent flycode spends most of a one-shot `flycode exec` before `main`: the
//! loader patches about 40,000 relative relocations, which copies some 160 pages of the binary
//! into private memory, one page fault each; a trivial call took 3.9 ms where `cat` takes 1.7.
//! Linked at a fixed address the binary needs none of that. What it gives up is the random
//! placement of the binary's own code (the libraries, the stack, the heap and every mapping
//! stay random); flycode's own crates forbid `unsafe` code, so the memory-corruption attacks
//! that this placement hardens against have to start in a dependency. README.md, "Speed",
//! says this too.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo::rustc-link-arg-bins=-no-pie");
    }
}
