//! The live page at `/` in headless Chromium (Debian's `chromium`),
//! driven over the DevTools protocol: it waits for several frames, takes
//! a screenshot (kept under `$PERF_EXPORTER_TEST_ARTIFACTS`, or the
//! target's test directory, and named in every failure), and asserts on
//! the DOM:
//!
//! * `serve --simulate` on the intel-skx fixture: the IPC card agrees with
//!   the IPC of two `/metrics` scrapes (within 2%), and so does the
//!   context-switch rate (the simulated rates are constant);
//! * the live exporter on this PMU-less machine: the IPC card says "not
//!   available on this host" with the reason, context switches/s is a
//!   number in line with `/metrics`, the heatmap has a cell per CPU.

use crate::common;

use common::browser::Browser;
use common::{exporter, parse_exposition, simulated_exporter, Proc};
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the page shows: frames so far, each card, the heatmap.
const DOM: &str = r##"JSON.stringify({
  frames: Number(document.getElementById("status").dataset.frames),
  cards: Object.fromEntries([...document.querySelectorAll(".card[data-derived]")].map((c) => [
    c.dataset.derived,
    { unavailable: c.classList.contains("unavailable"),
      text: c.querySelector(".value").textContent,
      raw: c.querySelector(".value").dataset.raw,
      reason: c.querySelector(".reason").textContent }])),
  heatmap: { metric: document.getElementById("heatmap").dataset.metric,
             choices: [...document.querySelectorAll("#heatmap select.pick option")].map((o) => o.value),
             cells: document.querySelectorAll("#heatmap .cell").length,
             raws: [...document.querySelectorAll("#heatmap .cell")].map((c) => c.dataset.raw),
             colours: [...document.querySelectorAll("#heatmap .cell")].map((c) => c.style.background),
             legend: { equal: document.querySelector("#heatmap .legend").classList.contains("equal"),
                       lo: document.querySelector("#heatmap .legend .lo").textContent,
                       hi: document.querySelector("#heatmap .legend .hi").textContent } },
  notes: [...document.querySelectorAll("#not-available .note")].map((n) => n.textContent),
  cgroups: { hidden: document.getElementById("cgroup-top").hidden,
             summary: document.querySelector("#cgroup-top .summary").textContent,
             columns: [...document.querySelectorAll("#cgroup-top thead th[data-key]")].map((t) => t.dataset.key),
             rows: [...document.querySelectorAll("#cgroup-top tr.cgroup-row")].map((r) => ({
               cgroup: r.dataset.cgroup, depth: Number(r.dataset.depth),
               name: r.cells[0].textContent,
               cpus: r.querySelector('td[data-key="cpus_utilized"]')?.dataset.raw ?? null,
               ipc: r.querySelector('td[data-key="ipc"]')?.textContent ?? null })) },
})"##;

