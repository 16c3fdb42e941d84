//! perf-exporter against node_exporter 1.9's perf collector, side by side
//! on this machine, for the same events on the same CPUs: the software
//! profilers (context-switches, cpu-migrations, page-faults, minor-faults,
//! major-faults), per CPU.
//!
//! * ours: the release binary with a one-set config of those five events
//!   and `--web.disable-exporter-metrics` (no process_* families, as
//!   theirs);
//! * theirs: `node_exporter --collector.disable-defaults --collector.perf
//!   --collector.perf.disable-hardware-profilers
//!   --collector.perf.disable-cache-profilers --web.disable-exporter-metrics`
//!   (the last flag drops node_exporter's go_*/process_* self-metrics, so
//!   the comparison is of the perf collector and the HTTP path, in its
//!   favour).
//!
//! Each is scraped the same number of times over one keep-alive
//! connection, interleaved (A B A B ...). Reported: CPU time per scrape
//! (user+sys from `/proc/<pid>/stat`, and from the threads' schedstat) and
//! the ratio ours/theirs; median and p99 scrape latency seen by the client;
//! peak RSS (`VmHWM`); syscalls per scrape, from `strace -f -y` attached to
//! every thread while only that exporter is scraped, by class (perf reads,
//! socket I/O, event loop, files, other).
//!
//! ```sh
//! cargo bench --bench vs_node_exporter -- --node-exporter PATH [--short] [--scrapes N] [--gzip] [--also PATH]
//! ```
//! `--also PATH` (repeatable): another build of perf-exporter (an A/B of
//! a change), run with the same arguments and scraped in the same
//! interleaving (A B C A B C ...), reported in a column of its own (named
//! by its file name); the targets are judged on the first (this tree's
//! build).
//! Needs root (system-wide counting, strace). `scripts/bench.sh` fetches
//! node_exporter and runs this. Exits non-zero only when it cannot run;
//! whether the targets are met is printed, not enforced.

#[path = "support/five_software.rs"]
mod five_software;
#[path = "support/harness.rs"]
mod harness;
#[path = "support/sysfs_gen.rs"]
mod sysfs_gen;

use harness::{
    arg_value, err, quantile, schedstat_cpu_seconds, stat_cpu_seconds, status_kib, trace_syscalls,
    Error, HttpConn, Server, SyscallClass,
};
use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

struct Side {
    server: Server,
    conn: HttpConn,
    latencies: Vec<f64>,
    bytes: usize,
    series: usize,
    /// `--gzip`: every scrape asks for gzip.
    gzip: bool,
}

impl Side {
    fn scrape(&mut self) -> Result<(), Error> {
        let t = Instant::now();
        let r = self.conn.get("/metrics")?;
        self.latencies.push(t.elapsed().as_secs_f64());
        if r.status != 200 {
            return Err(err(format!(
                "{}: /metrics answered {}",
                self.server.name, r.status
            )));
        }
        self.bytes = r.body.len();
        let mut text = Vec::new();
        let body = if self.gzip {
            flate2::read::GzDecoder::new(&r.body[..]).read_to_end(&mut text)?;
            &text
        } else {
            &r.body
        };
        self.series = String::from_utf8_lossy(body)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        Ok(())
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("vs_node_exporter: {e}");
        std::process::exit(1);
    }
}

