//! Profiles with call stacks on this machine (`cpu-clock`: it has no
//! hardware PMU): a workload built here with frame pointers and a known
//! hot function, in a cgroup of its own, profiled through serve's
//! `GET /api/v1/profile` and `perf-exporter record`, and read by an
//! independent consumer, `go tool pprof` (Debian's `golang-go`, which
//! scripts/test.sh installs: a missing `go` fails these tests).

use crate::common;

use common::cgroup::CgroupTree;
use common::{serial, EXPORTER};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The workload, compiled into `dir` (`strip`ped too when asked).
pub(crate) fn build(dir: &Path) -> PathBuf {
    let src = common::repo_root().join("tests/fixtures/profile/hot.c");
    let out = dir.join("hot");
    let st = Command::new("cc")
        .args([
            "-O1",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("cc (the system C compiler) is needed to build the workload");
    assert!(st.success(), "cc failed on {}", src.display());
    out
}

/// The serial lock (these tests sample the whole machine), root, a
/// temporary directory and the workload built in it.
fn setup() -> (common::Serial, tempfile::TempDir, PathBuf) {
    let s = serial();
    common::require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path());
    (s, dir, bin)
}

/// Runs the workload (`spin`, `sys` or `brief`), killed on drop.
pub(crate) struct Workload(Child);

impl Workload {
    pub(crate) fn start(bin: &Path, mode: &str) -> Workload {
        Workload(
            Command::new(bin)
                .arg(mode)
                .stdin(Stdio::null())
                .spawn()
                .expect("start the workload"),
        )
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `go tool pprof ARGS FILE`'s output; panics (never skips) without `go`.
fn pprof(args: &[&str], file: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(args)
        .arg(file)
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap_or_else(|e| {
            panic!("`go` is needed to read profiles (apt-get install golang-go; scripts/test.sh installs it): {e}")
        });
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The flat share (percent) of each function in `go tool pprof -top`.
fn flat_shares(top: &str) -> Vec<(String, f64)> {
    top.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 {
                return None;
            }
            let share = f[1].strip_suffix('%')?.parse::<f64>().ok()?;
            Some((f[5..].join(" "), share))
        })
        .collect()
}

/// GETs `path` from the exporter at `addr` into `file` with curl;
/// returns the status and the headers.
fn fetch(addr: &str, path: &str, file: &Path) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-D", "-", "-o"])
        .arg(file)
        .args(["-w", "%{http_code}"])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = text
        .get(text.len().saturating_sub(3)..)
        .unwrap_or("")
        .parse()
        .unwrap_or(0);
    (code, text)
}

fn record(args: &[&str]) -> (bool, String) {
    let out = Command::new(EXPORTER)
        .arg("record")
        .args(args)
        .output()
        .expect("run perf-exporter record");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_endpoint_attributes_the_hot_function_under_its_cgroup_and_pod() {
    let (_s, dir, bin) = setup();
    let tree = CgroupTree::new("profile", "ep");
    let pod = "pod3f1c2a4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b";
    tree.mkdir(pod);
    let w = Workload::start(&bin, "spin");
    std::fs::write(tree.top.join(pod).join("cgroup.procs"), w.pid().to_string())
        .expect("move the workload");
    let p = common::exporter(&[]);
    let cg = format!("/{}/{pod}", tree.top.file_name().unwrap().to_string_lossy());
    // By cgroup.
    let f = dir.path().join("cg.pb.gz");
    let q = format!(
        "/api/v1/profile?seconds=3&event=cpu-clock&by=cgroup&cgroup={}",
        common::urlencode(&cg)
    );
    let (code, head) = fetch(&p.addr, &q, &f);
    assert_eq!(code, 200, "{head}");
    let top = pprof(&["-top"], &f);
    let shares = flat_shares(&top);
    let hot = shares
        .iter()
        .find(|(n, _)| n == "hot_spin")
        .map_or(0.0, |s| s.1);
    assert!(hot >= 90.0, "hot_spin has {hot}% of the samples:\n{top}");
    assert!(top.contains("Type: cpu-clock"), "{top}");
    let tags = pprof(&["-tags"], &f);
    assert!(
        tags.contains(&format!("(  100%): {cg}")),
        "every sample under cgroup {cg}:\n{tags}"
    );
    // By pod (the cgroup's pod uid).
    let uid = pod.trim_start_matches("pod");
    let f = dir.path().join("pod.pb.gz");
    let (code, head) = fetch(
        &p.addr,
        &format!("/api/v1/profile?seconds=2&event=cpu-clock&pod={uid}"),
        &f,
    );
    assert_eq!(code, 200, "{head}");
    let top = pprof(&["-top"], &f);
    let hot = flat_shares(&top)
        .iter()
        .find(|(n, _)| n == "hot_spin")
        .map_or(0.0, |s| s.1);
    assert!(
        hot >= 90.0,
        "hot_spin has {hot}% of the pod's samples:\n{top}"
    );
    let tags = pprof(&["-tags"], &f);
    assert!(
        tags.contains("pod_uid:") && tags.contains(&format!("(  100%): {uid}")),
        "{tags}"
    );
    // A bad query says why.
    let (code, _) = fetch(
        &p.addr,
        "/api/v1/profile?seconds=999",
        &dir.path().join("x"),
    );
    assert_eq!(code, 400);
    drop(p);
    drop(w);
}

#[test]
fn record_resolves_kernel_frames_from_kallsyms() {
    let (_s, dir, bin) = setup();
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let want = ["entry_SYSCALL_64", "do_syscall_64"];
    assert!(
        want.iter()
            .any(|w| kallsyms.lines().any(|l| l.ends_with(&format!(" {w}")))),
        "this kernel names its syscall entry otherwise"
    );
    let w = Workload::start(&bin, "sys");
    let f = dir.path().join("sys.pb.gz");
    let (ok, err) = record(&[
        "-d",
        "2s",
        "-e",
        "cpu-clock",
        "--pid",
        &w.pid().to_string(),
        "-o",
        f.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let top = pprof(&["-top"], &f);
    assert!(
        want.iter().any(|w| top.contains(w)),
        "no kernel entry frame:\n{top}"
    );
    assert!(top.contains("syscalls"), "the user frame under it:\n{top}");
    drop(w);
}

#[test]
fn a_stripped_binary_keeps_build_id_and_offset_frames() {
    let (_s, dir, bin) = setup();
    let stripped = dir.path().join("hot-stripped");
    let st = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(&bin)
        .status()
        .expect("strip");
    assert!(st.success());
    // hot_spin's range in the unstripped file (for this non-relocated
    // build, the executable segment's file offsets are its addresses).
    let nm = Command::new("nm").arg("-S").arg(&bin).output().expect("nm");
    let nm = String::from_utf8_lossy(&nm.stdout);
    let (start, size) = nm
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == "hot_spin").then(|| {
                (
                    u64::from_str_radix(f[0], 16).unwrap(),
                    u64::from_str_radix(f[1], 16).unwrap(),
                )
            })
        })
        .expect("hot_spin in nm");
    let readelf = Command::new("readelf")
        .arg("-n")
        .arg(&stripped)
        .output()
        .expect("readelf");
    let notes = String::from_utf8_lossy(&readelf.stdout);
    let build_id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a GNU build-id note")
        .to_string();
    let w = Workload::start(&stripped, "spin");
    let f = dir.path().join("stripped.pb.gz");
    let (ok, err) = record(&[
        "-d",
        "2s",
        "-e",
        "cpu-clock",
        "--pid",
        &w.pid().to_string(),
        "-o",
        f.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    drop(w);
    let raw = pprof(&["-raw"], &f);
    assert!(
        raw.lines()
            .any(|l| l.contains("hot-stripped") && l.contains(&build_id)),
        "the mapping keeps the build-id {build_id}:\n{raw}"
    );
    let top = pprof(&["-top", "-addresses"], &f);
    let first = top
        .lines()
        .find(|l| l.contains("[hot-stripped]"))
        .unwrap_or_else(|| panic!("no frame of the stripped binary:\n{top}"));
    let f: Vec<&str> = first.split_whitespace().collect();
    let addr = u64::from_str_radix(f[5], 16).unwrap();
    assert!(
        (start..start + size).contains(&addr),
        "the hottest offset {addr:#x} is in hot_spin [{start:#x}, +{size:#x}):\n{top}"
    );
    assert!(
        !top.contains("hot_spin"),
        "a stripped binary has no symbol:\n{top}"
    );
}

#[test]
fn a_process_that_exits_mid_profile_keeps_its_symbols() {
    let (_s, dir, bin) = setup();
    let f = dir.path().join("brief.pb.gz");
    let rec = Command::new(EXPORTER)
        .args([
            "record",
            "-d",
            "3s",
            "-e",
            "cpu-clock",
            "--by",
            "process",
            "-o",
        ])
        .arg(&f)
        .stderr(Stdio::piped())
        .spawn()
        .expect("run perf-exporter record");
    // The workload spins about a second and exits, well before the
    // profile ends.
    let mut w = Workload::start(&bin, "brief");
    let st = w.0.wait().expect("wait for the workload");
    assert!(st.success());
    let out = rec.wait_with_output().expect("record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Shares of the whole machine's profile: hot_spin's of the process's.
    let top = pprof(&["-top", "-tagfocus=process=hot"], &f);
    let shares = flat_shares(&top);
    let all: f64 = shares.iter().map(|s| s.1).sum();
    let hot = shares
        .iter()
        .find(|(n, _)| n == "hot_spin")
        .map_or(0.0, |s| s.1);
    assert!(
        all > 0.0 && hot / all >= 0.9,
        "the exited process's samples are symbolized:\n{top}"
    );
}

#[test]
fn top_call_graph_in_tmux_shows_the_hot_stack() {
    use common::tmux::{wait_pane, Session};
    let (_s, _dir, bin) = setup();
    let w = Workload::start(&bin, "spin");
    let cmd = format!(
        "{EXPORTER} --log.level=warn top --call-graph -e cpu-clock -I 500ms -n 5 --by process; echo EXIT=$?; sleep 60"
    );
    let session = Session::start(&format!("profile-top-{}", std::process::id()), &cmd);
    // hot_spin, called (through driver) from main, all symbolized.
    wait_pane(
        &session.0,
        "the hottest stacks name hot_spin",
        std::time::Duration::from_secs(30),
        |p| {
            p.contains("hottest stacks")
                && p.lines()
                    .any(|l| l.contains("hot: hot_spin <- ") && l.contains(" <- main"))
        },
    );
    session.ctrl_c_exits_0();
    drop(w);
}