/// Opens the page of `p` and waits for `frames` frames; returns the DOM
/// summary and the screenshot's path.
fn load_page(p: &Proc, name: &str, frames: u64, mut check: impl FnMut(&Value)) {
    let browser = Browser::start();
    common::browser::runtime().block_on(async {
        let mut tab = browser.open(&format!("http://{}/", p.addr)).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        let dom = loop {
            let dom = tab.eval(DOM).await;
            if dom["frames"].as_u64().unwrap_or(0) >= frames {
                break dom;
            }
            if Instant::now() > deadline {
                let shot = tab.screenshot(name).await;
                panic!(
                    "fewer than {frames} frames after 30s; screenshot {}; DOM {dom:#}; output:\n{}",
                    shot.display(),
                    p.output()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let shot = tab.screenshot(name).await;
        eprintln!("screenshot: {}", shot.display());
        let guard = Screenshot(shot, dom.to_string());
        check(&dom);
        std::mem::forget(guard);
    });
}

/// Names the screenshot and the DOM when an assertion fails.
struct Screenshot(PathBuf, String);

impl Drop for Screenshot {
    fn drop(&mut self) {
        eprintln!(
            "screenshot of the failing page: {}\nDOM: {}",
            self.0.display(),
            self.1
        );
    }
}

fn sum(series: &BTreeMap<String, f64>, name: &str) -> f64 {
    series
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{name}{{")) || *k == name)
        .map(|(_, v)| v)
        .sum()
}

/// Rates from two `/metrics` scrapes `secs` apart.
fn scrape_rates(p: &Proc, secs: u64) -> (BTreeMap<String, f64>, BTreeMap<String, f64>, f64) {
    let a = parse_exposition(&p.get("/metrics").body).expect("exposition");
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let b = parse_exposition(&p.get("/metrics").body).expect("exposition");
    (a, b, t.elapsed().as_secs_f64())
}

fn raw(dom: &Value, card: &str) -> f64 {
    dom["cards"][card]["raw"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("card {card} shows no number: {dom:#}"))
}

#[test]
fn simulated_skx_page_agrees_with_metrics() {
    let p = simulated_exporter("intel-skx");
    let (a, b, _) = scrape_rates(&p, 2);
    let d = |m: &str| sum(&b, m) - sum(&a, m);
    let ipc = d("perf_instructions_total") / d("perf_cpu_cycles_total");
    // The window's length by the exporter's own clock (the simulated
    // cpu-clock runs one second per second on each of the 8 CPUs), not
    // by this process's, which a loaded machine delays between a
    // response and the next request.
    let secs = d("perf_cpu_clock_seconds_total") / 8.0;
    let cs = d("perf_context_switches_total") / secs;
    // The heatmap's choices are the frame's per-CPU derived values (the
    // derived table's), not a list of the page's.
    let snap: Value = serde_json::from_str(&p.get("/api/v1/snapshot").body).expect("JSON");
    let offered: Vec<String> = snap["per_cpu"]["formulas"]
        .as_object()
        .expect("formulas")
        .keys()
        .cloned()
        .collect();
    load_page(&p, "simulated-intel-skx", 3, |dom| {
        let shown = raw(dom, "ipc");
        assert!(
            (shown - ipc).abs() <= 0.02 * ipc,
            "IPC card {shown}, /metrics {ipc}"
        );
        let shown = raw(dom, "context_switches_per_second");
        assert!(
            (shown - cs).abs() <= 0.02 * cs,
            "ctx switches card {shown}, /metrics {cs}/s"
        );
        assert!(!dom["cards"]["ipc"]["unavailable"].as_bool().unwrap());
        assert!(raw(dom, "dram_read_bytes_per_second") > 0.0);
        // The heatmap's IPC, computed on the page from the per-CPU counts
        // of the frame: the simulated rates make it 1.5 on each of the
        // fixture's 8 CPUs (to a count in 2e9: the counts are whole).
        assert_eq!(dom["heatmap"]["metric"], "ipc", "{dom:#}");
        let mut choices: Vec<String> = dom["heatmap"]["choices"]
            .as_array()
            .expect("choices")
            .iter()
            .map(|c| c.as_str().expect("a name").to_string())
            .collect();
        // In the frame's order (the server's preference): IPC first.
        assert_eq!(choices.first().map(String::as_str), Some("ipc"), "{dom:#}");
        choices.sort();
        assert_eq!(choices, offered, "{dom:#}");
        assert!(offered.len() >= 2, "{snap:#}");
        let cells: Vec<f64> = dom["heatmap"]["raws"]
            .as_array()
            .expect("cells")
            .iter()
            .map(|r| r.as_str().and_then(|r| r.parse().ok()).expect("a number"))
            .collect();
        assert_eq!(cells.len(), 8, "{dom:#}");
        assert!(cells.iter().all(|v| (v - 1.5).abs() < 1e-6), "{cells:?}");
        // Issue 24 item 15: equal values were all painted red (the top of
        // a 0..max scale); they are one neutral colour, and the legend
        // says they are equal.
        let colours = dom["heatmap"]["colours"].as_array().expect("colours");
        assert!(colours.iter().all(|c| c == &colours[0]), "{colours:?}");
        assert_eq!(colours[0], "rgb(211, 217, 222)", "{dom:#}");
        assert_eq!(dom["heatmap"]["legend"]["equal"], true, "{dom:#}");
        assert_eq!(
            dom["heatmap"]["legend"]["hi"], "every CPU within 0.5%: 1.500 to 1.500",
            "{dom:#}"
        );
        // Every card counts on this fixture: no note.
        assert_eq!(dom["notes"], serde_json::json!([]), "{dom:#}");
    });
}

#[test]
fn live_page_says_why_ipc_is_not_available() {
    common::require_root();
    // A steady stream of context switches that dwarfs the machine's own
    // (other tests, builds) and does not depend on how much CPU is free
    // (chromium takes most of it while the page loads): threads that
    // sleep 0.5 ms in a loop switch out and back in at every sleep,
    // about 15,000 times a second in all, for the whole test.
    struct Load(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Load {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let _load = Load(Default::default());
    for _ in 0..8 {
        let stop = _load.0.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(500));
            }
        });
    }
    let p = exporter(&[]);
    let (a, b, secs) = scrape_rates(&p, 3);
    let cs =
        (sum(&b, "perf_context_switches_total") - sum(&a, "perf_context_switches_total")) / secs;
    load_page(&p, "live", 3, |dom| {
        let ipc = &dom["cards"]["ipc"];
        assert_eq!(ipc["unavailable"], true, "{dom:#}");
        assert_eq!(ipc["text"], "not available on this host");
        let why = ipc["reason"].as_str().unwrap();
        assert!(why.contains("hardware PMU"), "{why}");
        // Issue 24 item 14: the cause the cards share is one note naming
        // them, not the paragraph on each card.
        assert_eq!(
            why,
            "needs a hardware PMU, which this host does not have (see below the cards)"
        );
        // The top-down shares are among them (this VM is an Emerald
        // Rapids, GenuineIntel-6-CF, whose `cpu` PMU has the perf-metrics
        // events): a chain that names `cpu_core/...` before `core/...`
        // says it needs a hardware PMU, not that it is another platform's.
        // Zen 4's own shares (`smt_contention`, `retiring_fastpath`,
        // `retiring_microcode`, which read AMD-only counts) are not: the
        // CPU guards are judged against /proc/cpuinfo's identity when there
        // is no core PMU, so their counts have no encoding for this CPU and
        // their cards are another platform's (left out). Zen 4's
        // `total_dispatch_slots` reads the slots every platform counts, so
        // it stays.
        let note = dom["notes"][0].as_str().expect("a note");
        assert!(
            note.starts_with("22 cards need a hardware PMU, which this host does not have")
                && note.contains(": ipc, l1d miss ratio, l1i miss ratio, llc miss ratio, cache miss ratio, \
                    branch miss ratio, l1d generic read mpki, llc generic read mpki, l1i read mpki, \
                    total dispatch slots, frontend bound, bad speculation, backend bound, retiring, \
                    frontend bound latency, frontend bound bandwidth, bad speculation mispredicts, \
                    bad speculation pipeline restarts, backend bound memory, backend bound cpu, \
                    retiring heavy operations, retiring light operations; what to do: "),
            "{note}"
        );
        // The legend names the range (both ends, or that they are equal).
        assert!(
            !dom["heatmap"]["legend"]["hi"].as_str().unwrap().is_empty(),
            "{dom:#}"
        );
        // The sleepers' rate dominates, but the card shows one second and
        // the scrapes span three: in line with /metrics, not equal.
        let shown = raw(dom, "context_switches_per_second");
        assert!(
            shown > cs / 3.0 && shown < cs * 3.0,
            "ctx switches card {shown}/s, /metrics {cs}/s"
        );
        assert_eq!(
            dom["heatmap"]["cells"].as_u64().unwrap() as usize,
            common::online_cpus().len(),
            "{dom:#}"
        );
    });
}

/// The per-workload top list on the page, from the simulated PMU with the
/// Kubernetes cgroup fixture (pods and containers counted): a row per pod,
/// busiest first, its containers on indented rows right under it.
#[test]
fn the_page_lists_the_busiest_pods_and_their_containers() {
    let (p, _dir) = common::kubernetes_exporter();
    let snap: Value = serde_json::from_str(&p.get("/api/v1/snapshot").body).expect("JSON");
    let counted = snap["per_cgroup"]["counted"].as_u64().expect("a top list");
    load_page(&p, "kubernetes-top-list", 3, |dom| {
        let c = &dom["cgroups"];
        assert_eq!(c["hidden"], false, "{dom:#}");
        assert!(
            c["summary"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{counted} cgroups counted")),
            "{dom:#}"
        );
        let rows = c["rows"].as_array().unwrap();
        let pods: Vec<&Value> = rows.iter().filter(|r| r["depth"] == 0).collect();
        assert!(!pods.is_empty() && pods.len() <= 10, "{dom:#}");
        assert!(
            rows.iter().any(|r| r["depth"] == 1),
            "no container row: {dom:#}"
        );
        // The columns are the frame's: the derived table's entries whose
        // inputs are counted per cgroup (no cycles here: no IPC).
        let columns: Vec<&str> = snap["per_cgroup"]["derived"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(c["columns"], serde_json::json!(columns), "{dom:#}");
        assert!(columns.contains(&"cpus_utilized"), "{columns:?}");
        assert!(!columns.contains(&"ipc"), "{columns:?}");
        let share = |r: &Value| r["cpus"].as_str().unwrap().parse::<f64>().unwrap();
        assert!(
            pods.windows(2).all(|w| share(w[0]) >= share(w[1])),
            "{dom:#}"
        );
        let mut pod = "";
        for r in rows {
            let cg = r["cgroup"].as_str().unwrap();
            if r["depth"] == 0 {
                pod = cg;
                assert!(r["name"].as_str().unwrap().starts_with("pod "), "{r}");
            } else {
                assert!(cg.starts_with(&format!("{pod}/")), "{r} not under {pod}");
                assert!(r["name"].as_str().unwrap().starts_with("container "), "{r}");
            }
            // No cycles here: IPC is not counted per cgroup, so no cell.
            assert_eq!(r["ipc"], Value::Null, "{r}");
        }
    });
}

/// Issue 24 item 15: the page said "connecting…" until the WebSocket
/// delivered. It paints from `/api/v1/snapshot` first: with the only
/// stream (`--web.max-streams 1`) held by another client, the page gets
/// no frame at all, and still shows the counts.
#[test]
fn the_page_paints_from_the_snapshot_without_a_stream() {
    let f = common::fixture("intel-skx");
    let mut args = vec![
        "--simulate".to_string(),
        "--path.sysfs".into(),
        f.to_str().expect("utf-8").into(),
        "--web.max-streams".into(),
        "1".into(),
    ];
    args.extend(common::fixture_procfs_args("intel-skx"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = exporter(&args);
    let browser = Browser::start();
    common::browser::runtime().block_on(async {
        let (mut held, _) =
            tokio_tungstenite::connect_async(format!("ws://{}/api/v1/stream", p.addr))
                .await
                .expect("the one stream");
        // The held stream delivers: the limit is taken.
        held.next().await.expect("a frame").expect("a frame");
        let mut tab = browser.open(&format!("http://{}/", p.addr)).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        let dom = loop {
            let dom = tab.eval(DOM).await;
            let painted = dom["cards"]["ipc"]["raw"]
                .as_str()
                .is_some_and(|r| !r.is_empty());
            if painted {
                break dom;
            }
            if Instant::now() > deadline {
                let shot = tab.screenshot("snapshot-first").await;
                panic!(
                    "the page painted nothing in 30s; screenshot {}; DOM {dom:#}",
                    shot.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(dom["frames"], 0, "no stream frame: {dom:#}");
        let ipc: f64 = dom["cards"]["ipc"]["raw"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .expect("IPC");
        assert!((ipc - 1.5).abs() < 0.01, "{dom:#}");
        assert_eq!(dom["heatmap"]["metric"], "ipc", "{dom:#}");
        drop(held);
    });
}

/// The flame graph's honest states: the simulated PMU's kernel gives no
/// samples, and after a pod's row is picked the page says there were
/// none, drawing nothing.
#[test]
fn the_flame_graph_says_there_were_no_samples() {
    let (p, _dir) = common::kubernetes_exporter();
    let browser = Browser::start();
    common::browser::runtime().block_on(async {
        let mut tab = browser.open(&format!("http://{}/", p.addr)).await;
        const CLICK: &str = r##"(() => {
  document.getElementById("flame-seconds").value = "5";
  const b = document.querySelector("#cgroup-top tr.cgroup-row button.profile");
  if (!b) return "false";
  b.click();
  return "true";
})()"##;
        const STATE: &str = r##"JSON.stringify({
  state: document.querySelector("#flame .state").dataset.state,
  text: document.querySelector("#flame .state").textContent,
  frames: document.querySelectorAll("#flame svg g.frame").length })"##;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut clicked = false;
        let f = loop {
            clicked = clicked || tab.eval(CLICK).await == Value::Bool(true);
            let f = tab.eval(STATE).await;
            if clicked && f["state"] != "sampling" {
                break f;
            }
            if Instant::now() > deadline {
                let shot = tab.screenshot("flame-no-profile").await;
                panic!("no answer in 30s; screenshot {}", shot.display());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(f["state"], "empty", "{f:#}");
        let text = f["text"].as_str().unwrap();
        assert!(
            text.starts_with("no samples of pod ") && text.contains(" in the 5.0 s to "),
            "{text}"
        );
        assert_eq!(f["frames"], 0, "{f:#}");
    });
}

/// Opens the page of `p`, waits for `frames` frames, and returns the tab
/// (the caller acts on it) with the DOM summary; a timeout names the
/// screenshot.
async fn open_after(
    browser: &Browser,
    p: &Proc,
    name: &str,
    frames: u64,
) -> (common::browser::Tab, Value) {
    let mut tab = browser.open(&format!("http://{}/", p.addr)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let dom = tab.eval(DOM).await;
        if dom["frames"].as_u64().unwrap_or(0) >= frames {
            return (tab, dom);
        }
        if Instant::now() > deadline {
            let shot = tab.screenshot(name).await;
            panic!(
                "fewer than {frames} frames after 30s; screenshot {}; DOM {dom:#}; output:\n{}",
                shot.display(),
                p.output()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The cells of the heatmap, as numbers.
fn cells(dom: &Value) -> Vec<f64> {
    dom["heatmap"]["raws"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|r| {
            r.as_str()
                .and_then(|r| r.parse().ok())
                .unwrap_or_else(|| panic!("a cell without a number: {dom:#}"))
        })
        .collect()
}

/// Issue 30: each entry of the heatmap's drop-down, picked, shows that
/// metric's values on every CPU: the simulated intel-skx counts at
/// constant rates (`src/perf/sim/rates.rs`: instructions 3e9/s and
/// cycles 2e9/s, MPERF and TSC 2.5e9/s each, context switches 2000/s,
/// tracepoints such as `irq:irq_handler_entry` and
/// `irq:softirq_entry` 500/s, per CPU), so IPC is 1.5, the busy share 1
/// and the rates those numbers. The choices are the default table's
/// `per_cpu: true` entries, in its order: never `cpus_utilized`, a sum
/// over CPUs.
#[test]
fn each_heatmap_choice_shows_its_values() {
    let p = simulated_exporter("intel-skx");
    let browser = Browser::start();
    common::browser::runtime().block_on(async {
        let (mut tab, dom) = open_after(&browser, &p, "heatmap-choices", 3).await;
        let choices: Vec<String> = dom["heatmap"]["choices"]
            .as_array()
            .expect("choices")
            .iter()
            .map(|c| c.as_str().expect("a name").to_string())
            .collect();
        // (value, relative tolerance): ratios of whole counts are exact
        // to a count in 1e9; a rate is a count over the frame's measured
        // interval, which the simulated counters' enabled time matches to
        // the scheduling of two reads.
        let want: &[(&str, f64, f64)] = &[
            ("ipc", 1.5, 1e-6),
            ("busy_ratio", 1.0, 1e-6),
            ("context_switches_per_second", 2000.0, 0.02),
            ("interrupts_per_second", 500.0, 0.02),
            ("softirqs_per_second", 500.0, 0.02),
        ];
        let names: Vec<&str> = want.iter().map(|w| w.0).collect();
        assert_eq!(choices, names, "{dom:#}");
        for (key, value, tolerance) in want {
            tab.eval(&format!(
                r##"(() => {{ const s = document.querySelector("#heatmap select.pick");
                   s.value = {key:?}; s.dispatchEvent(new Event("change")); return s.value; }})()"##
            ))
            .await;
            let dom = tab.eval(DOM).await;
            assert_eq!(dom["heatmap"]["metric"], *key, "{dom:#}");
            let cells = cells(&dom);
            assert_eq!(cells.len(), 8, "{key}: {dom:#}");
            for v in &cells {
                assert!(
                    (v - value).abs() <= tolerance * value,
                    "{key}: a CPU shows {v}, the simulated PMU counts {value}: {cells:?}"
                );
            }
        }
        // The pick stays across frames.
        let frames = tab.eval(DOM).await["frames"].as_u64().unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(10);
        let dom = loop {
            let dom = tab.eval(DOM).await;
            if dom["frames"].as_u64().unwrap_or(0) > frames || Instant::now() > deadline {
                break dom;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(dom["frames"].as_u64().unwrap_or(0) > frames, "{dom:#}");
        assert_eq!(dom["heatmap"]["metric"], "softirqs_per_second", "{dom:#}");
        // `cpus_utilized` is a card (node-wide: the 8 CPUs counted), not
        // a per-CPU value.
        let cpus = raw(&dom, "cpus_utilized");
        assert!((cpus - 8.0).abs() < 0.1, "{dom:#}");
    });
}

/// Issue 30: a config's own derived entry gets its card, with its help,
/// its unit and its value, and the page lists no card of the default
/// table that config does not have (`tests/configs/five_software.yaml`
/// plus a `derived:` section). Context switches count 2000/s and page
/// faults 1000/s per CPU on the simulated PMU: 2 switches per fault.
#[test]
fn a_configs_own_derived_entry_gets_its_card() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("five.yaml");
    let yaml = format!(
        "{}derived:\n  - name: switches_per_fault\n    help: Context switches per page fault.\n    unit: switches per fault\n    expr: perf_context_switches_total / perf_page_faults_total\n  - name: context_switches_per_second\n    unit: per second\n    per_cpu: true\n    expr: perf_context_switches_total / duration_time\n",
        include_str!("../configs/five_software.yaml")
    );
    std::fs::write(&cfg, yaml).expect("config");
    let p = common::simulated_exporter_with(
        "intel-skx",
        &[
            "--config.file".to_string(),
            cfg.to_str().expect("utf-8").to_string(),
        ],
    );
    let page = p.get("/").body;
    assert!(
        page.contains("<h2>switches per fault</h2><p class=\"hint\">Context switches per page fault.</p><p class=\"hint unit\">unit: switches per fault</p>"),
        "{page}"
    );
    load_page(&p, "own-derived-card", 3, |dom| {
        let cards: Vec<&String> = dom["cards"].as_object().expect("cards").keys().collect();
        assert_eq!(
            cards,
            ["context_switches_per_second", "switches_per_fault"],
            "{dom:#}"
        );
        let v = raw(dom, "switches_per_fault");
        // Two counters read one after the other: 2 to a part in 100.
        assert!((v - 2.0).abs() < 0.02, "{dom:#}");
        // Shown as its unit says: a plain number.
        assert_eq!(
            dom["cards"]["switches_per_fault"]["text"],
            format!("{v:.3}"),
            "{dom:#}"
        );
        assert_eq!(
            dom["heatmap"]["choices"],
            serde_json::json!(["context_switches_per_second"]),
            "{dom:#}"
        );
    });
}
