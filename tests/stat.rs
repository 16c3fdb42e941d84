//! `perf-exporter stat`, the real binary: the output's exact shape (on the
//! simulated intel-skx, whose rates are constant), `--json`, Ctrl-C through
//! tmux (the summary, exit 0), and agreement with `perf stat -a -I` on the
//! same workload (the live kernel's software events).

mod common;

use common::{fixture, EXPORTER};
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn stat(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(EXPORTER)
        .arg("--log.level=warn")
        .args(args)
        .output()
        .expect("run perf-exporter");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `stat` on the simulated intel-skx.
fn sim_stat(args: &[&str]) -> (bool, String, String) {
    let f = fixture("intel-skx").display().to_string();
    let mut all = vec!["--simulate", "--path.sysfs", &f, "stat"];
    all.extend_from_slice(args);
    stat(&all)
}

/// Numbers replaced by `<n>`, to compare the shape exactly (a number's
/// trailing dot goes with it).
fn shape(text: &str) -> String {
    let mut out = String::new();
    let mut in_num = false;
    for c in text.chars() {
        let numeric = c.is_ascii_digit() || (in_num && c == '.');
        if numeric {
            if !in_num {
                out.push_str("<n>");
            }
        } else {
            out.push(c);
        }
        in_num = numeric;
    }
    out
}

#[test]
fn simulated_output_has_the_exact_shape_and_values() {
    let (ok, out, err) = sim_stat(&[
        "-I",
        "500ms",
        "-d",
        "1s",
        "-e",
        "perf_context_switches_total,ipc,l1i_miss_ratio",
    ]);
    assert!(ok, "{err}");
    let what = ": not supported on this host (errno <n>): no PMU claims this encoding: open L<n>-icache-loads on PMU cpu, CPU <n> What to do: nothing on this host: it is expected on other hardware or kernels (`perf-exporter list` shows what this host offers; add an alternative encoding to count it here)";
    let interval = "\
       <n>                  <n>  perf_context_switches_total
       <n>            <n>  perf_cpu_cycles_total
       <n>           <n>  perf_instructions_total
       <n>              <n>  perf_l<n>i_read_misses_total
       <n>             <n>  context_switches_per_second
       <n>                 <n>  ipc
       <n>       <not available>  l<n>i_miss_ratio
       <n>       <not available>  perf_l<n>i_reads_total
";
    let expected = format!(
        "#          time                counts  name\n{interval}{interval}
 Summary over <n> s:

                 <n>  perf_context_switches_total
           <n>  perf_cpu_cycles_total
           <n>  perf_instructions_total
              <n>  perf_l<n>i_read_misses_total
             <n>  context_switches_per_second
                 <n>  ipc
       <not available>  l<n>i_miss_ratio  # needs perf_l<n>i_reads_total: L<n>-icache-loads{what}
       <not available>  perf_l<n>i_reads_total  # L<n>-icache-loads{what}
"
    );
    // Right-aligned numbers: their width varies, so compare with the
    // padding squeezed, and the exact layout by the column the names
    // start in.
    let squeeze = |t: &str| {
        t.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(squeeze(&shape(&out)), squeeze(&expected), "{out}");
    // The layout: interval lines are 15 columns of time and 22 of value,
    // right-aligned, the summary's 22 of value; then two spaces and the
    // name.
    let summary_at = out.find(" Summary over ").unwrap();
    for (at, l) in out.lines().scan(0, |pos, l| {
        let at = *pos;
        *pos += l.len() + 1;
        Some((at, l))
    }) {
        if l.is_empty() || l.starts_with('#') || l.starts_with(" Summary") {
            continue;
        }
        let end = if at < summary_at { 37 } else { 22 };
        let b = l.as_bytes();
        assert!(
            b[end - 1] != b' ' && &b[end..end + 2] == b"  " && b[end + 2] != b' ',
            "column {end}: {l:?}\n{out}"
        );
    }
    // The simulated rates: IPC 1.5, 2000 context switches/s on each of 8 CPUs.
    let ipc: Vec<f64> = values(&out, "ipc");
    assert_eq!(ipc.len(), 3, "{out}");
    assert!(ipc.iter().all(|v| (v - 1.5).abs() < 1e-3), "{out}");
    for cs in values(&out, "context_switches_per_second") {
        assert!((cs - 16000.0).abs() < 0.01 * 16000.0, "{out}");
    }
    let times: Vec<f64> = out
        .lines()
        .filter(|l| l.ends_with(" ipc"))
        .take(2)
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert!(
        (times[0] - 0.5).abs() < 0.1 && (times[1] - 1.0).abs() < 0.1,
        "{out}"
    );
}

/// The numbers of `name`'s lines (time first, then the value).
fn values(out: &str, name: &str) -> Vec<f64> {
    out.lines()
        .filter(|l| l.split_whitespace().nth_back(0) == Some(name))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w[w.len() - 2].parse().ok()
        })
        .collect()
}

