//! Profiles with call stacks on this machine (`cpu-clock`: it has no
//! hardware PMU): a workload built here with frame pointers and a known
//! hot function, in a cgroup of its own, profiled through serve's
//! `GET /api/v1/profile` and `perf-exporter record`, and read by an
//! independent consumer, `go tool pprof` (Debian's `golang-go`, which
//! scripts/test.sh installs: a missing `go` fails these tests). A C++
//! workload (clang++, which scripts/test.sh installs too) shows its
//! functions demangled.

use crate::common;

use common::cgroup::CgroupTree;
use common::{serial, EXPORTER};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The workload, compiled into `dir`.
pub(crate) fn build(dir: &Path) -> PathBuf {
    compile(dir, "hot", &[])
}

/// `hot.c` compiled into `dir/name` with frame pointers and extra `cc`
/// arguments.
fn compile(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let src = common::repo_root().join("tests/fixtures/profile/hot.c");
    let out = dir.join(name);
    let st = Command::new("cc")
        .args([
            "-O1",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
        ])
        .args(extra)
        .arg("-o")
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

/// `function`'s flat share (percent) in `go tool pprof -top`, 0 when
/// absent.
fn share_of(top: &str, function: &str) -> f64 {
    flat_shares(top)
        .iter()
        .find(|(n, _)| n == function)
        .map_or(0.0, |s| s.1)
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

/// `record -d 2s -e cpu-clock --pid PID -o FILE`, which must succeed.
fn record_pid(pid: u32, file: &Path) {
    let (ok, err) = record(&[
        "-d",
        "2s",
        "-e",
        "cpu-clock",
        "--pid",
        &pid.to_string(),
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
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
    let hot = share_of(&top, "hot_spin");
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
    let hot = share_of(&top, "hot_spin");
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
    record_pid(w.pid(), &f);
    let top = pprof(&["-top"], &f);
    assert!(
        want.iter().any(|w| top.contains(w)),
        "no kernel entry frame:\n{top}"
    );
    assert!(top.contains("syscalls"), "the user frame under it:\n{top}");
    drop(w);
}

/// `name`'s start and size in `bin`'s symbols (`nm -S`). For these
/// builds the executable segment's file offsets are its addresses, so
/// this is also the range of offsets in the file.
fn symbol_range(bin: &Path, name: &str) -> (u64, u64) {
    let nm = Command::new("nm").arg("-S").arg(bin).output().expect("nm");
    let nm = String::from_utf8_lossy(&nm.stdout);
    nm.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == name).then(|| {
                (
                    u64::from_str_radix(f[0], 16).unwrap(),
                    u64::from_str_radix(f[1], 16).unwrap(),
                )
            })
        })
        .unwrap_or_else(|| panic!("{name} in nm of {}", bin.display()))
}

/// `bin`'s GNU build-id (`readelf -n`), hex.
fn build_id(bin: &Path) -> String {
    let readelf = Command::new("readelf")
        .arg("-n")
        .arg(bin)
        .output()
        .expect("readelf");
    let notes = String::from_utf8_lossy(&readelf.stdout);
    notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a GNU build-id note")
        .to_string()
}

/// The address of the hottest frame of `module` (its file name) in
/// `go tool pprof -top -addresses`.
fn hottest_address(top: &str, module: &str) -> u64 {
    let first = top
        .lines()
        .find(|l| l.contains(&format!("[{module}]")))
        .unwrap_or_else(|| panic!("no frame of {module} without a symbol:\n{top}"));
    let f: Vec<&str> = first.split_whitespace().collect();
    u64::from_str_radix(f[5], 16).unwrap()
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
    let (start, size) = symbol_range(&bin, "hot_spin");
    let build_id = build_id(&stripped);
    let w = Workload::start(&stripped, "spin");
    let f = dir.path().join("stripped.pb.gz");
    record_pid(w.pid(), &f);
    drop(w);
    let raw = pprof(&["-raw"], &f);
    assert!(
        raw.lines()
            .any(|l| l.contains("hot-stripped") && l.contains(&build_id)),
        "the mapping keeps the build-id {build_id}:\n{raw}"
    );
    let top = pprof(&["-top", "-addresses"], &f);
    let addr = hottest_address(&top, "hot-stripped");
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
    let rec = spawn_record(&["--by", "process"], &f);
    // The workload spins about a second and exits, well before the
    // profile ends.
    let mut w = Workload::start(&bin, "brief");
    assert!(w.0.wait().expect("wait for the workload").success());
    record_ends(rec);
    // Shares of the whole machine's profile: hot_spin's of the process's.
    let top = pprof(&["-top", "-tagfocus=process=hot"], &f);
    let shares = flat_shares(&top);
    let all: f64 = shares.iter().map(|s| s.1).sum();
    let hot = share_of(&top, "hot_spin");
    assert!(
        all > 0.0 && hot / all >= 0.9,
        "the exited process's samples are symbolized:\n{top}"
    );
}

/// Spawns `record -d 3s -e cpu-clock ARGS -o FILE`.
fn spawn_record(args: &[&str], file: &Path) -> Child {
    Command::new(EXPORTER)
        .args(["record", "-d", "3s", "-e", "cpu-clock"])
        .args(args)
        .arg("-o")
        .arg(file)
        .stderr(Stdio::piped())
        .spawn()
        .expect("run perf-exporter record")
}

/// Waits for `record`, which must succeed.
fn record_ends(rec: Child) {
    let out = rec.wait_with_output().expect("record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_binary_replaced_on_disk_never_lends_its_symbols() {
    let (_s, dir, bin) = setup();
    // The replacement: the same code with its functions renamed, so the
    // profiled file's offsets fall in functions of other names there.
    let renamed = [
        "-Dhot_spin=replaced_spin",
        "-Ddriver=replaced_driver",
        "-Dsyscalls=replaced_syscalls",
    ];
    let decoy = compile(dir.path(), "decoy", &renamed);
    let (old_id, new_id) = (build_id(&bin), build_id(&decoy));
    assert_ne!(old_id, new_id, "the replacement's build-id differs");
    let (start, size) = symbol_range(&bin, "hot_spin");
    let brief = dir.path().join("brief");
    std::fs::copy(&bin, &brief).unwrap();
    let decoy2 = dir.path().join("decoy2");
    std::fs::copy(&decoy, &decoy2).unwrap();

    // 1. Replaced (renamed over) while its process runs and is profiled:
    // the mapping itself still reads the old file, whose symbols name
    // the frames.
    let w = Workload::start(&bin, "spin");
    let f = dir.path().join("live.pb.gz");
    let rec = spawn_record(&["--pid", &w.pid().to_string()], &f);
    std::fs::rename(&decoy, &bin).expect("replace the running binary");
    record_ends(rec);
    drop(w);
    let top = pprof(&["-top"], &f);
    let hot = share_of(&top, "hot_spin");
    assert!(hot >= 90.0, "the old file's symbols:\n{top}");
    assert!(!top.contains("replaced_"), "the new file's symbols:\n{top}");

    // 2. Replaced after its process exited, before the profile is built:
    // only the path is left, and its build-id is not the mapped one, so
    // the frames keep the old build-id and their offsets.
    let f = dir.path().join("gone.pb.gz");
    let rec = spawn_record(&["--by", "process"], &f);
    let mut w = Workload::start(&brief, "brief");
    assert!(w.0.wait().expect("wait for the workload").success());
    std::fs::rename(&decoy2, &brief).expect("replace the exited binary");
    record_ends(rec);
    let top = pprof(&["-top", "-addresses", "-tagfocus=process=brief"], &f);
    assert!(!top.contains("replaced_"), "the new file's symbols:\n{top}");
    let addr = hottest_address(&top, "brief");
    assert!(
        (start..start + size).contains(&addr),
        "the hottest offset {addr:#x} is in hot_spin [{start:#x}, +{size:#x}):\n{top}"
    );
    let raw = pprof(&["-raw"], &f);
    let mapping = |id: &str| raw.lines().any(|l| l.contains("/brief") && l.contains(id));
    assert!(
        mapping(&old_id),
        "the mapping keeps the build-id {old_id}:\n{raw}"
    );
    assert!(!mapping(&new_id), "not the new file's build-id:\n{raw}");
}

#[test]
fn cpp_functions_show_demangled() {
    let (_s, dir, _) = setup();
    let src = common::repo_root().join("tests/fixtures/profile/hot.cpp");
    let bin = dir.path().join("hotcpp");
    let st = Command::new("clang++")
        .args(["-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("clang++ is needed to build the C++ workload");
    assert!(st.success(), "clang++ failed on {}", src.display());
    let w = Workload::start(&bin, "spin");
    let f = dir.path().join("cpp.pb.gz");
    record_pid(w.pid(), &f);
    drop(w);
    // -raw: the names as the profile holds them (pprof shortens C++
    // names in its reports).
    let raw = pprof(&["-raw"], &f);
    assert!(
        raw.contains("workload::Spinner<unsigned long>::spin(unsigned long)"),
        "the function demangled:\n{raw}"
    );
    assert!(!raw.contains("_ZN8workload"), "a mangled name:\n{raw}");
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
