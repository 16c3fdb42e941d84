//! The pipeline has no back-edges: every `crate::` path in `src/**/*.rs`
//! (use statements, grouped uses and inline paths) goes to a module of the
//! same or an earlier stage, in the order `src/lib.rs` declares:
//!
//! 0. leaves: `duration`, `spec`, `perf::abi`, `problem` (typed reasons),
//!    `terminal` (escaping for terminal views)
//! 1. `config` · 2. `pmu` · 3. `resolve` · 4. `perf` ·
//! 5. `engine`, `snapshot`, `privilege`, `probe` · 6. `export`, `report`,
//!    `view` ·
//! 7. `web` · 8. the application (`app`, `cli`, `main.rs`) ·
//! 9. `fuzzing` (the fuzz targets reach every stage)
//!
//! Besides the order, the live kernel (`perf::live`, `perf::hotplug`) is
//! behind the `perf::Kernel` seam: only the application chooses it.
//!
//! A failure names the file, the line and the edge. A new module must be
//! given a stage here.

use std::path::{Path, PathBuf};

/// Stage of a module path (`["perf", "abi"]`), `None` for a name that is
/// not a module (a type or macro at the crate root).
fn stage_of_module(path: &[String]) -> Option<Result<usize, String>> {
    let first = path.first()?.as_str();
    let second = path.get(1).map(String::as_str);
    if !first.starts_with(|c: char| c.is_ascii_lowercase()) {
        return None;
    }
    Some(Ok(match (first, second) {
        ("duration" | "spec" | "problem" | "bounded" | "terminal", _)
        | ("perf", Some("abi" | "fs")) => 0,
        ("config", _) => 1,
        ("pmu", Some("format")) => 0,
        ("pmu" | "cgroup", _) => 2,
        ("resolve", Some("spec")) => 0,
        ("resolve", _) => 3,
        ("perf", _) => 4,
        ("engine" | "snapshot" | "privilege" | "probe", _) => 5,
        ("export" | "report" | "view", _) => 6,
        ("web", _) => 7,
        ("app" | "cli", _) => 8,
        ("fuzzing", _) => 9,
        _ => {
            return Some(Err(format!(
                "module `{first}` has no stage in tests/layering.rs"
            )))
        }
    }))
}

/// Stage of a source file (relative to `src/`), `None` for `lib.rs`.
fn stage_of_file(rel: &Path) -> Result<Option<usize>, String> {
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    match parts.first().map(String::as_str) {
        Some("lib") => Ok(None),
        Some("main") => Ok(Some(8)),
        _ => match stage_of_module(&parts) {
            Some(Ok(s)) => Ok(Some(s)),
            Some(Err(e)) => Err(format!("{}: {e}", rel.display())),
            None => Err(format!("{}: not a module file", rel.display())),
        },
    }
}

/// Edges being removed in a branch not merged yet: (file, edge target),
/// each with a comment naming who removes it. Empty: the last one
/// (`engine.rs` calling `perf::live::raise_nofile`) went with the engine
/// split.
const TEMPORARY: &[(&str, &str)] = &[];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file with comments blanked out (same offsets, so line
/// numbers stay right). String contents are kept: a `crate::` inside a
/// string literal is rare and harmless to over-report.
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        if in_str {
            if b[i] == b'\\' {
                i += 2;
                continue;
            }
            if b[i] == b'"' {
                in_str = false;
            }
            i += 1;
        } else if b[i] == b'"' && (i == 0 || b[i - 1] != b'\'') {
            in_str = true;
            i += 1;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                out[i] = b' ';
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            while i < b.len() && !b[i..].starts_with(b"*/") {
                if b[i] != b'\n' {
                    out[i] = b' ';
                }
                i += 1;
            }
            if i < b.len() {
                out[i] = b' ';
                out[i + 1] = b' ';
                i += 2;
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ident_len(s: &[u8]) -> usize {
    s.iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count()
}

/// The module paths (first two segments) a path starting at `s` (just
/// after `crate::`) names: `a::b`, or every item of `{a, b::{c, d}}`.
fn paths_at(s: &[u8], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let s = trim_start(s);
    if s.first() == Some(&b'{') {
        let mut depth = 0;
        let mut start = 1;
        for (i, &c) in s.iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' | b',' if depth == 1 => {
                    if start < i {
                        paths_at(&s[start..i], prefix, out);
                    }
                    start = i + 1;
                    if c == b'}' {
                        return;
                    }
                }
                b'}' => depth -= 1,
                _ => {}
            }
        }
        return;
    }
    let n = ident_len(s);
    if n == 0 {
        return;
    }
    let mut path = prefix.to_vec();
    path.push(String::from_utf8_lossy(&s[..n]).into_owned());
    let rest = trim_start(&s[n..]);
    if path.len() < 2 {
        if let Some(r) = rest.strip_prefix(b"::") {
            let r = trim_start(r);
            if r.first() == Some(&b'{') || ident_len(r) > 0 {
                paths_at(r, &path, out);
                return;
            }
        }
    }
    out.push(path);
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &s[n..]
}

