//! The source files import one another one way: no two files of a crate (`src/`, and each of
//! `crates/*/src/`) import each other in a loop (an "import circle"); between crates, Cargo
//! itself refuses a circle. A circle makes two files one unit that can only be read, tested and
//! changed together; it usually means a shared item sits in the wrong file.
//!
//! This test reads `src/**/*.rs`, builds the file-level import graph from the code's own paths
//! (`use crate::…`, `use super::…`, `use self::…`, a module's `use child::…`, and inline paths
//! such as `super::x::f()`, `crate::a::B` or `child::f()`, also from inside an inline
//! `mod linux { … }`), and fails naming every circle with the names that tie it. A name is
//! followed to the file that defines it, through the `use` and `pub use` of the files on the way,
//! so `crate::sandbox::Sandbox` ties to the file that defines `Sandbox`, not to `sandbox/mod.rs`.
//!
//! What draws no arrow: a module's re-export of its own children (`pub use child::Item;`, its
//! face); a path between a module and its own descendants (`cli/mod.rs` and `cli/run.rs` are one
//! module by design: the parent holds what its children share and hands work to them); code under
//! `#[cfg(test)]` (tests may borrow from anywhere); comments and string literals.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from the crate root (`["sandbox", "write"]`).
type ModPath = Vec<String>;

/// One source file of the library: its module path and its tokens (comments and literals gone).
struct SourceFile {
    module: ModPath,
    tokens: Vec<String>,
    /// Names this file defines itself (`fn`, `struct`, `enum`, `trait`, `type`, `const`,
    /// `static`, `mod`, `union`, `macro_rules!`).
    defines: BTreeSet<String>,
    /// Child modules declared here (`mod run;`).
    children: BTreeSet<String>,
    /// Child modules compiled for tests only (`#[cfg(test)] mod tests;`).
    test_children: BTreeSet<String>,
    /// For each token, the module it stands in (the file's, or an inline `mod linux { … }`).
    scopes: Vec<ModPath>,
    /// Names brought in by `use`: the name it binds → the full path written and the module it
    /// was written in.
    imports: BTreeMap<String, (Vec<String>, ModPath)>,
    /// Glob imports (`use x::*;`): full module paths and the module they were written in.
    globs: Vec<(Vec<String>, ModPath)>,
}

/// The whole library: files by module path.
struct Crate {
    files: BTreeMap<ModPath, (PathBuf, SourceFile)>,
}

/// One arrow: the importing file, the imported file and the names that tie them.
type Edges = BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>>;

/// The source folders of the workspace's crates: the package's own and each of `crates/`.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src")];
    for name in [
        "flycode-protocol",
        "flycode-sandbox",
        "flycode-core",
        "flycode-agent",
    ] {
        sources.push(root.join("crates").join(name).join("src"));
    }
    sources
}

#[test]
fn no_source_files_import_each_other_in_a_circle() {
    let circles: Vec<String> = crate_sources()
        .iter()
        .flat_map(|src| circles_in(src))
        .collect();
    assert!(
        circles.is_empty(),
        "import circles among the source files (move the shared item to the lower file, or to a \
         small file both use, so that imports point one way):\n{}",
        circles.join("\n")
    );
}

