//! The exporter's own process metrics, named as node_exporter's (the
//! Prometheus client libraries' process collector): CPU time, memory, file
//! descriptors and start time, from `<procfs>/self` (`--path.procfs`).
//!
//! What does not change is read once, at start: the boot time
//! (`<procfs>/stat`) and the process's start in ticks after it, hence the
//! start time; and the open-files limit (`self/limits`), read again after
//! each successful reload (the engine raises the soft limit when a
//! configuration needs more descriptors). Each collection then reads one
//! file, `self/stat` (CPU time, virtual and resident memory), and counts
//! the entries of `self/fd` (a `readdir`, as node_exporter counts them).
//!
//! A file that cannot be read or parsed (a procfs fixture without `self/`,
//! a kernel without the field) leaves out the metrics it gives, never
//! exports a zero in their place.
//!
//! The kernel reports CPU times in clock ticks of `USER_HZ`, which is 100
//! on every architecture Linux exports to user space (`sysconf(_SC_CLK_TCK)`,
//! and what the Prometheus procfs library assumes too), and the resident
//! set in pages (`VmRSS` of `self/status` is the same count in kB).

use crate::bounded::lock;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`).
const USER_HZ: f64 = 100.0;

/// Cap of one procfs read.
const MAX: u64 = 64 * 1024;

fn read(path: &Path) -> Option<String> {
    crate::bounded::read_string(path, MAX).ok()
}

/// What `/proc/self/stat` gives: CPU seconds, virtual memory bytes,
/// the start time in ticks since boot and the resident set in pages.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    cpu_seconds: f64,
    virtual_bytes: f64,
    start_ticks: f64,
    rss_pages: f64,
}

/// Parses `/proc/<pid>/stat`: the fields after the command (which may
/// hold spaces and parentheses, so the last `)` ends it).
fn parse_stat(s: &str) -> Option<Stat> {
    let rest = &s[s.rfind(')')? + 1..];
    // Field 3 (state) is the first after the command.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Option<f64> { f.get(n - 3)?.parse::<u64>().ok().map(|v| v as f64) };
    Some(Stat {
        cpu_seconds: (field(14)? + field(15)?) / USER_HZ,
        start_ticks: field(22)?,
        virtual_bytes: field(23)?,
        rss_pages: field(24)?,
    })
}

/// `btime` of `/proc/stat`: the boot time in Unix seconds.
fn parse_btime(s: &str) -> Option<f64> {
    s.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|v| v as f64)
}

/// The soft `Max open files` of `/proc/<pid>/limits`.
fn parse_max_fds(s: &str) -> Option<f64> {
    let v = s.lines().find_map(|l| l.strip_prefix("Max open files"))?;
    let soft = v.split_whitespace().next()?;
    match soft {
        "unlimited" => Some(f64::INFINITY),
        n => n.parse::<u64>().ok().map(|v| v as f64),
    }
}

/// The process metrics' sources: what is constant read at start, the
/// rest at each [`Process::read`].
#[derive(Debug)]
pub(super) struct Process {
    /// `<procfs>/self`.
    me: PathBuf,
    /// Bytes per page, for the resident set.
    page_bytes: f64,
    /// When the process started, in Unix seconds.
    start_time: Option<f64>,
    /// The soft limit of open files.
    max_fds: Mutex<Option<f64>>,
}

/// The process metrics at one collection, each `None` where its source
/// could not be read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Reading {
    pub(super) cpu_seconds: Option<f64>,
    pub(super) open_fds: Option<f64>,
    pub(super) max_fds: Option<f64>,
    pub(super) virtual_bytes: Option<f64>,
    pub(super) resident_bytes: Option<f64>,
    pub(super) start_time: Option<f64>,
}

impl Process {
    /// Reads what does not change: the start time and the open-files
    /// limit.
    pub(super) fn new(procfs: &Path) -> Process {
        let me = procfs.join("self");
        let start = read(&me.join("stat")).and_then(|s| parse_stat(&s));
        let btime = read(&procfs.join("stat")).and_then(|s| parse_btime(&s));
        let p = Process {
            page_bytes: crate::perf::ring::page_size() as f64,
            start_time: start
                .zip(btime)
                .map(|(st, boot)| boot + st.start_ticks / USER_HZ),
            max_fds: Mutex::new(None),
            me,
        };
        p.reread_limits();
        p
    }

    /// Reads the open-files limit again (after a reload, which may have
    /// raised it).
    pub(super) fn reread_limits(&self) {
        *lock(&self.max_fds) = read(&self.me.join("limits")).and_then(|s| parse_max_fds(&s));
    }

    /// One reading: `self/stat` and the entries of `self/fd`.
    pub(super) fn read(&self) -> Reading {
        let stat = read(&self.me.join("stat")).and_then(|s| parse_stat(&s));
        // The directory's own descriptor, open while it is read, is not
        // counted (as the client libraries do not).
        let open_fds = std::fs::read_dir(self.me.join("fd"))
            .ok()
            .map(|dir| dir.count().saturating_sub(1) as f64);
        Reading {
            cpu_seconds: stat.map(|s| s.cpu_seconds),
            open_fds,
            max_fds: *lock(&self.max_fds),
            virtual_bytes: stat.map(|s| s.virtual_bytes),
            resident_bytes: stat.map(|s| s.rss_pages * self.page_bytes),
            start_time: self.start_time,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_command() {
        // A command with spaces and a parenthesis.
        let s = "4242 (perf exp) x) S 1 4242 4242 0 -1 4194560 1500 0 0 0 250 125 0 0 20 0 9 0 12345 987654321 2000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(s),
            Some(Stat {
                cpu_seconds: 3.75,
                virtual_bytes: 987654321.0,
                start_ticks: 12345.0,
                rss_pages: 2000.0,
            })
        );
        assert_eq!(parse_stat("4242 (x) S 1"), None);
    }

    #[test]
    fn limits_and_btime() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            20000                524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(20000.0));
        assert_eq!(
            parse_btime("cpu  1 2 3\nbtime 1764170000\nprocesses 9\n"),
            Some(1764170000.0)
        );
    }

    /// On this machine's procfs: every metric, with plausible values;
    /// the resident set as `VmRSS` of `self/status` counts it.
    #[test]
    fn this_process_has_every_metric() {
        let p = Process::new(Path::new("/proc"));
        let r = p.read();
        let v = |x: Option<f64>| x.expect("read");
        assert!(v(r.cpu_seconds) >= 0.0);
        assert!(v(r.open_fds) >= 3.0);
        assert!(v(r.max_fds) >= v(r.open_fds));
        assert!(v(r.resident_bytes) > 1e5);
        assert!(v(r.virtual_bytes) >= v(r.resident_bytes));
        let status = read(Path::new("/proc/self/status")).expect("status");
        let vm_rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
            .expect("VmRSS")
            * 1024.0;
        // Memory moves between the two reads: within 10%.
        let rss = v(r.resident_bytes);
        assert!((rss - vm_rss).abs() <= vm_rss / 10.0, "{rss} vs {vm_rss}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs_f64();
        let start = v(r.start_time);
        assert!(
            start <= now + 1.0 && start > now - 86400.0 * 365.0,
            "{start} vs {now}"
        );
        assert_eq!(Process::new(Path::new("/proc")).start_time, p.start_time);
        // A procfs without `self` (a fixture): nothing, never zeros.
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(Process::new(dir.path()).read(), Reading::default());
    }
}
