//! The pipeline has no back-edges and no file imports itself in a circle.
//!
//! A stage is a top-level module of `src/` (a file `src/x.rs` or a folder
//! `src/x/`), in this order (see `src/lib.rs` and DESIGN.md):
//!
//! 0. leaves: `duration`, `spec` (the event-spec, sysfs term and format
//!    grammars), `sys` (the kernel's ABI numbers and `statfs`, as
//!    perf-event keeps its `-sys` crate), `problem` (typed reasons),
//!    `bounded` (bounded reads), `terminal` (escaping for terminal views),
//!    `derive` (perf's metric-expression grammar and evaluator)
//! 1. `config` · 2. `pmu`, `cgroup` · 3. `resolve` · 4. `perf` ·
//! 5. `engine`, `snapshot`, `privilege`, `probe` · 6. `export`, `report`,
//!    `view` (the terminal views) ·
//! 7. `web` · 8. the application (`app`, `cli`, `main.rs`) ·
//! 9. `fuzzing` (the fuzz targets reach every stage)
//!
//! Every file of `src/` is read with comments, strings and character
//! literals taken out; every `use` (groups, `self`, `super::`, `crate as
//! x` and other aliases, `pub use` re-exports) and every inline path
//! (`crate::x::y`, `super::x`, `self::x`, an alias or a child module
//! followed by `::`) is resolved to the file that defines it. From those
//! edges:
//!
//! * an edge from a file to a file of a later stage fails (the path as
//!   written counts: naming `crate::pmu::Format` from `config` is a
//!   back-edge even though `pmu` only re-exports it from `spec`);
//! * any cycle between files fails, within a stage or across stages (a
//!   file and its own `mod tests` are one file). For cycles an edge goes
//!   to the file that defines what it names, through re-exports and
//!   imports; a file's use of what a module above it defines in that
//!   module's own file (`use super::Engine` in `engine/read.rs`) is the
//!   module's vocabulary and not counted, its parent's use of it is;
//! * the live kernel (`perf::live`, `perf::hotplug`) is behind the
//!   `perf::Kernel` seam: only the application (and the fuzz targets)
//!   may name it outside `perf`.
//!
//! A failure names the files, the lines and the edges. A new top-level
//! module must be given a stage in [`STAGES`].
//!
//! The guard's own tests (at the end) feed small source trees with each
//! kind of back-edge and cycle and check that each is caught.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The stage of each top-level module (`main` is the binary's root).
const STAGES: &[(&str, usize)] = &[
    ("duration", 0),
    ("spec", 0),
    ("sys", 0),
    ("problem", 0),
    ("bounded", 0),
    ("terminal", 0),
    ("derive", 0),
    ("config", 1),
    ("pmu", 2),
    ("cgroup", 2),
    ("resolve", 3),
    ("perf", 4),
    ("engine", 5),
    ("snapshot", 5),
    ("privilege", 5),
    ("probe", 5),
    ("export", 6),
    ("report", 6),
    ("view", 6),
    ("web", 7),
    ("app", 8),
    ("cli", 8),
    ("main", 8),
    ("fuzzing", 9),
];

/// Stages that may name the live kernel (besides `perf` itself).
const SEAM_USERS: &[&str] = &["app", "cli", "main", "fuzzing"];

/// Modules behind the `perf::Kernel` seam.
const BEHIND_SEAM: &[&[&str]] = &[&["perf", "live"], &["perf", "hotplug"]];

// ---------------------------------------------------------------------------
// Tokens

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// A string literal's text as written (for `#[path = ".."]`).
    Str(String),
    /// `::`
    Path,
    Punct(char),
}