#[test]
fn no_edge_against_the_stage_order() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 10, "found only {files:?}");
    let mut problems = Vec::new();
    let mut edges = 0;
    let mut used_temporary = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src");
        let from = match stage_of_file(rel) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let text = strip_comments(&std::fs::read_to_string(f).expect("readable"));
        let b = text.as_bytes();
        for (at, _) in text.match_indices("crate::") {
            // `perf_exporter::x` in main.rs is the same crate from outside.
            if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
                continue;
            }
            let line = text[..at].lines().count().max(1);
            let mut paths = Vec::new();
            paths_at(&b[at + "crate::".len()..], &[], &mut paths);
            for p in paths {
                edges += 1;
                let to = match stage_of_module(&p) {
                    None => continue,
                    Some(Ok(s)) => s,
                    Some(Err(e)) => {
                        problems.push(format!("{}:{line}: {e}", rel.display()));
                        continue;
                    }
                };
                let edge = p.join("::");
                let seam = p.len() > 1 && p[0] == "perf" && (p[1] == "live" || p[1] == "hotplug");
                let bad = to > from || (seam && from != 4 && from < 8);
                if !bad {
                    continue;
                }
                let name = rel.display().to_string();
                if TEMPORARY.iter().any(|&(f, e)| f == name && e == edge) {
                    used_temporary.push((name, edge));
                    continue;
                }
                problems.push(format!(
                    "{}:{line}: `crate::{edge}` goes from stage {from} to stage {to}{}",
                    rel.display(),
                    if seam {
                        " past the perf::Kernel seam"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    // main.rs names the library as `perf_exporter::`: the application
    // stage may use every stage, so there is nothing to check there.
    assert!(
        edges > 50,
        "only {edges} edges found: is the scanner broken?"
    );
    assert!(
        problems.is_empty(),
        "edges against the stage order (see src/lib.rs):\n{}",
        problems.join("\n")
    );
    eprintln!("temporary allowlist still used by: {used_temporary:?}");
}

/// The scanner itself: grouped, nested and inline paths; comments are
/// not code.
#[test]
fn scanner_reads_grouped_nested_and_inline_paths() {
    let text = strip_comments(
        "use crate::{config::Config, perf::{abi, sim::X}, pmu};\n// crate::web::x\nlet a = crate::engine::Engine::new();\n",
    );
    let mut all = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        paths_at(&text.as_bytes()[at + 7..], &[], &mut all);
    }
    let joined: Vec<String> = all.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        joined,
        [
            "config::Config",
            "perf::abi",
            "perf::sim",
            "pmu",
            "engine::Engine"
        ]
    );
    assert_eq!(stage_of_module(&["perf".into(), "abi".into()]), Some(Ok(0)));
    assert_eq!(stage_of_module(&["perf".into(), "sim".into()]), Some(Ok(4)));
}