#[allow(clippy::too_many_lines)] // one run; to be split into steps (issue 26)
fn run() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes --bench; nothing else is ours to reject.
    let short = args.iter().any(|a| a == "--short");
    let gzip = args.iter().any(|a| a == "--gzip");
    let scrapes: usize = arg_value(&args, "--scrapes")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(if short { 100 } else { 10_000 });
    let traced_scrapes: usize = if short { 20 } else { 200 };
    let node_exporter = arg_value(&args, "--node-exporter")
        .or_else(|| std::env::var("PERF_EXPORTER_TEST_NODE_EXPORTER").ok())
        .map(PathBuf::from)
        .ok_or_else(|| err("--node-exporter PATH (or PERF_EXPORTER_TEST_NODE_EXPORTER) is required; scripts/bench.sh fetches it"))?;
    let strace = PathBuf::from(arg_value(&args, "--strace").unwrap_or_else(|| "strace".into()));
    let also: Vec<PathBuf> = args
        .windows(2)
        .filter(|w| w[0] == "--also")
        .map(|w| PathBuf::from(&w[1]))
        .collect();

    let dir = tempfile::tempdir()?;
    let cfg = dir.path().join("software.yaml");
    std::fs::write(&cfg, five_software::CONFIG)?;
    let ours_args = [
        "--config.file".into(),
        cfg.display().to_string(),
        "--web.listen-address".into(),
        "127.0.0.1:{port}".into(),
        "--log.level".into(),
        "warn".into(),
        "--web.disable-exporter-metrics".into(),
    ];
    let ours = Server::start(
        "perf-exporter",
        PathBuf::from(env!("CARGO_BIN_EXE_perf-exporter")).as_path(),
        &ours_args,
        "/metrics",
    )?;
    let theirs = Server::start(
        "node_exporter",
        &node_exporter,
        &[
            "--web.listen-address=127.0.0.1:{port}".into(),
            "--collector.disable-defaults".into(),
            "--collector.perf".into(),
            "--collector.perf.disable-hardware-profilers".into(),
            "--collector.perf.disable-cache-profilers".into(),
            "--web.disable-exporter-metrics".into(),
            "--log.level=warn".into(),
        ],
        "/metrics",
    )?;
    let mut servers = vec![ours, theirs];
    for path in &also {
        let name = path
            .file_name()
            .map_or("--also".into(), |n| n.to_string_lossy());
        servers.push(Server::start(&name, path, &ours_args, "/metrics")?);
    }
    let mut sides = Vec::new();
    for server in servers {
        let mut conn = HttpConn::connect(server.port)?;
        if gzip {
            conn = conn.accept_gzip();
        }
        sides.push(Side {
            server,
            conn,
            latencies: Vec::new(),
            bytes: 0,
            series: 0,
            gzip,
        });
    }

    // Warm up (first scrapes allocate, fault pages in, start threads).
    for _ in 0..20 {
        for side in sides.iter_mut() {
            side.scrape()?;
        }
    }
    for side in sides.iter_mut() {
        side.latencies.clear();
    }
    let cpu0: Vec<(f64, f64)> = sides
        .iter()
        .map(|s| {
            Ok::<_, Error>((
                stat_cpu_seconds(s.server.pid())?,
                schedstat_cpu_seconds(s.server.pid())?,
            ))
        })
        .collect::<Result<_, _>>()?;
    for _ in 0..scrapes {
        for side in sides.iter_mut() {
            side.scrape()?;
        }
    }
    let mut cpu = Vec::new();
    for (side, (stat0, sched0)) in sides.iter().zip(cpu0) {
        let pid = side.server.pid();
        cpu.push((
            (stat_cpu_seconds(pid)? - stat0) / scrapes as f64,
            (schedstat_cpu_seconds(pid)? - sched0) / scrapes as f64,
        ));
    }
    let rss: Vec<u64> = sides
        .iter()
        .map(|s| status_kib(s.server.pid(), "VmHWM"))
        .collect::<Result<_, _>>()?;

    // Syscalls: one exporter traced at a time, only it is scraped.
    let mut syscalls: Vec<BTreeMap<SyscallClass, f64>> = Vec::new();
    let mut names: Vec<BTreeMap<String, f64>> = Vec::new();
    for side in sides.iter_mut() {
        let pid = side.server.pid();
        let calls = trace_syscalls(&strace, pid, &mut || {
            for _ in 0..traced_scrapes {
                side.scrape()?;
            }
            Ok(())
        })?;
        let mut by_class = BTreeMap::new();
        let mut by_name = BTreeMap::new();
        for (name, class) in calls {
            *by_class.entry(class).or_insert(0.0) += 1.0 / traced_scrapes as f64;
            *by_name
                .entry(format!("{name} ({})", class.name()))
                .or_insert(0.0) += 1.0 / traced_scrapes as f64;
        }
        syscalls.push(by_class);
        names.push(by_name);
    }

    let ms = |x: f64| x * 1e3;
    println!("\n## perf-exporter vs node_exporter 1.9 perf collector (software profilers)\n");
    println!("{}", harness::machine());
    println!(
        "{} scrapes each, interleaved, keep-alive{}; syscalls over {} scrapes each under strace{}\n",
        scrapes,
        if gzip { ", Accept-Encoding: gzip" } else { "" },
        traced_scrapes,
        if short { " (short mode)" } else { "" }
    );
    // Columns: every exporter, then each perf-exporter's ratio to
    // node_exporter (the second side).
    let ours_idx: Vec<usize> = (0..sides.len()).filter(|&i| i != 1).collect();
    let heads: Vec<&str> = sides.iter().map(|s| s.server.name.as_str()).collect();
    let ratios: Vec<String> = ours_idx
        .iter()
        .map(|&i| format!("{}/theirs", if i == 0 { "ours" } else { heads[i] }))
        .collect();
    println!("| | {} | {} |", heads.join(" | "), ratios.join(" | "));
    println!("|---|{}", "---:|".repeat(heads.len() + ratios.len()));
    let row = |name: &str, v: &[f64], unit: &str, prec: usize| {
        let u = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        let cells: Vec<String> = v.iter().map(|x| format!("{x:.prec$}{u}")).collect();
        let r: Vec<String> = ours_idx
            .iter()
            .map(|&i| format!("{:.2}", v[i] / v[1]))
            .collect();
        println!("| {name} | {} | {} |", cells.join(" | "), r.join(" | "));
    };
    let each = |f: &dyn Fn(usize) -> f64| (0..sides.len()).map(f).collect::<Vec<f64>>();
    row(
        "CPU per scrape (user+sys, /proc/pid/stat)",
        &each(&|i| ms(cpu[i].0)),
        "ms",
        3,
    );
    row(
        "CPU per scrape (threads' schedstat)",
        &each(&|i| ms(cpu[i].1)),
        "ms",
        3,
    );
    row(
        "median scrape latency",
        &each(&|i| ms(quantile(&sides[i].latencies, 0.5))),
        "ms",
        3,
    );
    row(
        "p99 scrape latency",
        &each(&|i| ms(quantile(&sides[i].latencies, 0.99))),
        "ms",
        3,
    );
    row(
        "peak RSS (VmHWM)",
        &each(&|i| rss[i] as f64 / 1024.0),
        "MiB",
        1,
    );
    let total = |m: &BTreeMap<SyscallClass, f64>| m.values().sum::<f64>();
    row(
        "syscalls per scrape",
        &each(&|i| total(&syscalls[i])),
        "",
        1,
    );
    let blank = "| ".repeat(ratios.len());
    for class in SyscallClass::ALL {
        let cells: Vec<String> = syscalls
            .iter()
            .map(|m| format!("{:.1}", m.get(&class).copied().unwrap_or(0.0)))
            .collect();
        println!(
            "| &nbsp;&nbsp;{} | {} {blank}|",
            class.name(),
            cells.join(" | ")
        );
    }
    let sizes: Vec<String> = sides
        .iter()
        .map(|s| format!("{} B, {} samples", s.bytes, s.series))
        .collect();
    println!("| response size | {} {blank}|", sizes.join(" | "));
    for (side, n) in sides.iter().zip(&names) {
        let list: Vec<String> = n.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
        println!(
            "\n{} syscalls per scrape: {}",
            side.server.name,
            list.join(", ")
        );
    }
    let cpus = perf_exporter::pmu::read_online_cpus(std::path::Path::new("/sys"))?.len();
    let ratio = cpu[0].1 / cpu[1].1;
    // Issue 7's target without gzip; issue 29's with it (as Prometheus
    // asks).
    let target = if gzip { 0.2 } else { 0.5 };
    println!(
        "\ntarget CPU per scrape <= {target} x node_exporter: {} (ratio {ratio:.2})",
        if ratio <= target { "met" } else { "MISSED" }
    );
    let perf_reads = syscalls[0]
        .get(&SyscallClass::PerfRead)
        .copied()
        .unwrap_or(0.0);
    let extra: f64 = [
        SyscallClass::PerfOther,
        SyscallClass::File,
        SyscallClass::Other,
    ]
    .iter()
    .map(|c| syscalls[0].get(c).copied().unwrap_or(0.0))
    .sum();
    // A scrape whose last collection (its body included) took less than
    // `INLINE_BELOW` (src/web/collect.rs) collects and encodes on the
    // runtime's thread itself: its floor is the reads and the two socket
    // calls, plus the `epoll_wait` that finds the next request. A scrape
    // whose last collection ran long (preempted on a loaded machine) is
    // handed to the collector thread: a futex wake and the collector's
    // futex wait, and the result handed back through the runtime's eventfd
    // (`write`, counted under the event loop). So futex calls are 0 per
    // scrape on the inline path and about 2 per handed-off scrape; their
    // number per scrape is about twice the share of scrapes handed off,
    // which depends on the load, and is reported apart from the target.
    let futex: f64 = names[0]
        .iter()
        .filter(|(k, _)| k.starts_with("futex "))
        .map(|(_, v)| v)
        .sum();
    println!(
        "target syscalls = read floor ({cpus} groups: one per CPU) + socket I/O + event loop: perf reads {perf_reads:.2}, other syscalls {:.2}: {}; futex {futex:.2} (counted apart: about {:.0}% of scrapes handed to the collector thread, 2 futex each; 0 on the inline path)",
        extra - futex,
        if (perf_reads - cpus as f64).abs() < 0.01 && extra - futex < 0.01 {
            "met"
        } else {
            "MISSED"
        },
        (futex / 2.0 * 100.0).min(100.0)
    );
    gzip_sizes()?;
    Ok(())
}