/// The tokens of a file that matter for paths, each with its line:
/// identifiers, `::` and punctuation. Comments (nested block comments
/// too), string, raw string, byte string and character literals,
/// lifetimes and numbers are dropped (a plain string is one token, whose
/// text only `#[path = ".."]` reads).
// One pass over the input, kept whole so its cases read side by side.
#[allow(clippy::too_many_lines)]
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let ident_start = |ch: char| ch.is_alphabetic() || ch == '_';
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    // Skips a quoted literal starting at the opening `"` at `i`; returns
    // the index after the closing quote, counting lines.
    let skip_str = |mut i: usize, line: &mut usize| -> usize {
        i += 1;
        while i < c.len() {
            match c[i] {
                '\\' => i += 1,
                '"' => return i + 1,
                '\n' => *line += 1,
                _ => {}
            }
            i += 1;
        }
        i
    };
    // A raw string `r#"..."#` with `hashes` hashes; `i` at the `"`.
    let skip_raw = |mut i: usize, hashes: usize, line: &mut usize| -> usize {
        i += 1;
        while i < c.len() {
            if c[i] == '"'
                && c[i + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&h| h == '#')
                    .count()
                    == hashes
            {
                return i + 1 + hashes;
            }
            if c[i] == '\n' {
                *line += 1;
            }
            i += 1;
        }
        i
    };
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            let end = skip_str(i, &mut line);
            let text: String = c[i + 1..end.saturating_sub(1).max(i + 1)].iter().collect();
            out.push((Tok::Str(text), line));
            i = end;
        } else if ch == '\'' {
            // A character literal (`'a'`, `'\n'`, `'\u{1F600}'`) or a
            // lifetime / label (`'a`, `'static`).
            if next == Some('\\') {
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
        } else if ident_start(ch) {
            // Raw and byte strings first: r"..", r#".."#, b"..", br#".."#,
            // b'x'; then raw identifiers r#name.
            let mut j = i;
            if c[j] == 'b' {
                j += 1;
            }
            let raw = c.get(j) == Some(&'r');
            if raw {
                j += 1;
            }
            let hashes = c[j.min(c.len())..]
                .iter()
                .take_while(|&&h| h == '#')
                .count();
            if (raw || j > i) && c.get(j + hashes) == Some(&'"') && (raw || hashes == 0) {
                i = if raw {
                    skip_raw(j + hashes, hashes, &mut line)
                } else {
                    skip_str(j, &mut line)
                };
                continue;
            }
            if ch == 'b' && next == Some('\'') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    if c[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                continue;
            }
            if ch == 'r' && next == Some('#') && c.get(i + 2).is_some_and(|&x| ident_start(x)) {
                i += 2;
            }
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch == ':' && next == Some(':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Paths

/// One path a file names: its segments as written (`crate`, `super`,
/// `self`, an alias, a child module or an external crate first), the
/// alias it brings into scope (a `use` leaf), the inline modules it is
/// written in, and its line.
#[derive(Debug, Clone)]
struct Named {
    segs: Vec<String>,
    alias: Option<String>,
    scope: Vec<String>,
    line: usize,
    from_use: bool,
}

/// The leaves of a use tree starting at `toks[*i]`, up to its `;`.
fn use_tree(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: &[String],
    scope: &[String],
    out: &mut Vec<Named>,
) {
    let mut segs = prefix.to_vec();
    if toks.get(*i).map(|t| &t.0) == Some(&Tok::Path) {
        // `use ::name::...`: an external crate.
        segs.push("::".into());
        *i += 1;
    }
    loop {
        let Some((tok, line)) = toks.get(*i) else {
            return;
        };
        let line = *line;
        match tok {
            Tok::Punct('{') => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        None => return,
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        Some(_) => {
                            let before = *i;
                            use_tree(toks, i, &segs, scope, out);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
            }
            Tok::Punct('*') => {
                *i += 1;
                out.push(Named {
                    segs,
                    alias: None,
                    scope: scope.to_vec(),
                    line,
                    from_use: true,
                });
                return;
            }
            Tok::Ident(s) => {
                segs.push(s.clone());
                *i += 1;
                if toks.get(*i).map(|t| &t.0) == Some(&Tok::Path) {
                    *i += 1;
                    continue;
                }
                let mut alias = None;
                if toks.get(*i).map(|t| &t.0) == Some(&Tok::Ident("as".into())) {
                    if let Some((Tok::Ident(a), _)) = toks.get(*i + 1) {
                        alias = Some(a.clone());
                    }
                    *i += 2;
                }
                if alias.is_none() {
                    alias = segs
                        .iter()
                        .rev()
                        .find(|s| *s != "self")
                        .filter(|s| !matches!(s.as_str(), "crate" | "super"))
                        .cloned();
                }
                out.push(Named {
                    segs,
                    alias: alias.filter(|a| a != "_"),
                    scope: scope.to_vec(),
                    line,
                    from_use: true,
                });
                return;
            }
            _ => return,
        }
    }
}

/// What a file says about paths and modules.
struct Parsed {
    /// Every path it names.
    named: Vec<Named>,
    /// The modules it declares (`mod x;` and inline `mod x { .. }`), as
    /// paths of inline scopes.
    mods: BTreeSet<Vec<String>>,
    /// `#[path = "file.rs"] mod x;`: the module and the file.
    path_mods: Vec<(Vec<String>, String)>,
}

/// Every path a file names, and the modules it declares.
// One pass over the input, kept whole so its cases read side by side.
#[allow(clippy::too_many_lines)]
fn named_paths(toks: &[(Tok, usize)]) -> Parsed {
    let mut out = Vec::new();
    let mut mods = BTreeSet::new();
    let mut path_mods = Vec::new();
    let mut path_attr: Option<String> = None;
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_mod: Option<String> = None;
    let names = |s: &[(String, usize)]| s.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    let mut i = 0;
    while i < toks.len() {
        let (tok, line) = &toks[i];
        let prev = i.checked_sub(1).map(|p| &toks[p].0);
        match tok {
            Tok::Punct('{') => {
                depth += 1;
                if let Some(m) = pending_mod.take() {
                    scope.push((m, depth));
                    mods.insert(names(&scope));
                }
            }
            Tok::Punct('}') => {
                if scope.last().is_some_and(|s| s.1 == depth) {
                    scope.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(k) if k == "mod" => {
                if let Some((Tok::Ident(m), _)) = toks.get(i + 1) {
                    match toks.get(i + 2).map(|t| &t.0) {
                        Some(Tok::Punct('{')) => pending_mod = Some(m.clone()),
                        Some(Tok::Punct(';')) => {
                            let mut p = names(&scope);
                            p.push(m.clone());
                            if let Some(file) = path_attr.take() {
                                path_mods.push((p.clone(), file));
                            }
                            mods.insert(p);
                        }
                        _ => {}
                    }
                }
            }
            Tok::Punct('#') => {
                let want = [Tok::Punct('['), Tok::Ident("path".into()), Tok::Punct('=')];
                let at = |k: usize| toks.get(i + 1 + k).map(|t| &t.0);
                if (0..3).all(|k| at(k) == Some(&want[k])) {
                    if let (Some(Tok::Str(file)), Some(Tok::Punct(']'))) = (at(3), at(4)) {
                        path_attr = Some(file.clone());
                    }
                }
            }
            Tok::Punct(';') => path_attr = None,
            // `extern crate self as x;`
            Tok::Ident(k)
                if k == "extern"
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Ident("crate".into()))
                    && toks.get(i + 2).map(|t| &t.0) == Some(&Tok::Ident("self".into()))
                    && toks.get(i + 3).map(|t| &t.0) == Some(&Tok::Ident("as".into())) =>
            {
                if let Some((Tok::Ident(a), line)) = toks.get(i + 4) {
                    out.push(Named {
                        segs: vec!["crate".into()],
                        alias: Some(a.clone()),
                        scope: names(&scope),
                        line: *line,
                        from_use: true,
                    });
                }
                i += 5;
                continue;
            }
            Tok::Ident(k) if k == "use" && prev != Some(&Tok::Path) => {
                i += 1;
                use_tree(toks, &mut i, &[], &names(&scope), &mut out);
                continue;
            }
            Tok::Ident(first)
                if toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path)
                    && !matches!(prev, Some(Tok::Path | Tok::Punct('.'))) =>
            {
                let mut segs = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j).map(|t| &t.0) == Some(&Tok::Path) {
                    match toks.get(j + 1) {
                        Some((Tok::Ident(s), _)) => {
                            segs.push(s.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                out.push(Named {
                    segs,
                    alias: None,
                    scope: names(&scope),
                    line: *line,
                    from_use: false,
                });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Parsed {
        named: out,
        mods,
        path_mods,
    }
}

// ---------------------------------------------------------------------------
// The graph

/// A source tree: path relative to `src/` (`perf/mod.rs`) and text.
type Tree = Vec<(String, String)>;

/// The module path of a file: `perf/mod.rs` -> `["perf"]`,
/// `perf/sim/rates.rs` -> `["perf", "sim", "rates"]`, `lib.rs` -> `[]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib") {
        parts.push(stem.to_string());
    }
    parts
}

/// An edge between two files, with the line and path that make it.
#[derive(Debug, Clone)]
struct Edge {
    from: usize,
    /// The file the path names.
    to: usize,
    /// The file that defines what it names (through re-exports).
    defined: usize,
    line: usize,
    path: String,
}

/// What the guard found.
#[derive(Debug, Default)]
struct Findings {
    /// Back-edges, seam crossings, files without a stage.
    edges: Vec<String>,
    /// File cycles, one line each.
    cycles: Vec<String>,
    /// How many edges between files were read.
    count: usize,
}

impl Findings {
    fn all(&self) -> Vec<String> {
        self.edges.iter().chain(&self.cycles).cloned().collect()
    }
}

fn stage(top: &str) -> Option<usize> {
    STAGES.iter().find(|s| s.0 == top).map(|s| s.1)
}

/// Resolves a path as written, in `module`, to an absolute module path,
/// or `None` for a path into another crate (or a local name).
fn resolve(
    segs: &[String],
    module: &[String],
    aliases: &BTreeMap<String, Option<Vec<String>>>,
    known: &BTreeSet<Vec<String>>,
    in_main: bool,
) -> Option<Vec<String>> {
    let (first, rest) = segs.split_first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "perf_exporter" if in_main => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut m = module.to_vec();
            m.pop()?;
            m
        }
        "::" => return None,
        name => {
            let mut child = module.to_vec();
            child.push(name.to_string());
            if known.contains(&child) {
                child
            } else {
                aliases.get(name).cloned().flatten()?
            }
        }
    };
    let mut rest = rest.iter().peekable();
    // `super::super::x`
    if first == "super" || first == "self" {
        while rest.peek().is_some_and(|s| *s == "super") {
            base.pop()?;
            rest.next();
        }
    }
    base.extend(rest.filter(|s| *s != "self").cloned());
    Some(base)
}

/// Reads a source tree and checks its graph.
// One pass over the input, kept whole so its cases read side by side.
#[allow(clippy::too_many_lines)]
fn check(tree: &Tree) -> Findings {
    let mut f = Findings::default();
    let all: Vec<Parsed> = tree.iter().map(|(_, t)| named_paths(&tokens(t))).collect();
    let mut files: Vec<(String, Vec<String>)> = tree
        .iter()
        .map(|(rel, _)| (rel.clone(), module_of(rel)))
        .collect();
    // `#[path = "x.rs"] mod m;` in `dir/f.rs`: `dir/x.rs` is module `f::m`.
    for (n, p) in all.iter().enumerate() {
        for (m, file) in &p.path_mods {
            let dir = files[n].0.rsplit_once('/').map_or("", |d| d.0);
            let target = if dir.is_empty() {
                file.clone()
            } else {
                format!("{dir}/{file}")
            };
            if let Some(k) = files.iter().position(|x| x.0 == target) {
                let mut module = files[n].1.clone();
                module.extend(m.iter().cloned());
                files[k].1 = module;
            }
        }
    }
    let file_of_module: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .filter(|(_, (rel, _))| rel != "main.rs")
        .map(|(n, (_, m))| (m.clone(), n))
        .collect();
    let mut parsed = Vec::new();
    let mut known: BTreeSet<Vec<String>> = file_of_module.keys().cloned().collect();
    for (n, p) in all.into_iter().enumerate() {
        for m in p.mods {
            let mut path = files[n].1.clone();
            path.extend(m);
            known.insert(path);
        }
        parsed.push(p.named);
    }
    let stage_of_file = |n: usize| -> Result<Option<usize>, String> {
        let (rel, module) = &files[n];
        if rel == "lib.rs" {
            return Ok(None);
        }
        let top = if rel == "main.rs" { "main" } else { &module[0] };
        stage(top).map(Some).ok_or_else(|| {
            format!("src/{rel}: module `{top}` has no stage in tests/layering.rs (STAGES)")
        })
    };
    let module_at = |n: usize, scope: &[String]| {
        let mut m = if files[n].0 == "main.rs" {
            Vec::new()
        } else {
            files[n].1.clone()
        };
        m.extend(scope.iter().cloned());
        m
    };
    // The names each file's `use`s bring into scope, resolved until
    // nothing changes (a `use` may name an alias of a later one). A name
    // from another crate maps to `None` and shadows nothing. The ones at
    // the top of a file are what other files can reach through it (a
    // re-export, or a private import its child modules see).
    let mut aliases = Vec::new();
    let mut exports: Vec<BTreeMap<String, Vec<String>>> = Vec::new();
    for (n, named) in parsed.iter().enumerate() {
        let in_main = files[n].0 == "main.rs";
        let mut a: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
        for _ in 0..4 {
            for u in named.iter().filter(|u| u.from_use) {
                if let Some(name) = &u.alias {
                    let r = resolve(&u.segs, &module_at(n, &u.scope), &a, &known, in_main);
                    a.insert(name.clone(), r);
                }
            }
        }
        let mut top = BTreeMap::new();
        for u in named.iter().filter(|u| u.from_use && u.scope.is_empty()) {
            if let (Some(name), Some(r)) = (
                &u.alias,
                resolve(&u.segs, &module_at(n, &[]), &a, &known, in_main),
            ) {
                top.insert(name.clone(), r);
            }
        }
        aliases.push(a);
        exports.push(top);
    }
    // The file of a module path: the longest prefix that is a file.
    let file_of = |abs: &[String]| -> Option<(usize, usize)> {
        (0..=abs.len())
            .rev()
            .find_map(|k| file_of_module.get(&abs[..k]).map(|&f| (f, k)))
    };
    // The file that defines an item: through re-exports and imports to
    // where it is written.
    let defining = |mut abs: Vec<String>| -> Option<usize> {
        for _ in 0..16 {
            let (file, k) = file_of(&abs)?;
            let Some(target) = abs.get(k).and_then(|item| exports[file].get(item)) else {
                return Some(file);
            };
            let mut next = target.clone();
            next.extend(abs[k + 1..].iter().cloned());
            if next == abs {
                return Some(file);
            }
            abs = next;
        }
        None
    };
    let mut edges: Vec<Edge> = Vec::new();
    for (n, named) in parsed.iter().enumerate() {
        let in_main = files[n].0 == "main.rs";
        for u in named {
            let Some(abs) = resolve(
                &u.segs,
                &module_at(n, &u.scope),
                &aliases[n],
                &known,
                in_main,
            ) else {
                continue;
            };
            let Some((to, _)) = file_of(&abs) else {
                continue;
            };
            let defined = defining(abs).unwrap_or(to);
            let mut shown = u.segs.clone();
            if shown.len() > 1 && shown.last().is_some_and(|s| s == "self") {
                shown.pop();
            }
            edges.push(Edge {
                from: n,
                to,
                defined,
                line: u.line,
                path: shown.join("::"),
            });
        }
    }
    edges.retain(|e| e.to != e.from || e.defined != e.from);
    f.count = edges.len();

    // Stages.
    let mut unstaged = BTreeSet::new();
    for n in 0..files.len() {
        if let Err(e) = stage_of_file(n) {
            unstaged.insert(e);
        }
    }
    f.edges.extend(unstaged);
    for e in &edges {
        let (Ok(Some(from)), Ok(Some(to))) = (stage_of_file(e.from), stage_of_file(e.to)) else {
            continue;
        };
        let (fr, tr) = (&files[e.from], &files[e.to]);
        if to > from {
            f.edges.push(format!(
                "src/{}:{}: `{}` goes from stage {from} to stage {to} (src/{})",
                fr.0, e.line, e.path, tr.0
            ));
        }
        let top = if fr.0 == "main.rs" { "main" } else { &fr.1[0] };
        let behind = BEHIND_SEAM
            .iter()
            .any(|s| tr.1.len() >= s.len() && tr.1[..s.len()] == **s);
        if behind && top != "perf" && !SEAM_USERS.contains(&top) {
            f.edges.push(format!(
                "src/{}:{}: `{}` reaches past the perf::Kernel seam (src/{})",
                fr.0, e.line, e.path, tr.0
            ));
        }
    }

    // Cycles between files: every strongly connected component of more
    // than one file, shown as one cycle through it. An edge goes to the
    // file that defines what it names (a re-export or an import is
    // followed to it). The one edge that is not a dependency between
    // files is a file's use of what a module above it defines in its own
    // file (`use super::Engine` in `engine/read.rs`, `super::AppError` in
    // `app/host.rs`): that is the module's own vocabulary, which Rust
    // shows to its children; the parent using its children is counted.
    let mut first_edge: BTreeMap<(usize, usize), &Edge> = BTreeMap::new();
    for e in &edges {
        if e.defined != e.from && !is_ancestor(&files, e.defined, e.from) {
            first_edge.entry((e.from, e.defined)).or_insert(e);
        }
    }
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); files.len()];
    for &(a, b) in first_edge.keys() {
        succ[a].push(b);
    }
    for comp in components(&succ) {
        if comp.len() < 2 {
            continue;
        }
        let inside: BTreeSet<usize> = comp.iter().copied().collect();
        let start = comp[0];
        let cycle = cycle_through(start, &succ, &inside);
        let mut text = String::new();
        for w in cycle.windows(2) {
            let e = first_edge[&(w[0], w[1])];
            text.push_str(&format!(
                "src/{}:{} (`{}`) -> ",
                files[w[0]].0, e.line, e.path
            ));
        }
        text.push_str(&format!("src/{}", files[start].0));
        let others: Vec<&str> = comp
            .iter()
            .filter(|n| !cycle.contains(n))
            .map(|&n| files[n].0.as_str())
            .collect();
        if !others.is_empty() {
            text.push_str(&format!(" (same cycle group: {})", others.join(", ")));
        }
        f.cycles.push(format!("file cycle: {text}"));
    }
    f
}

/// Whether `a` is the file of a module above `b`'s (`engine/mod.rs` above
/// `engine/cgroup/plan.rs`).
fn is_ancestor(files: &[(String, Vec<String>)], a: usize, b: usize) -> bool {
    let (ma, mb) = (&files[a].1, &files[b].1);
    let main = files[a].0 == "main.rs" || files[b].0 == "main.rs";
    !main && ma.len() < mb.len() && mb[..ma.len()] == ma[..]
}

/// Strongly connected components (Tarjan, iterative).
fn components(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = succ.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if let Some(&w) = succ[v].get(*k) {
                *k += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    comp.sort_unstable();
                    out.push(comp);
                }
            }
        }
    }
    out
}

