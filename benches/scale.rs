//! The exporter at the scale of a 512-CPU node, on the simulated PMU: a
//! 512-CPU, 2-socket Intel server tree with 8 memory-controller PMUs per
//! socket is generated at run time (`support/sysfs_gen.rs`, with a
//! Skylake-SP `cpuinfo` so the sets guarded by `requires_cpu` count), and
//! the release binary serves it (`serve --simulate`) with the default
//! config (core sets summed per node, uncore per socket), with the same config at `per:
//! cpu` on every set (the per-CPU default the exporter had before issue
//! 29) and with `--config.aggregate-cpus` (every set `per: node`).
//! For comparison the same binary also runs on this host's live kernel
//! with the default config.
//!
//! Reported per case: samples and bytes per response; CPU time per scrape
//! of the exporter process (user+sys from `/proc/<pid>/stat`, and from the
//! threads' schedstat); median and p99 scrape latency seen by the client;
//! peak and final RSS; and, in-process on the same tree, the median wall
//! time of a collection (one read per group on the simulated PMU,
//! accumulation, snapshot) and of the text encoding.
//!
//! ```sh
//! cargo bench --bench scale -- [--short] [--scrapes N]
//! cargo bench --bench scale -- --against OLD_BIN [--config F] [--rounds R] [--scrapes N]
//! ```
//!
//! With `--against`, only the 512-CPU default case runs, A B A B: this
//! build and another binary of the exporter (an older commit, built with
//! its own `CARGO_TARGET_DIR`) take turns on the same tree, `R` rounds of
//! `N` scrapes each, and the CPU per scrape and per sample of each round
//! is printed. `--config F` gives both the same config file (e.g. the
//! older commit's `config/default.yaml`), so that both export the same
//! series; without it each uses its own embedded default.
//! Exits non-zero only when it cannot run; whether the targets are met is
//! printed, not enforced.

#[path = "support/harness.rs"]
mod harness;
#[path = "support/sysfs_gen.rs"]
mod sysfs_gen;

use harness::{
    arg_value, err, quantile, schedstat_cpu_seconds, stat_cpu_seconds, status_kib, Error, HttpConn,
    Server,
};
use perf_exporter::config::Config;
use perf_exporter::engine::{Engine, Fds};
use perf_exporter::export::prometheus::encode_text;
use perf_exporter::perf::sim::SimKernel;
use perf_exporter::pmu::PmuTable;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

struct Measured {
    case: String,
    samples: usize,
    bytes: usize,
    cpu_stat: f64,
    cpu_sched: f64,
    p50: f64,
    p99: f64,
    hwm_kib: u64,
    rss_kib: u64,
    groups: Option<usize>,
    collect_wall: Option<f64>,
    encode_wall: Option<f64>,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("scale: {e}");
        std::process::exit(1);
    }
}

/// Serves `args` with the release binary and scrapes it `scrapes` times.
fn serve_and_scrape(case: &str, args: &[String], scrapes: usize) -> Result<Measured, Error> {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_perf-exporter"));
    serve_and_scrape_with(&bin, case, args, scrapes)
}

/// Serves `args` with `bin` and scrapes it `scrapes` times.
fn serve_and_scrape_with(
    bin: &Path,
    case: &str,
    args: &[String],
    scrapes: usize,
) -> Result<Measured, Error> {
    let mut full: Vec<String> = vec![
        "--web.listen-address".into(),
        "127.0.0.1:{port}".into(),
        "--log.level".into(),
        "warn".into(),
    ];
    full.extend_from_slice(args);
    let server = Server::start(case, bin, &full, "/-/ready")?;
    let mut conn = HttpConn::connect(server.port)?;
    let mut body = Vec::new();
    for _ in 0..5 {
        body = conn.get("/metrics")?.body;
    }
    let pid = server.pid();
    let (stat0, sched0) = (stat_cpu_seconds(pid)?, schedstat_cpu_seconds(pid)?);
    let mut lat = Vec::with_capacity(scrapes);
    for _ in 0..scrapes {
        let t = Instant::now();
        let r = conn.get("/metrics")?;
        lat.push(t.elapsed().as_secs_f64());
        if r.status != 200 {
            return Err(err(format!("{case}: /metrics answered {}", r.status)));
        }
        body = r.body;
    }
    let n = scrapes as f64;
    let text = String::from_utf8_lossy(&body);
    Ok(Measured {
        case: case.into(),
        samples: text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count(),
        bytes: body.len(),
        cpu_stat: (stat_cpu_seconds(pid)? - stat0) / n,
        cpu_sched: (schedstat_cpu_seconds(pid)? - sched0) / n,
        p50: quantile(&lat, 0.5),
        p99: quantile(&lat, 0.99),
        hwm_kib: status_kib(pid, "VmHWM")?,
        rss_kib: status_kib(pid, "VmRSS")?,
        groups: None,
        collect_wall: None,
        encode_wall: None,
    })
}