/// `/metrics` body bytes with and without `Accept-Encoding: gzip` (one
/// request each over a fresh connection; the Content-Length).
fn body_bytes(port: u16, gzip: bool) -> Result<usize, Error> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    let enc = if gzip {
        "Accept-Encoding: gzip\r\n"
    } else {
        ""
    };
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{enc}\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| err("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    if gzip != head.contains("content-encoding: gzip") {
        return Err(err(format!("gzip {gzip}: unexpected headers {head}")));
    }
    Ok(raw.len() - end - 4)
}

/// Defect 3 of issue 10: the bytes gzip saves on the intel-hybrid fixture
/// and on a simulated 512-CPU node, with the default config and with the
/// same config at full resolution (every `per:` set to `cpu`). The
/// default sums its sets per socket or node (issue 29), so its body is
/// about the same size on both hosts; the per-CPU body is the one that
/// grows with the CPUs (the table used to show only the default, the
/// same size twice).
fn gzip_sizes() -> Result<(), Error> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("sys");
    std::fs::create_dir_all(&root)?;
    sysfs_gen::generate(&root, sysfs_gen::SHAPE_512)?;
    let per_cpu = tmp.path().join("per-cpu.yaml");
    std::fs::write(
        &per_cpu,
        full_resolution(perf_exporter::config::DEFAULT_CONFIG),
    )?;
    let hybrid = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-hybrid");
    println!("\n## /metrics with and without gzip (simulated PMU)\n");
    println!("| host | config | identity | gzip | saved |");
    println!("|---|---|---:|---:|---:|");
    for (name, sysfs) in [
        ("intel-hybrid fixture", hybrid),
        ("512 CPUs, 2 sockets", root),
    ] {
        for (config, file) in [("default", None), ("per-CPU", Some(&per_cpu))] {
            let mut args = vec![
                "--simulate".into(),
                "--path.sysfs".into(),
                sysfs.display().to_string(),
                "--web.listen-address".into(),
                "127.0.0.1:{port}".into(),
                "--log.level".into(),
                "error".into(),
            ];
            if let Some(f) = file {
                args.extend(["--config.file".into(), f.display().to_string()]);
            }
            let server = Server::start(
                name,
                PathBuf::from(env!("CARGO_BIN_EXE_perf-exporter")).as_path(),
                &args,
                "/metrics",
            )?;
            let plain = body_bytes(server.port, false)?;
            let gz = body_bytes(server.port, true)?;
            println!(
                "| {name} | {config} | {:.1} KiB | {:.1} KiB | {:.1} KiB ({:.0}%) |",
                plain as f64 / 1024.0,
                gz as f64 / 1024.0,
                (plain - gz.min(plain)) as f64 / 1024.0,
                100.0 * (1.0 - gz as f64 / plain as f64)
            );
        }
    }
    Ok(())
}

/// `config` (YAML) with every set's `per:` level set to `cpu`.
fn full_resolution(config: &str) -> String {
    config
        .lines()
        .map(|l| match l.trim_start().strip_prefix("per:") {
            Some(_) => format!("{}per: cpu", &l[..l.len() - l.trim_start().len()]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
