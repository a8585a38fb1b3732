#!/usr/bin/env bash
# Compares the fs.search engine (examples/search.rs, a thin CLI over flycode::tools::fs::search)
# with ripgrep on a large source tree: same queries, same filters, warm page cache.
#
# Usage: bench/search-vs-rg.sh            (env: CORPUS dir, SOURCE tree to copy, MIN_MB, RUNS)
#
# The corpus is copies of SOURCE (default ~/.cargo/registry/src) until it holds at least MIN_MB
# (default 200) megabytes; without SOURCE, generated Rust-like files. Every query runs once to
# warm up, then RUNS times (default 11), alternating the tools so that other load on the machine
# hits them alike; the median wall time is reported. flycode's output is sorted by path, so the
# like-for-like ripgrep is `rg --sort path` (single-threaded); plain `rg` (parallel, unordered) is
# shown as well. The matching lines (path:line) are checked to agree.
set -euo pipefail
set -f # the flags below hold globs for the tools, not for the shell

here="$(cd "$(dirname "$0")/.." && pwd)"
corpus="${CORPUS:-/tmp/flycode-search-corpus}"
source_tree="${SOURCE:-$HOME/.cargo/registry/src}"
min_mb="${MIN_MB:-200}"
runs="${RUNS:-11}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/tmp/target-search}"

if ! command -v rg >/dev/null; then
    apt-get install -y ripgrep >/dev/null 2>&1 || { apt-get update && apt-get install -y ripgrep; }
fi

if [ ! -f "$corpus/.complete" ]; then
    rm -rf "$corpus"
    mkdir -p "$corpus"
    copy=0
    while [ "$(du -sm "$corpus" | cut -f1)" -lt "$min_mb" ]; do
        copy=$((copy + 1))
        if [ -d "$source_tree" ]; then
            cp -r "$source_tree" "$corpus/copy$copy"
        else
            mkdir -p "$corpus/gen$copy"
            for i in $(seq 1 2000); do
                d="$corpus/gen$copy/m$((i % 40))"
                mkdir -p "$d"
                for j in $(seq 1 400); do
                    echo "    let value_$j = compute(input_$i, &options)?; // line $j of file $i"
                done >"$d/f$i.rs"
            done
        fi
    done
    touch "$corpus/.complete"
fi
echo "corpus: $corpus, $(du -sm "$corpus" | cut -f1) MB, $(find "$corpus" -type f | wc -l) files"
echo "rg: $(rg --version | head -1); cores: $(nproc)"

cargo build --release --quiet --manifest-path "$here/Cargo.toml" --example search
flycode="$CARGO_TARGET_DIR/release/examples/search"

# Wall time in seconds of one run of the command, output discarded.
wall() {
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }'
}

# Median of the numbers on standard input.
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# path:line of every matching line (the text may differ: flycode cuts long lines, drops CR).
locations() { "$@" 2>/dev/null | grep -a -E '^.+:[0-9]+:' | sed -E 's/^(.*):([0-9]+):.*$/\1:\2/' | LC_ALL=C sort; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }

compare() {
    local name="$1" query="$2" flycode_flags="$3" rg_flags="$4" same="yes" count
    local -a fly rg_sorted rg_par
    # Runs alternate between the three so that other load on the machine hits them alike.
    for i in $(seq 0 "$runs"); do
        # shellcheck disable=SC2086
        fly[i]=$(wall "$flycode" "$corpus" "$query" $flycode_flags)
        # shellcheck disable=SC2086
        rg_sorted[i]=$(wall rg -n --sort path $rg_flags -- "$query" "$corpus")
        # shellcheck disable=SC2086
        rg_par[i]=$(wall rg -n $rg_flags -- "$query" "$corpus")
    done
    # Run 0 was the warm-up.
    local f s p
    f=$(printf '%s\n' "${fly[@]:1}" | median)
    s=$(printf '%s\n' "${rg_sorted[@]:1}" | median)
    p=$(printf '%s\n' "${rg_par[@]:1}" | median)
    # shellcheck disable=SC2086
    if ! cmp -s <(locations "$flycode" "$corpus" "$query" $flycode_flags) \
        <(locations rg -n --sort path $rg_flags -- "$query" "$corpus"); then
        same="NO"
    fi
    # shellcheck disable=SC2086
    count=$("$flycode" "$corpus" "$query" $flycode_flags 2>/dev/null | wc -l)
    printf '%-20s %6s lines  flycode %.3fs  rg --sort path %.3fs (ratio %.2f)  rg %.3fs (ratio %.2f)  same lines: %s\n' \
        "$name" "$count" "$f" "$s" "$(ratio "$f" "$s")" "$p" "$(ratio "$f" "$p")" "$same"
}

compare "literal" "unsafe impl Send" "" "-F"
compare "regex" 'fn [a-z_]+_mut\(&mut self' "--regex" ""
compare "literal, glob *.rs" "TODO" "--glob *.rs" "-F -g *.rs"