/// No door assembles the call service by hand (ARCHITECTURE.md, "Where to add a door"): a
/// door opens a `DoorSession`, which cannot be opened without its audit log and undo recorder,
/// and takes its executors from it, so no door can forget either (PROTOCOL.md §16 (Undo and
/// history)). `Executor::builder` and `Executor::new` are for tests and benchmarks: outside the
/// call service (`crates/flycode-core/src/tools/executor/`) only test code may call them.
#[test]
fn no_door_builds_an_executor_by_hand() {
    let mut found = Vec::new();
    for src in crate_sources() {
        let in_core = src.ends_with("crates/flycode-core/src");
        let krate = read_crate(&src);
        for (module, (path, file)) in &krate.files {
            if in_core && module.starts_with(&["tools".to_owned(), "executor".to_owned()]) {
                continue;
            }
            for window in file.tokens.windows(3) {
                if window[0] == "Executor"
                    && window[1] == "::"
                    && matches!(window[2].as_str(), "builder" | "new")
                {
                    found.push(format!("{}: Executor::{}", path.display(), window[2]));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "doors build executors by hand instead of taking them from their DoorSession \
         (DoorSession::executor):\n{}",
        found.join("\n")
    );
}

/// The detector itself finds circles written in every way a path can be written, and draws no
/// arrow for what is no dependency: a face's re-export of its children, a module and its own
/// children, test code, comments and strings.
#[test]
fn the_detector_finds_circles_of_every_kind_of_path() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\n",
    );
    // a/mod.rs only re-exports its children: a face, no arrows of its own.
    write(
        "a/mod.rs",
        "mod one;\nmod two;\npub use one::First;\npub use two::{Second, helper};\n",
    );
    // Circle 1: one <-> two through `use super::…` (via the face) and an inline call.
    write(
        "a/one.rs",
        "use super::Second;\npub struct First;\nfn f() { super::two::helper(); }\n",
    );
    write(
        "a/two.rs",
        "// use crate::d::D; (a comment draws no arrow)\n\
         use crate::a::First;\npub struct Second;\npub fn helper() {}\n\
         const S: &str = \"use crate::d::D;\";\n",
    );
    // b.rs and its child b/inner.rs use each other: one module, no circle.
    write(
        "b.rs",
        "mod inner;\npub use inner::Nothing;\npub fn start() { inner::go(); }\n",
    );
    // Circle 2: b/inner.rs <-> c.rs, from an inline module three `super`s deep and back
    // through b.rs's face.
    write(
        "b/inner.rs",
        "pub struct Nothing;\npub fn go() { super::start(); }\n\
         mod linux {\n    fn f() { super::super::super::c::thing(); }\n}\n",
    );
    write(
        "c.rs",
        "use crate::b::{self, Nothing};\npub fn thing() -> Option<Nothing> { None }\n",
    );
    // d.rs's tests use e.rs, which uses d.rs: test code draws no arrow.
    write(
        "d.rs",
        "pub struct D;\n#[cfg(test)]\nmod tests {\n    use crate::e::E;\n}\n#[cfg(test)]\nmod more;\n",
    );
    write("d/more.rs", "use crate::e::E;\n");
    write("e.rs", "use crate::d::D;\npub struct E;\n");
    let circles = circles_in(src);
    let text = circles.join("\n");
    assert_eq!(circles.len(), 2, "{text}");
    assert!(
        text.contains("circle of 2 files: a/one.rs, a/two.rs"),
        "{text}"
    );
    assert!(
        text.contains("a/one.rs -> a/two.rs: Second, helper"),
        "{text}"
    );
    assert!(text.contains("a/two.rs -> a/one.rs: First"), "{text}");
    assert!(
        text.contains("circle of 2 files: b/inner.rs, c.rs"),
        "{text}"
    );
    assert!(text.contains("b/inner.rs -> c.rs: thing"), "{text}");
    assert!(text.contains("c.rs -> b/inner.rs: Nothing"), "{text}");
    assert!(
        !text.contains("d.rs") && !text.contains("a/mod.rs"),
        "{text}"
    );
}

/// Every circle among the files under `src`, one description each (empty when there is none).
fn circles_in(src: &Path) -> Vec<String> {
    let krate = read_crate(src);
    let edges = edges_of(&krate);
    strongly_connected(&edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| describe(src, &component, &edges))
        .collect()
}

fn describe(src: &Path, component: &BTreeSet<PathBuf>, edges: &Edges) -> String {
    let rel = |path: &Path| path.strip_prefix(src).unwrap_or(path).display().to_string();
    let mut lines = vec![format!(
        "circle of {} files: {}",
        component.len(),
        component
            .iter()
            .map(|f| rel(f))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    for from in component {
        for (to, names) in edges.get(from).into_iter().flatten() {
            if component.contains(to) {
                let names: Vec<_> = names.iter().map(String::as_str).collect();
                lines.push(format!(
                    "  {} -> {}: {}",
                    rel(from),
                    rel(to),
                    names.join(", ")
                ));
            }
        }
    }
    lines.join("\n")
}

fn read_crate(src: &Path) -> Crate {
    let mut paths = Vec::new();
    collect_rs(src, &mut paths);
    let mut files = BTreeMap::new();
    for path in paths {
        let rel = path.strip_prefix(src).unwrap();
        let Some(module) = module_of(rel) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let file = parse_file(module.clone(), &text);
        files.insert(module, (path, file));
    }
    // Files compiled for tests only (`#[cfg(test)] mod tests;`) and what they declare.
    let test_only: Vec<ModPath> = files
        .values()
        .flat_map(|(_, file)| {
            file.test_children.iter().map(|child| {
                let mut module = file.module.clone();
                module.push(child.clone());
                module
            })
        })
        .collect();
    files.retain(|module, _| !test_only.iter().any(|test| module.starts_with(test)));
    Crate { files }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `lib.rs` → `[]`, `a/b.rs` → `[a, b]`, `a/mod.rs` → `[a]`; `main.rs` is another crate.
fn module_of(rel: &Path) -> Option<ModPath> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    match (parts.is_empty(), stem) {
        (true, "lib") => {}
        (true, "main") => return None,
        (_, "mod") => {}
        _ => parts.push(stem.to_owned()),
    }
    Some(parts)
}

/// The code's tokens with comments, strings and character literals removed.
fn tokens_of(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' || (c == 'b' && next == Some('"')) {
            i += if c == 'b' { 2 } else { 1 };
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (c == 'r' || c == 'b')
            && matches!(next, Some('#' | '"' | 'r'))
            && is_raw(&chars, i)
        {
            i = skip_raw_string(&chars, i);
        } else if c == '\'' {
            i = skip_char_or_lifetime(&chars, i);
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && next == Some(':') {
            tokens.push("::".to_owned());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// Whether `r"…"`, `r#"…"#`, `br"…"` starts at `i` (and not an identifier such as `r#type`).
fn is_raw(chars: &[char], i: usize) -> bool {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return false;
    }
    let mut j = i + 1;
    if chars[i] == 'b' {
        if chars.get(j) != Some(&'r') {
            return false;
        }
        j += 1;
    }
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    chars.get(j) == Some(&'"')
}

fn skip_raw_string(chars: &[char], mut i: usize) -> usize {
    while chars[i] != '#' && chars[i] != '"' {
        i += 1;
    }
    let mut hashes = 0;
    while chars[i] == '#' {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// Skips `'x'`, `'\n'`, `'\u{1F600}'`; a lifetime (`'a`) keeps its name as a token-free skip.
fn skip_char_or_lifetime(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        let mut j = i + 2;
        while j < chars.len() && chars[j] != '\'' {
            j += 1;
        }
        return j + 1;
    }
    if chars.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    let mut j = i + 1;
    while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
        j += 1;
    }
    j
}

const DEFINING: [&str; 9] = [
    "fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union",
];

fn parse_file(module: ModPath, text: &str) -> SourceFile {
    let (tokens, test_children) = without_test_items(tokens_of(text));
    let scopes = scopes_of(&module, &tokens);
    let mut file = SourceFile {
        module,
        tokens: Vec::new(),
        defines: BTreeSet::new(),
        children: BTreeSet::new(),
        test_children,
        scopes,
        imports: BTreeMap::new(),
        globs: Vec::new(),
    };
    for (i, token) in tokens.iter().enumerate() {
        let Some(name) = tokens.get(i + 1) else {
            continue;
        };
        if DEFINING.contains(&token.as_str())
            && is_ident(name)
            && !DEFINING.contains(&name.as_str())
        {
            file.defines.insert(name.clone());
            if token == "mod" && tokens.get(i + 2).is_some_and(|t| t == ";") {
                file.children.insert(name.clone());
            }
        }
        if token == "macro_rules"
            && let Some(name) = tokens.get(i + 2)
        {
            file.defines.insert(name.clone());
        }
    }
    for statement in use_statements(&tokens) {
        let scope = file.scopes[statement.start - 1].clone();
        for (path, alias) in use_paths(&tokens[statement.start..statement.end]) {
            if path.last().is_some_and(|last| last == "*") {
                file.globs
                    .push((path[..path.len() - 1].to_vec(), scope.clone()));
            } else if let Some(alias) = alias {
                file.imports.insert(alias, (path, scope.clone()));
            }
        }
    }
    file.tokens = tokens;
    file
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The tokens without the items under `#[cfg(test)]` (test code may borrow freely), and the
/// names of the child modules declared for tests only.
fn without_test_items(tokens: Vec<String>) -> (Vec<String>, BTreeSet<String>) {
    const ATTRIBUTE: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut kept = Vec::with_capacity(tokens.len());
    let mut test_children = BTreeSet::new();
    let mut i = 0;
    while i < tokens.len() {
        if !tokens[i..].starts_with(&ATTRIBUTE.map(String::from)) {
            kept.push(tokens[i].clone());
            i += 1;
            continue;
        }
        i += ATTRIBUTE.len();
        let is_use = tokens[i..].iter().take(5).any(|t| t == "use");
        let mut depth = 0usize;
        while i < tokens.len() {
            let token = tokens[i].as_str();
            i += 1;
            match token {
                "mod" if depth == 0 && tokens.get(i + 1).is_some_and(|t| t == ";") => {
                    test_children.insert(tokens[i].clone());
                }
                ";" if depth == 0 => break,
                "{" if !is_use => depth += 1,
                "}" if !is_use => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    (kept, test_children)
}

/// For each token, the module it stands in: the file's own, or an inline module's within it.
fn scopes_of(module: &ModPath, tokens: &[String]) -> Vec<ModPath> {
    let mut scopes = Vec::with_capacity(tokens.len());
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate() {
        let mut scope = module.clone();
        scope.extend(open.iter().map(|(name, _)| name.clone()));
        scopes.push(scope);
        match token.as_str() {
            "{" => {
                depth += 1;
                if i >= 2 && tokens[i - 2] == "mod" {
                    open.push((tokens[i - 1].clone(), depth));
                }
            }
            "}" => {
                if open.last().is_some_and(|(_, d)| *d == depth) {
                    open.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
    }
    scopes
}

/// A `use` statement: the token range of its tree and whether it is `pub`.
struct UseStatement {
    start: usize,
    end: usize,
    public: bool,
}

fn use_statements(tokens: &[String]) -> Vec<UseStatement> {
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if token != "use" || tokens.get(i + 1).is_some_and(|t| t == "<") {
            continue;
        }
        let end = tokens[i..]
            .iter()
            .position(|t| t == ";")
            .map_or(tokens.len(), |p| i + p);
        // `pub use`, `pub(crate) use`, `pub(super) use`.
        let public = (i >= 1 && tokens[i - 1] == "pub")
            || (i >= 4 && tokens[i - 1] == ")" && tokens[i - 4] == "pub");
        out.push(UseStatement {
            start: i + 1,
            end,
            public,
        });
    }
    out
}

/// The leaves of a use tree: each full path and the name it binds (`None` for `self` of a group
/// that binds the module, handled as its last segment).
fn use_paths(tree: &[String]) -> Vec<(Vec<String>, Option<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    walk_use_tree(tree, &mut i, &[], &mut out);
    out
}

fn walk_use_tree(
    tree: &[String],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix.to_vec();
    while *i < tree.len() {
        let token = tree[*i].as_str();
        match token {
            "::" => *i += 1,
            "{" => {
                *i += 1;
                loop {
                    walk_use_tree(tree, i, &path, out);
                    match tree.get(*i).map(String::as_str) {
                        Some(",") => *i += 1,
                        Some("}") => {
                            *i += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tree.get(*i).is_some_and(|t| t == "}") {
                        *i += 1;
                        break;
                    }
                }
                return;
            }
            "," | "}" => break,
            "as" => {
                let alias = tree.get(*i + 1).cloned();
                *i += 2;
                out.push((path, alias.filter(|a| a != "_")));
                return;
            }
            "self" if path.len() > prefix.len() || !prefix.is_empty() => {
                // `use a::{self, b}` binds `a`.
                *i += 1;
                let alias = path.last().cloned();
                out.push((path, alias));
                return;
            }
            _ => {
                path.push(token.to_owned());
                *i += 1;
            }
        }
    }
    if path.len() > prefix.len() {
        let alias = path.last().cloned().filter(|last| last != "*");
        out.push((path, alias));
    }
}

impl Crate {
    fn file(&self, module: &[String]) -> Option<&SourceFile> {
        self.files.get(module).map(|(_, file)| file)
    }

    fn path(&self, module: &[String]) -> Option<&PathBuf> {
        self.files.get(module).map(|(path, _)| path)
    }

    /// Where a path written in module `scope` of `from` starts (`crate`, `super`, `self`, a
    /// child module of `from`) and how many of its segments that took, or `None` for a path
    /// into another crate.
    fn start_of(
        &self,
        from: &SourceFile,
        scope: &[String],
        path: &[String],
    ) -> Option<(ModPath, usize)> {
        let mut module = scope.to_vec();
        let mut used = 0;
        match path.first()?.as_str() {
            "crate" => {
                module.clear();
                used = 1;
            }
            "self" => used = 1,
            "super" => {}
            first if from.children.contains(first) => module = from.module.clone(),
            _ => return None,
        }
        while path.get(used).is_some_and(|s| s == "super") {
            module.pop();
            used += 1;
        }
        Some((module, used))
    }

    /// The module file that a path written in module `scope` of `from` leads to, and the name
    /// it takes there (the first segment after the deepest module file), followed through the
    /// imports of that file to the file that defines the name.
    fn target(
        &self,
        from: &SourceFile,
        scope: &[String],
        path: &[String],
    ) -> Option<(ModPath, String)> {
        let (mut module, mut used) = self.start_of(from, scope, path)?;
        while self.file(&module).is_none() && !module.is_empty() {
            module.pop(); // an inline module stands in its file
        }
        while let Some(segment) = path.get(used) {
            let mut deeper = module.clone();
            deeper.push(segment.clone());
            if self.file(&deeper).is_none() {
                break;
            }
            module = deeper;
            used += 1;
        }
        match path.get(used) {
            None => {
                let name = module.last().cloned().unwrap_or_default();
                Some((module, name))
            }
            Some(name) => Some(self.defining(module, name, 0)),
        }
    }

    /// The module whose file defines `name`, as seen from `module` (which may import it).
    fn defining(&self, module: ModPath, name: &str, depth: usize) -> (ModPath, String) {
        let Some(file) = self.file(&module) else {
            return (module, name.to_owned());
        };
        if depth > 16 || file.defines.contains(name) {
            return (module, name.to_owned());
        }
        if let Some((path, scope)) = file.imports.get(name)
            && let Some((target, real)) = self.target(file, scope, path)
        {
            return self.defining(target, &real, depth + 1);
        }
        for (glob, scope) in &file.globs {
            if let Some((target, _)) = self.target(file, scope, glob)
                && let Some(inner) = self.file(&target)
                && (inner.defines.contains(name) || inner.imports.contains_key(name))
            {
                return self.defining(target, name, depth + 1);
            }
        }
        (module, name.to_owned())
    }
}

/// Every path a file writes, with the module it is written in: the leaves of its `use`
/// statements (but a face's re-export of its own children) and its inline paths that start at
/// `crate`, `super`, `self` or one of its child modules.
fn written_paths(file: &SourceFile) -> Vec<(Vec<String>, ModPath)> {
    let tokens = &file.tokens;
    let mut in_use = vec![false; tokens.len()];
    let mut out = Vec::new();
    for statement in use_statements(tokens) {
        for flag in &mut in_use[statement.start - 1..statement.end] {
            *flag = true;
        }
        let scope = &file.scopes[statement.start - 1];
        for (mut path, _) in use_paths(&tokens[statement.start..statement.end]) {
            let first = path.first().map(String::as_str);
            // A face's re-export of its own children (`pub use child::X;`) is no dependency.
            if statement.public && first.is_some_and(|f| file.children.contains(f)) {
                continue;
            }
            if path.last().is_some_and(|last| last == "*") {
                path.pop();
            }
            out.push((path, scope.clone()));
        }
    }
    let mut i = 0;
    while i < tokens.len() {
        let starts = ["crate", "super", "self"].contains(&tokens[i].as_str())
            || file.children.contains(&tokens[i]);
        let after_colons = i > 0 && tokens[i - 1] == "::";
        if in_use[i] || !starts || after_colons || tokens.get(i + 1).is_none_or(|t| t != "::") {
            i += 1;
            continue;
        }
        let mut path = vec![tokens[i].clone()];
        let mut j = i + 1;
        while tokens.get(j).is_some_and(|t| t == "::")
            && tokens.get(j + 1).is_some_and(|t| is_ident(t))
        {
            path.push(tokens[j + 1].clone());
            j += 2;
        }
        out.push((path, file.scopes[i].clone()));
        i = j;
    }
    out
}

fn edges_of(krate: &Crate) -> Edges {
    let mut edges = Edges::new();
    for (path, file) in krate.files.values() {
        for (written, scope) in written_paths(file) {
            let Some((module, name)) = krate.target(file, &scope, &written) else {
                continue;
            };
            let Some(to) = krate.path(&module) else {
                continue;
            };
            // A module and its own descendants are one unit by design: the parent holds the
            // vocabulary its children share and hands work to them.
            let nested = module.starts_with(&file.module) || file.module.starts_with(&module);
            if !nested {
                edges
                    .entry(path.clone())
                    .or_default()
                    .entry(to.clone())
                    .or_default()
                    .insert(name);
            }
        }
    }
    edges
}

/// Tarjan's strongly connected components of the file graph.
fn strongly_connected(edges: &Edges) -> Vec<BTreeSet<PathBuf>> {
    struct State<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<BTreeSet<PathBuf>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a PathBuf) {
        let n = state.index.len();
        state.index.insert(node, n);
        state.low.insert(node, n);
        state.stack.push(node);
        state.on_stack.insert(node);
        for next in state.edges.get(node).into_iter().flat_map(|m| m.keys()) {
            if !state.index.contains_key(next) {
                visit(state, next);
                let low = state.low[node].min(state.low[next]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next) {
                let low = state.low[node].min(state.index[next]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = BTreeSet::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.insert(top.clone());
                if top == node {
                    break;
                }
            }
            state.out.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.out
}