/// A shortest cycle from `start` back to it, inside one component:
/// `[start, a, b, start]`.
fn cycle_through(start: usize, succ: &[Vec<usize>], inside: &BTreeSet<usize>) -> Vec<usize> {
    let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &succ[v] {
            if !inside.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![start, v];
                let mut x = v;
                while x != start {
                    x = parent[&x];
                    path.push(x);
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = parent.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    vec![start, start]
}

// ---------------------------------------------------------------------------
// The crate

fn read_tree(dir: &Path, root: &Path, out: &mut Tree) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            read_tree(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).expect("under src");
            let rel = rel
                .iter()
                .map(|c| c.to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let text = std::fs::read_to_string(&p).expect("readable");
            out.push((rel, text));
        }
    }
}

#[test]
fn no_back_edge_and_no_file_cycle_in_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut tree = Vec::new();
    read_tree(&src, &src, &mut tree);
    tree.sort();
    assert!(tree.len() > 10, "found only {} files", tree.len());
    let f = check(&tree);
    assert!(
        f.count > 500,
        "only {} edges found: is the scanner broken?",
        f.count
    );
    let mut problems = f.edges.clone();
    problems.extend(f.cycles.iter().cloned());
    assert!(
        problems.is_empty(),
        "the stage order (src/lib.rs, tests/layering.rs) is broken:\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------
// The guard's own tests: a small tree, and each way of breaking it.

/// A clean tree of four stages, written the ways real code is: groups,
/// `self`, `super::`, aliases, re-exports, a child module's inline path,
/// `mod tests` with `use super::*`, and `crate::web` only in comments,
/// strings and char literals.
fn clean() -> Tree {
    [
        ("lib.rs", "pub mod spec; pub mod config; pub mod perf; pub mod web;\npub const V: &str = \"1\";"),
        ("spec/mod.rs", "//! Leaf.\nmod terms;\npub use terms::Term;\n"),
        ("spec/terms.rs", "pub struct Term;\n/// Not crate::web::X.\nfn f() -> char { '\"' }\n"),
        (
            "config/mod.rs",
            "use crate::{spec::{self, Term}, V};\nuse crate as root;\nuse root::spec::Term as T2;\nmod parse;\nfn f() { let s = \"crate::web::Server\"; let r = r#\"super::web\"#; parse::go(); }\n",
        ),
        ("config/parse.rs", "use super::super::spec::Term;\npub fn go() { let _ = crate::spec::Term; }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::super::spec;\n}\n"),
        ("perf/mod.rs", "pub mod live;\npub mod sim;\nuse crate::config;\nfn f<'a>(x: &'a [u8]) -> Vec<u8> { x.iter().copied().collect::<Vec<u8>>() }\n"),
        ("perf/live.rs", "use super::sim::Sim;\n"),
        ("perf/sim.rs", "pub struct Sim;\nuse self::inner::X;\nmod inner { pub struct X; use crate::spec::Term; }\n"),
        ("web/mod.rs", "use crate::perf::sim::Sim;\npub use crate::config as cfg;\n"),
        ("main.rs", "use perf_exporter::{web, perf::live};\nfn main() {}\n"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect()
}

/// `clean()` with `file` replaced by (or, if new, given) `text`.
fn with(file: &str, text: &str) -> Tree {
    let mut t = clean();
    t.retain(|(f, _)| f != file);
    t.push((file.into(), text.into()));
    t.sort();
    t
}

fn caught(tree: &Tree, want: &str) {
    let f = check(tree);
    let all = f.all();
    assert!(
        all.iter().any(|x| x.contains(want)),
        "expected a finding containing {want:?}, got {all:#?}"
    );
}

#[test]
fn a_clean_tree_passes() {
    let f = check(&clean());
    assert!(f.all().is_empty(), "{:#?}", f.all());
    // The edges are read: config/parse.rs has three into spec (use,
    // inline, test module) that count once each.
    assert!(f.count >= 12, "{f:?}");
}

#[test]
fn catches_a_plain_use() {
    caught(
        &with("spec/terms.rs", "use crate::web::Web;\npub struct Term;\n"),
        "src/spec/terms.rs:1: `crate::web::Web` goes from stage 0 to stage 7 (src/web/mod.rs)",
    );
}

#[test]
fn catches_a_grouped_use() {
    caught(
        &with("config/parse.rs", "use crate::{spec::Term, perf::{sim::Sim, self}};\n"),
        "src/config/parse.rs:1: `crate::perf::sim::Sim` goes from stage 1 to stage 4 (src/perf/sim.rs)",
    );
    caught(
        &with(
            "config/parse.rs",
            "use crate::{spec::Term, perf::{sim::Sim, self}};\n",
        ),
        "`crate::perf` goes from stage 1 to stage 4 (src/perf/mod.rs)",
    );
}

#[test]
fn catches_super_paths() {
    caught(
        &with("config/parse.rs", "use super::super::web;\n"),
        "src/config/parse.rs:1: `super::super::web` goes from stage 1 to stage 7",
    );
    caught(
        &with(
            "config/mod.rs",
            "fn f() {\n    super::perf::sim::go();\n}\n",
        ),
        "src/config/mod.rs:2: `super::perf::sim::go` goes from stage 1 to stage 4",
    );
    // In a `mod tests` of a file, `super` is the file.
    caught(
        &with(
            "config/parse.rs",
            "mod tests { use super::super::super::web::Web; }\n",
        ),
        "goes from stage 1 to stage 7",
    );
}

#[test]
fn catches_a_crate_alias() {
    caught(
        &with(
            "spec/terms.rs",
            "use crate as c;\nfn f() { c::perf::go(); }\n",
        ),
        "src/spec/terms.rs:2: `c::perf::go` goes from stage 0 to stage 4",
    );
    caught(
        &with(
            "spec/terms.rs",
            "use crate as c;\nuse c::web as w;\nfn f() { w::go(); }\n",
        ),
        "`c::web` goes from stage 0 to stage 7",
    );
}

#[test]
fn catches_an_inline_path() {
    caught(
        &with(
            "config/mod.rs",
            "fn f() {\n    let s = crate::web::Server::new();\n}\n",
        ),
        "src/config/mod.rs:2: `crate::web::Server::new` goes from stage 1 to stage 7",
    );
}

#[test]
fn catches_a_pub_use_reexport() {
    caught(
        &with("perf/sim.rs", "pub use crate::web::Server;\n"),
        "src/perf/sim.rs:1: `crate::web::Server` goes from stage 4 to stage 7",
    );
    caught(
        &with("config/mod.rs", "pub(crate) use crate::web::{self as w};\n"),
        "goes from stage 1 to stage 7",
    );
}

#[test]
fn catches_a_file_cycle_inside_a_stage() {
    // perf/live.rs already uses perf/sim.rs.
    caught(
        &with("perf/sim.rs", "use super::live::Live;\npub struct Sim;\n"),
        "file cycle: src/perf/live.rs:1 (`super::sim::Sim`) -> src/perf/sim.rs:1 (`super::live::Live`) -> src/perf/live.rs",
    );
    // Behind a re-export: `super::Live` is written in perf/live.rs.
    let mut t = with("perf/sim.rs", "use super::Live;\npub struct Sim;\n");
    t.retain(|(f, _)| f != "perf/mod.rs");
    t.push((
        "perf/mod.rs".into(),
        "pub mod live;\npub mod sim;\npub use live::Live;\n".into(),
    ));
    t.sort();
    caught(
        &t,
        "file cycle: src/perf/live.rs:1 (`super::sim::Sim`) -> src/perf/sim.rs:1 (`super::Live`) -> src/perf/live.rs",
    );
    // A child using what its parent's own file defines is the module's
    // vocabulary, not a cycle; a sibling cycle through it is.
    let ok = with("config/parse.rs", "use super::Parsed;\npub fn go() {}\n");
    assert!(check(&ok).all().is_empty(), "{:#?}", check(&ok).all());
}

#[test]
fn catches_a_cycle_across_three_files() {
    let mut t = with("perf/sim.rs", "use crate::perf::extra::X;\n");
    t.push((
        "perf/extra.rs".into(),
        "pub struct X;\nfn f() { self::super::live::go(); }\n".into(),
    ));
    t.sort();
    caught(
        &t,
        "file cycle: src/perf/extra.rs:2 (`self::super::live::go`) -> src/perf/live.rs:1 (`super::sim::Sim`) -> src/perf/sim.rs:1 (`crate::perf::extra::X`) -> src/perf/extra.rs",
    );
}

#[test]
fn follows_a_path_attribute() {
    // `config/parse_tests.rs` is `config::parse::tests`: its `super` is
    // `config::parse`, and `super::super::super` the crate.
    let mut t = with(
        "config/parse.rs",
        "pub fn go() {}\n#[cfg(test)]\n#[path = \"parse_tests.rs\"]\nmod tests;\n",
    );
    t.push((
        "config/parse_tests.rs".into(),
        "use super::go;\nuse super::super::super::web::Web;\n".into(),
    ));
    t.sort();
    caught(
        &t,
        "src/config/parse_tests.rs:2: `super::super::super::web::Web` goes from stage 1 to stage 7",
    );
}

#[test]
fn catches_the_seam_and_an_unstaged_module() {
    caught(
        &with("web/mod.rs", "use crate::perf::live;\n"),
        "src/web/mod.rs:1: `crate::perf::live` reaches past the perf::Kernel seam",
    );
    let mut t = clean();
    t.push(("extra.rs".into(), String::new()));
    caught(&t, "src/extra.rs: module `extra` has no stage");
}

#[test]
fn the_tokenizer_drops_comments_strings_and_literals() {
    let t = tokens(
        "/* a /* nested crate::x */ still */ let a = b\"crate::x\"; let c = br##\"crate::\"# x\"##;\nlet d = 'x'; let e = '\\''; fn g<'a>() {} let r#type = 1; crate::y",
    );
    let idents: Vec<String> = t
        .iter()
        .filter_map(|(t, _)| match t {
            Tok::Ident(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        idents,
        ["let", "a", "let", "c", "let", "d", "let", "e", "fn", "g", "let", "type", "crate", "y"]
    );
    assert_eq!(t.last().map(|x| x.1), Some(2));
}