/// Median wall time of a collection and of its text encoding, in-process
/// on the simulated PMU; and the number of groups (reads per collection).
/// The generated `cpuinfo`'s procfs, next to the generated sysfs `root`.
fn procfs_of(root: &Path) -> PathBuf {
    root.with_file_name("proc")
}

/// The 512-CPU sysfs tree (`<dir>/sys`) and its procfs (`<dir>/proc`,
/// Skylake-SP CPUs, so the sets the default guards with `requires_cpu`
/// count, as on a real host).
fn generate_512(dir: &Path) -> Result<(PathBuf, PathBuf), Error> {
    let root = dir.join("sys");
    std::fs::create_dir_all(&root)?;
    sysfs_gen::generate(&root, sysfs_gen::SHAPE_512)?;
    let procfs = procfs_of(&root);
    std::fs::create_dir_all(&procfs)?;
    sysfs_gen::generate_cpuinfo(&procfs, sysfs_gen::SHAPE_512)?;
    Ok((root, procfs))
}

fn in_process(root: &Path, level: Level, iters: usize) -> Result<(usize, f64, f64), Error> {
    let mut table = PmuTable::discover(root)?;
    table.read_identities(&procfs_of(root));
    let k = Arc::new(SimKernel::new(table.clone()));
    let mut cfg = match level {
        Level::PerCpu => Config::parse(&per_cpu_default(), "per-cpu.yaml")?,
        _ => Config::default_config(),
    };
    if level == Level::Node {
        cfg.aggregate_cpus();
    }
    let mut e = Engine::for_config(k, table, &cfg, Fds::Unbounded);
    let mut out = String::new();
    let (mut collect, mut encode) = (Vec::new(), Vec::new());
    for i in 0..iters + 3 {
        let t = Instant::now();
        let snap = e.collect();
        let t1 = Instant::now();
        out.clear();
        encode_text(&snap.families, &mut out);
        let t2 = Instant::now();
        if i >= 3 {
            collect.push((t1 - t).as_secs_f64());
            encode.push((t2 - t1).as_secs_f64());
        }
    }
    Ok((
        e.open_groups(),
        quantile(&collect, 0.5),
        quantile(&encode, 0.5),
    ))
}

/// How the default config's sets are summed in a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// As the embedded default says (socket or node per set).
    Default,
    /// Every set `per: cpu`: the per-CPU default before issue 29.
    PerCpu,
    /// `--config.aggregate-cpus`: every set `per: node`.
    Node,
}

