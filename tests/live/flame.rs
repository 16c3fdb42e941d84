//! The live page's flame graph on this machine (`cpu-clock`: it has no
//! hardware PMU): the profile tests' workload (`hot_spin` under `driver`
//! under `main`, built with frame pointers) spins in a cgroup of its own,
//! which `serve` counts, so it is a row of the page's top list; the page,
//! in headless Chromium over the DevTools protocol, is asked for that
//! row's flame graph, first while another profile runs (the page says the
//! exporter is busy, with its reason), then alone; the drawn graph names
//! `hot_spin`, as wide as its share of the samples. The endpoint's JSON
//! form is checked on the profile that kept the exporter busy.

use crate::common;
use crate::profile::{build, Workload};

use common::browser::{Browser, Tab};
use common::cgroup::CgroupTree;
use common::serial;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The flame graph part of the page: its state, notes and drawn frames.
const FLAME: &str = r##"JSON.stringify({
  hidden: document.getElementById("flame").hidden,
  state: document.querySelector("#flame .state").dataset.state,
  text: document.querySelector("#flame .state").textContent,
  notes: [...document.querySelectorAll("#flame .notes li")].map((l) => l.textContent),
  width: Number((document.querySelector("#flame svg") || { getAttribute: () => 0 }).getAttribute("width")),
  frames: [...document.querySelectorAll("#flame svg g.frame")].map((g) => ({
    name: g.dataset.name, kind: g.dataset.kind,
    label: (g.querySelector("text") || { textContent: "" }).textContent,
    width: Number(g.querySelector("rect").getAttribute("width")) })),
  rows: [...document.querySelectorAll("#cgroup-top tr.cgroup-row")].map((r) => r.dataset.cgroup),
})"##;

/// Clicks the "flame graph" button of the top list's row of `cgroup`;
/// whether the row was there.
async fn pick(tab: &mut Tab, cgroup: &str) -> bool {
    let expr = format!(
        r##"(() => {{
  document.getElementById("flame-seconds").value = "5";
  const tr = [...document.querySelectorAll("#cgroup-top tr.cgroup-row")]
    .find((r) => r.dataset.cgroup.replace(/^\/+/, "") === {cg});
  if (!tr) return "false";
  tr.querySelector("button.profile").click();
  return "true";
}})()"##,
        cg = serde_json::to_string(cgroup.trim_start_matches('/')).unwrap()
    );
    tab.eval(&expr).await == Value::Bool(true)
}