#[test]
fn json_is_one_frame_per_interval_then_the_summary() {
    let (ok, out, err) = sim_stat(&["-I", "300ms", "-d", "900ms", "--json"]);
    assert!(ok, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 4, "{out}");
    for f in &lines[..3] {
        for k in [
            "interval_seconds",
            "counts",
            "derived",
            "unavailable",
            "per_cpu",
            "per_socket",
        ] {
            assert!(f.get(k).is_some(), "{k} missing: {f}");
        }
        assert!(
            (f["derived"]["ipc"].as_f64().unwrap() - 1.5).abs() < 1e-3,
            "{f}"
        );
        assert!(f["counts"]
            .get("perf_group_enabled_seconds_total")
            .is_none());
    }
    let s = &lines[3]["summary"];
    let secs = s["interval_seconds"].as_f64().unwrap();
    assert!((0.85..1.2).contains(&secs), "{s}");
}

#[test]
fn unknown_metrics_are_refused_with_what_exists() {
    let (ok, _, err) = sim_stat(&["-e", "ipx"]);
    assert!(!ok);
    assert!(
        err.contains("-e ipx: no such metric in the config or derived value; closest: ipc"),
        "{err}"
    );
    let (ok, _, err) = stat(&["stat", "-I", "5ms"]);
    assert!(!ok);
    assert!(err.contains("shorter than 10ms"), "{err}");
}

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `tmux capture-pane` until `f` holds.
fn wait_pane(session: &str, what: &str, limit: Duration, f: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let pane = tmux(&["capture-pane", "-p", "-J", "-S", "-200", "-t", session]);
        if f(&pane) {
            return pane;
        }
        assert!(Instant::now() < deadline, "{what}: pane:\n{pane}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}

#[test]
fn ctrl_c_prints_the_summary_and_exits_0() {
    let tmux_ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(tmux_ok, "this test needs `tmux` on PATH");
    let f = fixture("intel-skx").display().to_string();
    let session = Session(format!("live-stat-{}", std::process::id()));
    let cmd = format!(
        "{EXPORTER} --log.level=warn --simulate --path.sysfs {f} stat -I 300ms -e ipc; echo EXIT=$?; sleep 60"
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session.0,
        "-x",
        "200",
        "-y",
        "50",
        &cmd,
    ]);
    wait_pane(&session.0, "two intervals", Duration::from_secs(20), |p| {
        p.matches(" ipc").count() >= 2
    });
    tmux(&["send-keys", "-t", &session.0, "C-c"]);
    let pane = wait_pane(
        &session.0,
        "exit after Ctrl-C",
        Duration::from_secs(10),
        |p| p.contains("EXIT="),
    );
    assert!(pane.contains("EXIT=0"), "{pane}");
    let summary = pane
        .split(" Summary over ")
        .nth(1)
        .unwrap_or_else(|| panic!("{pane}"));
    assert!(summary.contains("1.500  ipc"), "{pane}");
}

/// `perf stat -a -I 1000 -x,` lines: (cpu-clock msec, context switches)
/// per interval.
fn perf_intervals(text: &str) -> Vec<(f64, f64)> {
    let mut v = Vec::new();
    let mut clock = None;
    for l in text.lines() {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() < 4 {
            continue;
        }
        match f[3] {
            "cpu-clock" => clock = f[1].parse::<f64>().ok(),
            "context-switches" => {
                if let (Some(c), Ok(n)) = (clock.take(), f[1].parse::<f64>()) {
                    v.push((c / 1000.0, n));
                }
            }
            _ => {}
        }
    }
    v
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

#[test]
fn agrees_with_perf_stat_on_the_same_workload() {
    common::require_root();
    common::require_tool("perf");
    // A steady stream of context switches: two tasks ping-ponging a pipe.
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _load = Kill(spawn(Command::new("perf").args([
        "bench",
        "sched",
        "pipe",
        "-l",
        "100000000",
    ])));
    std::thread::sleep(Duration::from_millis(1500));
    let perf = spawn(Command::new("perf").args([
        "stat",
        "-a",
        "-I",
        "1000",
        "-x,",
        "-e",
        "cpu-clock,context-switches",
        "--",
        "sleep",
        "6",
    ]));
    let ours = spawn(Command::new(EXPORTER).args([
        "--log.level=warn",
        "stat",
        "-I",
        "1000ms",
        "-d",
        "6s",
        "--json",
        "-e",
        "perf_cpu_clock_seconds_total,perf_context_switches_total",
    ]));
    let perf = perf.wait_with_output().expect("perf stat");
    let ours = ours.wait_with_output().expect("perf-exporter stat");
    assert!(
        ours.status.success(),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    let p = perf_intervals(&String::from_utf8_lossy(&perf.stderr));
    let o: Vec<(f64, f64, f64)> = String::from_utf8_lossy(&ours.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter(|f| f.get("summary").is_none())
        .map(|f| {
            (
                f["counts"]["perf_cpu_clock_seconds_total"]
                    .as_f64()
                    .unwrap(),
                f["counts"]["perf_context_switches_total"].as_f64().unwrap(),
                f["interval_seconds"].as_f64().unwrap(),
            )
        })
        .collect();
    assert!(p.len() >= 5 && o.len() >= 5, "perf {p:?}\nours {o:?}");
    // The same windows (both started together, 1s apart): cpu-clock is
    // wall time times CPUs, the context switches the workload's; both
    // compared per second of CPU time, so a late tick does not count.
    // The two tools' windows start a few milliseconds apart and the
    // workload's rate moves by tens of percent between seconds on this
    // shared machine: measured differences are 0.1-1.5%, so 3% is asserted.
    let n = common::online_cpus().len() as f64;
    for (i, ((pc, ps), (oc, os, secs))) in p.iter().zip(&o).take(5).enumerate().skip(1) {
        assert!(
            (pc / n - 1.0).abs() < 0.05,
            "perf interval {i}: {pc}s of cpu-clock"
        );
        assert!(
            (oc / n / secs - 1.0).abs() < 0.01,
            "our interval {i}: {oc}s of cpu-clock in {secs}s"
        );
        let (pr, or) = (ps / pc, os / oc);
        assert!(
            (pr - or).abs() <= 0.03 * pr,
            "interval {i}: perf {pr:.0}/cpu-s, ours {or:.0}/cpu-s\nperf {p:?}\nours {o:?}"
        );
    }
}

#[test]
fn per_cpu_lines_line_up() {
    let (ok, out, err) = sim_stat(&[
        "-I",
        "300ms",
        "-d",
        "300ms",
        "--per-cpu",
        "-e",
        "context_switches_per_second",
    ]);
    assert!(ok, "{err}");
    let block: Vec<&str> = out.lines().take_while(|l| !l.is_empty()).collect();
    // The header, 2 lines for each of the 8 CPUs, the all-CPU rate.
    assert_eq!(block.len(), 1 + 8 * 2 + 1, "{out}");
    for (i, l) in block[1..17].iter().enumerate() {
        let cpu = format!("CPU{}", i / 2);
        assert_eq!(l.split_whitespace().nth(1), Some(cpu.as_str()), "{out}");
    }
    // Values end, and names start, in one column (the header's too).
    let ends: Vec<usize> = block
        .iter()
        .map(|l| l.rfind("  ").expect("two spaces before the name"))
        .collect();
    assert!(ends.iter().all(|e| *e == ends[0]), "{ends:?}\n{out}");
    for l in &block[1..17] {
        let rate: f64 = l.split_whitespace().nth(2).unwrap().parse().unwrap();
        if l.ends_with("context_switches_per_second") {
            assert!((rate - 2000.0).abs() < 20.0, "{l}");
        }
    }
}