/// The embedded default config with every set at `per: cpu`.
fn per_cpu_default() -> String {
    perf_exporter::config::DEFAULT_CONFIG
        .lines()
        .map(|l| match l.split_once("per: ") {
            Some((indent, _)) if indent.trim().is_empty() => format!("{indent}per: cpu"),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// This build against `old`, taking turns on the same 512-CPU tree.
fn side_by_side(args: &[String], old: &Path, root: &Path, scrapes: usize) -> Result<(), Error> {
    let rounds: usize = arg_value(args, "--rounds")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(3);
    let mut serve_args = vec![
        "--simulate".to_string(),
        "--path.sysfs".into(),
        root.display().to_string(),
        "--path.procfs".into(),
        procfs_of(root).display().to_string(),
    ];
    if let Some(cfg) = arg_value(args, "--config") {
        serve_args.extend(["--config.file".into(), cfg]);
    }
    let new = PathBuf::from(env!("CARGO_BIN_EXE_perf-exporter"));
    println!(
        "\n## Side by side: this build (A) and {} (B), 512 CPUs (sim)\n",
        old.display()
    );
    println!("{}", harness::machine());
    println!("{rounds} rounds x {scrapes} scrapes each, A B A B\n");
    println!(
        "| round | binary | samples | CPU/scrape stat | CPU/scrape schedstat | CPU per sample |"
    );
    println!("|---:|---|---:|---:|---:|---:|");
    let mut sums = [(0.0, 0usize); 2];
    for round in 1..=rounds {
        for (i, (name, bin)) in [("A", new.as_path()), ("B", old)].into_iter().enumerate() {
            let m = serve_and_scrape_with(bin, name, &serve_args, scrapes)?;
            let cpu = m.cpu_sched.max(m.cpu_stat);
            println!(
                "| {round} | {name} | {} | {:.2} ms | {:.2} ms | {:.0} ns |",
                m.samples,
                m.cpu_stat * 1e3,
                m.cpu_sched * 1e3,
                cpu * 1e9 / m.samples.max(1) as f64
            );
            sums[i].0 += cpu;
            sums[i].1 = m.samples;
        }
    }
    let r = rounds.max(1) as f64;
    let (a, b) = (sums[0].0 / r, sums[1].0 / r);
    println!(
        "\nmean CPU per scrape: A {:.2} ms, B {:.2} ms (A/B {:.2}); per sample: A {:.0} ns, B {:.0} ns",
        a * 1e3,
        b * 1e3,
        a / b,
        a * 1e9 / sums[0].1.max(1) as f64,
        b * 1e9 / sums[1].1.max(1) as f64
    );
    Ok(())
}

fn run() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let short = args.iter().any(|a| a == "--short");
    let scrapes: usize = arg_value(&args, "--scrapes")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(if short { 20 } else { 500 });
    let tmp = tempfile::tempdir()?;
    let (root, procfs) = generate_512(tmp.path())?;
    let sysfs = root.display().to_string();
    if let Some(old) = arg_value(&args, "--against") {
        return side_by_side(&args, Path::new(&old), &root, scrapes);
    }

    let per_cpu = tmp.path().join("per-cpu.yaml");
    std::fs::write(&per_cpu, per_cpu_default())?;
    let mut rows = Vec::new();
    for (case, level) in [
        ("512 CPUs (sim), default config", Level::Default),
        (
            "512 CPUs (sim), default config with every set per: cpu",
            Level::PerCpu,
        ),
        ("512 CPUs (sim), --config.aggregate-cpus", Level::Node),
    ] {
        let mut a = vec![
            "--simulate".to_string(),
            "--path.sysfs".into(),
            sysfs.clone(),
            "--path.procfs".into(),
            procfs.display().to_string(),
        ];
        match level {
            Level::Node => a.push("--config.aggregate-cpus".into()),
            Level::PerCpu => a.extend(["--config.file".into(), per_cpu.display().to_string()]),
            Level::Default => {}
        }
        let mut m = serve_and_scrape(case, &a, scrapes)?;
        let (groups, c, e) = in_process(&root, level, scrapes.min(200))?;
        m.groups = Some(groups);
        m.collect_wall = Some(c);
        m.encode_wall = Some(e);
        rows.push(m);
    }
    let cpus = perf_exporter::pmu::read_online_cpus(Path::new("/sys"))?.len();
    rows.push(serve_and_scrape(
        &format!("this host ({cpus} CPUs, live kernel), default config"),
        &[],
        scrapes,
    )?);

    let ms = |x: f64| x * 1e3;
    let mib = |k: u64| k as f64 / 1024.0;
    println!("\n## Scale: 512-CPU node on the simulated PMU\n");
    println!("{}", harness::machine());
    println!(
        "{scrapes} scrapes per case over one keep-alive connection{}\n",
        if short { " (short mode)" } else { "" }
    );
    println!("| case | samples | response | groups (reads) | CPU/scrape stat | CPU/scrape schedstat | latency p50 / p99 | collect (wall) | encode (wall) | peak RSS | RSS |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let opt = |x: Option<f64>| x.map_or("-".into(), |v| format!("{:.2} ms", ms(v)));
    for m in &rows {
        println!(
            "| {} | {} | {:.0} KiB | {} | {:.2} ms | {:.2} ms | {:.2} / {:.2} ms | {} | {} | {:.1} MiB | {:.1} MiB |",
            m.case,
            m.samples,
            m.bytes as f64 / 1024.0,
            m.groups.map_or("-".into(), |g| g.to_string()),
            ms(m.cpu_stat),
            ms(m.cpu_sched),
            ms(m.p50),
            ms(m.p99),
            opt(m.collect_wall),
            opt(m.encode_wall),
            mib(m.hwm_kib),
            mib(m.rss_kib),
        );
    }
    let big = &rows[0];
    let cpu = big.cpu_sched.max(big.cpu_stat);
    println!(
        "\ntarget 512 CPUs x default config: CPU per scrape < 10 ms: {} ({:.2} ms); peak RSS < 30 MiB: {} ({:.1} MiB)",
        if cpu < 0.010 { "met" } else { "MISSED" },
        ms(cpu),
        if big.hwm_kib < 30 * 1024 { "met" } else { "MISSED" },
        mib(big.hwm_kib)
    );
    let small = &rows[3];
    println!(
        "target {cpus} CPUs: peak RSS < 15 MiB: {} ({:.1} MiB)",
        if small.hwm_kib < 15 * 1024 {
            "met"
        } else {
            "MISSED"
        },
        mib(small.hwm_kib)
    );
    Ok(())
}