/// Polls the page until its flame graph's state is not `sampling` (nor
/// `idle`) or `limit` passes; the state.
async fn settled(tab: &mut Tab, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let f = tab.eval(FLAME).await;
        let state = f["state"].as_str().unwrap_or("");
        if !matches!(state, "sampling" | "idle" | "") || Instant::now() > deadline {
            return f;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Samples of the frames named `name` in the tree at `n`, those under a
/// `main` frame only (`under_main`: one is above `n`).
fn samples_in(n: &Value, name: &str, under_main: bool) -> u64 {
    if n["name"] == name && under_main {
        return n["samples"].as_u64().unwrap_or(0);
    }
    let under = under_main || n["name"] == "main";
    n["children"]
        .as_array()
        .map_or(0, |c| c.iter().map(|c| samples_in(c, name, under)).sum())
}

#[test]
fn the_live_page_draws_the_flame_graph_of_a_picked_workload() {
    let _s = serial();
    common::require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path());
    let tree = CgroupTree::new("flame", "page");
    tree.mkdir("w");
    let w = Workload::start(&bin, "spin");
    std::fs::write(tree.top.join("w").join("cgroup.procs"), w.pid().to_string())
        .expect("move the workload");
    let top = tree.top.file_name().unwrap().to_string_lossy().into_owned();
    let cg = format!("{top}/w");
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        common::cgroup::with_section(&format!("  paths: [\"{top}/*\"]\n  sets: [software]\n")),
    )
    .unwrap();
    let mut p = common::exporter(&["--config.file", cfg.to_str().unwrap()]);
    p.wait_log("cgroups counted", Duration::from_secs(10));
    let browser = Browser::start();
    let addr = p.addr.clone();
    common::browser::runtime().block_on(async {
        let mut tab = browser.open(&format!("http://{addr}/")).await;
        // The workload's row, once the stream has listed it.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut listed = false;
        while !listed && Instant::now() < deadline {
            let f = tab.eval(FLAME).await;
            listed = f["rows"].as_array().is_some_and(|r| {
                r.iter()
                    .any(|c| c.as_str().map(|c| c.trim_start_matches('/')) == Some(&cg))
            });
            if !listed {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let f = tab.eval(FLAME).await;
        assert!(listed, "no row of {cg} in 30 s: {f:#}\n{}", p.output());
        assert_eq!(f["hidden"], false, "{f:#}");
        // Another client's profile (JSON) holds the exporter's one
        // slot: the page says it is busy, and why. The two race for the
        // slot: when the page wins, it draws and the other retries, so
        // the other keeps asking (every 20 ms while refused, again
        // after each answer) until the page has been seen busy, and
        // returns its last answer, the one taken while the page waited.
        let a = addr.clone();
        let q = format!(
            "/api/v1/profile?format=json&seconds=3&cgroup={}",
            common::urlencode(&cg)
        );
        let seen_busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = seen_busy.clone();
        let other = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let r = common::get(&a, &q);
                let done = seen.load(std::sync::atomic::Ordering::SeqCst);
                if (r.status == 200 && done) || Instant::now() > deadline {
                    return r;
                }
                if r.status == 429 {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(40);
        let busy = loop {
            assert!(pick(&mut tab, &cg).await, "the row left the list");
            let f = settled(&mut tab, Duration::from_secs(10)).await;
            if f["state"] == "busy" || Instant::now() > deadline {
                break f;
            }
        };
        seen_busy.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(busy["state"], "busy", "{busy:#}");
        let text = busy["text"].as_str().unwrap();
        assert!(
            text.contains("one at a time per exporter") && text.contains("Retry-After"),
            "{text}"
        );
        // The JSON form: the workload's samples, nearly all in
        // hot_spin called (through driver) from main.
        let r = other.join().expect("the other profile");
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "content-type" && v == "application/json"),
            "{:?}",
            r.headers
        );
        let j: Value = serde_json::from_str(&r.body).expect("JSON");
        assert_eq!(j["label"], "cgroup");
        let total = j["root"]["samples"].as_u64().unwrap();
        assert!(total > 0, "{j:#}");
        let hot = samples_in(&j["root"], "hot_spin", false);
        assert!(hot * 10 >= total * 9, "hot_spin {hot} of {total}: {j:#}");
        // Now the page's own profile: the drawn graph names hot_spin,
        // about as wide as the graph.
        assert!(pick(&mut tab, &cg).await, "the row left the list");
        let f = settled(&mut tab, Duration::from_secs(40)).await;
        tab.eval(r#"document.getElementById("flame").scrollIntoView(), "null""#)
            .await;
        let shot = tab.screenshot("flame-graph").await;
        eprintln!("screenshot: {}", shot.display());
        assert_eq!(f["state"], "drawn", "screenshot {}: {f:#}", shot.display());
        let frames = f["frames"].as_array().unwrap();
        let hot = frames
            .iter()
            .find(|g| g["name"] == "hot_spin")
            .unwrap_or_else(|| panic!("no hot_spin frame drawn: {f:#}"));
        assert_eq!(hot["label"], "hot_spin", "{f:#}");
        assert_eq!(hot["kind"], "user", "{f:#}");
        let width = f["width"].as_f64().unwrap();
        assert!(
            hot["width"].as_f64().unwrap() >= 0.85 * width,
            "hot_spin is {} of {width} px: {f:#}",
            hot["width"]
        );
        let text = f["text"].as_str().unwrap();
        assert!(text.contains(&cg), "{text}");
        // This machine has no hardware PMU: cycles fell back to
        // cpu-clock, and the page says so.
        if text.contains("samples of cpu-clock") {
            assert!(
                f["notes"].as_array().unwrap().iter().any(|n| n
                    .as_str()
                    .unwrap_or("")
                    .contains("cpu-clock instead of cycles")),
                "{f:#}"
            );
        }
    });
    drop(p);
    drop(w);
}
