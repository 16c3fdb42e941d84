//! The build's revision, for `--version` and `perf_exporter_build_info`'s
//! `revision` label (as node_exporter's build_info has): the
//! `PERF_EXPORTER_REVISION` environment variable when set (a container
//! build without `.git`: `--build-arg REVISION=$(git rev-parse --short HEAD)`),
//! else `git rev-parse --short HEAD`, else `unknown` (a source tarball,
//! no git).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=PERF_EXPORTER_REVISION");
    let given = std::env::var("PERF_EXPORTER_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty() && r != "unknown");
    let revision = given.or_else(|| {
        // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch
        // it points at (a commit), wherever git keeps them (a worktree's
        // HEAD is not under ./.git).
        for path in ["HEAD", "packed-refs"] {
            if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            if let Some(p) = git(&["rev-parse", "--git-path", &r]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
        git(&["rev-parse", "--short", "HEAD"])
    });
    let revision = revision.unwrap_or_else(|| "unknown".into());
    // Only a plain revision (hex, or a tag-like name) goes into a label.
    let revision: String = revision
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    println!("cargo:rustc-env=PERF_EXPORTER_REVISION={revision}");
}
