//! Cgroup counting in the simulated kernel.
//!
//! A cgroup's counter on a CPU counts a share of what a system-wide
//! counter of the same event counts there: the cgroup's `usage_usec` in
//! its `cpu.stat` over the usage of the top of its hierarchy (the highest
//! ancestor directory with a `cpu.stat`, the root of a fixture tree), so
//! the counts of disjoint cgroups never add up to more than the node's.
//! Times (`time_enabled`, `time_running`) run as for a system-wide group.
//!
//! A directory that does not exist fails with ENOENT, as `open()` does;
//! a cgroup removed after its directory was opened fails `open_in_cgroup`
//! with ENOENT, as the live kernel's `perf_event_open` does.
//!
//! So does a child cgroup of a cgroup v2 tree whose root has an empty
//! `cgroup.subtree_control` file: the kernel has created no `perf_event`
//! state in it yet ([`crate::perf::cgroup`]'s notes). A tree without that
//! file (most fixtures) is one whose controllers were applied.

use std::path::Path;

/// `usage_usec` of a `cpu.stat` in `dir`, `None` without one.
fn usage_usec(dir: &Path) -> Option<u64> {
    let text = std::fs::read(dir.join("cpu.stat")).ok()?;
    parse_usage(&text)
}

/// The `usage_usec` line of a `cpu.stat` file's bytes.
pub(super) fn parse_usage(text: &[u8]) -> Option<u64> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(b"usage_usec ")?;
        std::str::from_utf8(rest).ok()?.trim().parse().ok()
    })
}

/// The share of each CPU's count that `dir` gets (0..=1), or the errno.
pub(super) fn share_of(dir: &Path) -> Result<f64, i32> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(libc::ENOTDIR),
        Err(e) => return Err(e.raw_os_error().unwrap_or(libc::ENOENT)),
    }
    let own = usage_usec(dir).unwrap_or(0);
    let top = dir
        .ancestors()
        .skip(1)
        .filter(|a| a.join("cpu.stat").is_file())
        .last()
        .and_then(usage_usec);
    Ok(match top {
        Some(0) => 0.0,
        Some(total) => (own as f64 / total as f64).clamp(0.0, 1.0),
        None if own > 0 => 1.0,
        None => 0.0,
    })
}

/// Whether the kernel has `perf_event` state in `dir`: false only for a
/// cgroup below the top of a v2 tree (the highest ancestor with a
/// `cgroup.controllers`) whose `cgroup.subtree_control` exists and is
/// empty.
pub(super) fn has_perf_event_state(dir: &Path) -> bool {
    let Some(top) = dir
        .ancestors()
        .skip(1)
        .filter(|a| a.join("cgroup.controllers").is_file())
        .last()
    else {
        return true;
    };
    match std::fs::read_to_string(top.join("cgroup.subtree_control")) {
        Ok(s) => !s.trim().is_empty(),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_parsed_from_cpu_stat() {
        assert_eq!(
            parse_usage(b"usage_usec 1234\nuser_usec 1000\n"),
            Some(1234)
        );
        assert_eq!(parse_usage(b"user_usec 1000\n"), None);
        assert_eq!(parse_usage(b"usage_usec x\n"), None);
    }

    #[test]
    fn shares_are_usage_over_the_top_of_the_tree() {
        let root = std::env::temp_dir().join(format!("pe-simcg-{}", std::process::id()));
        let a = root.join("app/a");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(root.join("cpu.stat"), "usage_usec 1000\n").unwrap();
        std::fs::write(root.join("app/cpu.stat"), "usage_usec 600\n").unwrap();
        std::fs::write(a.join("cpu.stat"), "usage_usec 450\n").unwrap();
        assert_eq!(share_of(&a), Ok(0.45));
        assert_eq!(share_of(&root.join("app")), Ok(0.6));
        assert_eq!(share_of(&root.join("gone")), Err(libc::ENOENT));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn children_of_an_unapplied_v2_tree_have_no_perf_event_state() {
        let root = std::env::temp_dir().join(format!("pe-simcg-pe-{}", std::process::id()));
        let a = root.join("app/a");
        std::fs::create_dir_all(&a).unwrap();
        // Not a v2 tree (no cgroup.controllers): state everywhere.
        assert!(has_perf_event_state(&a));
        std::fs::write(root.join("cgroup.controllers"), "cpu io memory pids\n").unwrap();
        std::fs::write(root.join("app/cgroup.controllers"), "").unwrap();
        // No subtree_control file: taken as applied.
        assert!(has_perf_event_state(&a));
        std::fs::write(root.join("cgroup.subtree_control"), "\n").unwrap();
        assert!(!has_perf_event_state(&a));
        assert!(!has_perf_event_state(&root.join("app")));
        assert!(has_perf_event_state(&root), "the root always has it");
        std::fs::write(root.join("cgroup.subtree_control"), "pids\n").unwrap();
        assert!(has_perf_event_state(&a));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
