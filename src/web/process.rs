//! The exporter's own process metrics, named as node_exporter's (the
//! Prometheus client libraries' process collector): CPU time, memory, file
//! descriptors and start time, read from `<procfs>/self` (`--path.procfs`)
//! at each collection.
//!
//! A file that cannot be read or parsed (a procfs fixture without `self/`,
//! a kernel without the field) leaves out the metrics it gives, never
//! exports a zero in their place.
//!
//! The kernel reports CPU times in clock ticks of `USER_HZ`, which is 100
//! on every architecture Linux exports to user space (`sysconf(_SC_CLK_TCK)`,
//! and what the Prometheus procfs library assumes too).

use crate::snapshot::{Family, Kind, Sample};
use std::path::Path;

/// Clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`).
const USER_HZ: f64 = 100.0;

/// Cap of one procfs read.
const MAX: u64 = 64 * 1024;

fn read(path: &Path) -> Option<String> {
    crate::bounded::read_string(path, MAX).ok()
}

/// What `/proc/self/stat` gives: CPU seconds, virtual memory bytes and
/// the start time in ticks since boot.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    cpu_seconds: f64,
    virtual_bytes: f64,
    start_ticks: f64,
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
    })
}

/// `btime` of `/proc/stat`: the boot time in Unix seconds.
fn parse_btime(s: &str) -> Option<f64> {
    s.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|v| v as f64)
}

/// `VmRSS:` of `/proc/<pid>/status`, in bytes.
fn parse_rss(s: &str) -> Option<f64> {
    let v = s.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kb = v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    Some(kb as f64 * 1024.0)
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

fn one(name: &str, help: &str, kind: Kind, value: f64) -> Family {
    Family {
        name: name.into(),
        help: help.into(),
        kind,
        samples: vec![Sample {
            labels: Vec::new().into(),
            value,
            start_unix_nanos: 0,
        }],
    }
}

/// The process families, in node_exporter's order, each only where its
/// source could be read.
pub(super) fn families(procfs: &Path) -> Vec<Family> {
    let me = procfs.join("self");
    let mut out = Vec::with_capacity(6);
    let stat = read(&me.join("stat")).and_then(|s| parse_stat(&s));
    if let Some(st) = stat {
        out.push(one(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            Kind::Counter,
            st.cpu_seconds,
        ));
    }
    if let Ok(dir) = std::fs::read_dir(me.join("fd")) {
        // The directory's own descriptor, open while it is read, is not
        // counted (as the client libraries do not).
        let n = dir.count().saturating_sub(1);
        out.push(one(
            "process_open_fds",
            "Number of open file descriptors.",
            Kind::Gauge,
            n as f64,
        ));
    }
    if let Some(v) = read(&me.join("limits")).and_then(|s| parse_max_fds(&s)) {
        out.push(one(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            Kind::Gauge,
            v,
        ));
    }
    if let Some(st) = stat {
        out.push(one(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            Kind::Gauge,
            st.virtual_bytes,
        ));
    }
    if let Some(v) = read(&me.join("status")).and_then(|s| parse_rss(&s)) {
        out.push(one(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            Kind::Gauge,
            v,
        ));
    }
    let btime = read(&procfs.join("stat")).and_then(|s| parse_btime(&s));
    if let (Some(st), Some(boot)) = (stat, btime) {
        out.push(one(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            Kind::Gauge,
            boot + st.start_ticks / USER_HZ,
        ));
    }
    out
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
            })
        );
        assert_eq!(parse_stat("4242 (x) S 1"), None);
    }

    #[test]
    fn status_limits_and_btime() {
        assert_eq!(
            parse_rss("Name:\tperf-exporter\nVmRSS:\t   12345 kB\n"),
            Some(12345.0 * 1024.0)
        );
        assert_eq!(parse_rss("Name:\tkthreadd\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            20000                524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(20000.0));
        assert_eq!(
            parse_btime("cpu  1 2 3\nbtime 1764170000\nprocesses 9\n"),
            Some(1764170000.0)
        );
    }

    /// On this machine's procfs: every family, with plausible values.
    #[test]
    fn this_process_has_every_family() {
        let fams = families(Path::new("/proc"));
        let names: Vec<&str> = fams.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "process_cpu_seconds_total",
                "process_open_fds",
                "process_max_fds",
                "process_virtual_memory_bytes",
                "process_resident_memory_bytes",
                "process_start_time_seconds",
            ]
        );
        let v = |n: &str| fams.iter().find(|f| f.name == n).expect(n).samples[0].value;
        assert!(v("process_open_fds") >= 3.0);
        assert!(v("process_resident_memory_bytes") > 1e5);
        assert!(v("process_virtual_memory_bytes") >= v("process_resident_memory_bytes"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs_f64();
        let start = v("process_start_time_seconds");
        assert!(
            start <= now + 1.0 && start > now - 86400.0 * 365.0,
            "{start} vs {now}"
        );
        // A procfs without `self` (a fixture): nothing, never zeros.
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(families(dir.path()).is_empty());
    }
}
