//! The fuzz targets (`perf_exporter::fuzzing`) on stable, in every
//! `cargo test`:
//!
//! * `corpus_*`: every checked-in corpus file (`fuzz/corpus/<target>/`,
//!   seeds, inputs cargo-fuzz kept, and every crash ever found) must pass;
//! * `mutations_*`: a bounded, deterministic mutation search over that
//!   corpus (bit flips, interesting bytes, insertions, deletions,
//!   duplications, splices, dictionary tokens): the same inputs on every
//!   run, so a failure reproduces. `PERF_EXPORTER_FUZZ_ITERATIONS` scales
//!   it (default 1; 10 runs ten times as many).
//!
//! A failure prints the input in hex: save it as a new corpus file
//! (`fuzz/corpus/<target>/crash-<what>`) when fixing the bug, so it stays
//! a regression test.

use perf_exporter::fuzzing::{self, Target, TARGETS};
use std::path::{Path, PathBuf};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                data,
            )
        })
        .collect()
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs one input; a panic or a broken invariant fails with the input.
fn run_one(name: &str, f: Target, what: &str, data: &[u8]) {
    let r = std::panic::catch_unwind(|| f(data));
    match r {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!(
            "{name}: invariant broken on {what}: {e}\ninput ({} bytes, hex): {}\ninput (lossy): {:?}",
            data.len(),
            hex(data),
            String::from_utf8_lossy(data)
        ),
        Err(_) => panic!(
            "{name}: PANIC on {what}\ninput ({} bytes, hex): {}\ninput (lossy): {:?}",
            data.len(),
            hex(data),
            String::from_utf8_lossy(data)
        ),
    }
}

fn target(name: &str) -> Target {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap_or_else(|| panic!("no fuzz target {name}"))
}

fn run_corpus(name: &str) {
    let f = target(name);
    for (file, data) in corpus(name) {
        run_one(name, f, &format!("corpus file {file}"), &data);
    }
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Tokens worth inserting, per target.
#[allow(clippy::too_many_lines)] // a table, one arm per target
fn dictionary(target: &str) -> &'static [&'static [u8]] {
    match target {
        "config" => &[
            b"sets:",
            b"events:",
            b"- name: ",
            b"metric: ",
            b"event: ",
            b"per_cpu: false",
            b"sum_of: [",
            b"scale: ",
            b"unit: ",
            b"requires_format: ",
            b"help: ",
            b"\n  ",
            b"\n    - ",
            b"{",
            b"}",
            b"[",
            b"]",
            b"&a ",
            b"*a",
            b"!!str ",
            b"'",
            b"\"",
            b": ",
            b"---\n",
            b"cpu/event=0x3c/",
            b"cpu/event=1,event=2/",
            b"cycles:u",
            b"gauge: true",
            b"scale: -1",
            b"scale: 0",
            b"scale: 1e308",
            b"scale: .nan",
            b"_total",
            b"__name__",
            b"perf_event_available",
            b"0x",
            b"-1e309",
        ],
        "event_spec" => &[
            b"/",
            b"//",
            b",",
            b"=",
            b"=?",
            b"0x",
            b"0X",
            b"*",
            b":",
            b"-",
            b"r",
            b"cpu",
            b"core",
            b"config",
            b"config1=",
            b"event=",
            b"umask=",
            b"ffffffffffffffff",
            b"18446744073709551616",
            b":u",
            b"/k",
            b"ukhGH",
            b"p",
            b"L1-dcache-",
            b"-load-misses",
            b"uncore_imc_*",
            b"event=1,event=2",
            b":u",
            b":k",
        ],
        "sysfs" => &[
            b"config:",
            b"config1:",
            b"config2:",
            b"config3:",
            b"0-",
            b"-63",
            b",",
            b"=",
            b"?",
            b"0x",
            b"63",
            b"64",
            b"65536",
            // Overlapping ranges each within the bound, one range beyond it
            // once printed (the sysfs target's crash of 2026-11-28).
            b"0297208,2221,222222,008,2202,6,222222,008,222,0-2228,2202,608,22222-82022,008,222,0-22222,0-6423,2-6423,22222,0-6222,0-62222,3,0-6",
            b"4294967295",
            b"\n",
            b" ",
            b"event=",
            b"umask=",
            b"-1",
            b"1e308",
            b"NaN",
            b"inf",
            b"e-5",
        ],
        "web_config" => &[
            b"tls_server_config:\n  ",
            b"cert_file: a\n  ",
            b"key_file: b\n  ",
            b"client_auth_type: ",
            b"RequireAndVerifyClientCert",
            b"RequireAnyClientCert",
            b"client_ca_file: c\n  ",
            b"client_allowed_sans: [",
            b"min_version: TLS1",
            b"max_version: TLS1",
            b"cipher_suites: [",
            b"curve_preferences: [",
            b"basic_auth_users:\n  ",
            b"http_server_config:\n  headers:\n    ",
            b"X-Frame-Options: ",
            b"rate_limit:\n  interval: ",
            b"burst: ",
            b"ms",
            b"h",
            b"\xc2\xb5s",
            b".",
            b"$2y$10$",
        ],
        "perf_record" => &[
            b"\x09\x00\x00\x00\x00\x00",
            b"\x03\x00\x00\x00\x00\x00",
            b"\x13\x00\x00\x00\x00\x00",
            b"\x02\x00\x00\x00\x00\x00\x18\x00",
            b"\x08\x00",
            b"\x10\x00",
            b"\x00",
            b"\xff\xff",
        ],
        "metric_expr" => &[
            b" if ",
            b" else ",
            b"min(",
            b"max(",
            b"d_ratio(",
            b"source_count(",
            b"has_event(",
            b"strcmp_cpuid_str(",
            b"#smt_on",
            b"#slots",
            b"#num_cpus_online",
            b"cpu@event\\=0x3c\\,umask\\=1@",
            b"topdown\\-retiring",
            b"1e-3",
            b".5",
            b"(",
            b")",
            b",",
            b" / ",
            b" % ",
            b" | ",
            b" & ",
            b" ^ ",
            b" < ",
            b" > ",
            b"-",
        ],
        "group_read" => &[
            b"\x00\x00\x00\x00\x00\x00\x00\x00",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"\x01\x00\x00\x00\x00\x00\x00\x00",
            b"\x02\x00\x00\x00\x00\x00\x00\x00",
        ],
        _ => &[
            b"\x30\x82",
            b"\x30\x81",
            b"\xa3",
            b"\x06\x03\x55\x1d\x11",
            b"\x04",
            b"\x87\x04",
            b"\x82",
            b"\x84\xff\xff\xff\xff",
        ],
    }
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], dict: &[&[u8]]) -> Vec<u8> {
    let mut d = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(4) {
        let len = d.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                d[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                const INTERESTING: &[u8] = b"\x00\xff\x7f\x80\n\r\t -,:/=?{}[]\"'#&*!|>0129aAfFxX";
                let i = rng.below(len);
                d[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let i = rng.below(len + 1);
                d.insert(i, rng.next() as u8);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below(8.min(len - i));
                d.drain(i..i + n);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below(16.min(len - i));
                let chunk: Vec<u8> = d[i..i + n].to_vec();
                let at = rng.below(d.len() + 1);
                d.splice(at..at, chunk);
            }
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let at = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                d.truncate(at);
                d.extend_from_slice(&other[from..]);
            }
            6 | 7 => {
                let tok = dict[rng.below(dict.len())];
                let at = rng.below(len + 1);
                d.splice(at..at, tok.iter().copied());
            }
            _ => {
                d.truncate(rng.below(len + 1));
            }
        }
    }
    d.truncate(8192);
    d
}

fn scale() -> usize {
    std::env::var("PERF_EXPORTER_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn run_mutations(name: &str, iterations: usize, seed: u64) {
    let f = target(name);
    let seeds: Vec<Vec<u8>> = corpus(name).into_iter().map(|(_, d)| d).collect();
    let dict = dictionary(name);
    let mut rng = Rng(seed);
    for i in 0..iterations * scale() {
        let input = mutate(&mut rng, &seeds, dict);
        run_one(name, f, &format!("mutation {i} (seed {seed:#x})"), &input);
    }
}

#[test]
fn every_target_has_a_cargo_fuzz_binary_and_a_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for (name, _) in TARGETS {
        assert!(
            root.join("fuzz_targets")
                .join(format!("{name}.rs"))
                .is_file(),
            "fuzz/fuzz_targets/{name}.rs is missing"
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
        assert!(corpus_dir(name).is_dir(), "fuzz/corpus/{name} is missing");
    }
    assert_eq!(TARGETS.len(), 8);
}

#[test]
fn corpus_config() {
    run_corpus("config");
}

#[test]
fn corpus_event_spec() {
    run_corpus("event_spec");
}

#[test]
fn corpus_sysfs() {
    run_corpus("sysfs");
}

#[test]
fn corpus_group_read() {
    run_corpus("group_read");
}

#[test]
fn corpus_web_config() {
    run_corpus("web_config");
}

#[test]
fn corpus_x509_sans() {
    run_corpus("x509_sans");
}

#[test]
fn corpus_metric_expr() {
    run_corpus("metric_expr");
}

#[test]
fn mutations_metric_expr() {
    run_mutations("metric_expr", 30_000, 0x5eed_0008);
}

#[test]
fn mutations_config() {
    run_mutations("config", 3_000, 0x5eed_0001);
}

#[test]
fn mutations_event_spec() {
    run_mutations("event_spec", 30_000, 0x5eed_0002);
}

#[test]
fn mutations_sysfs() {
    run_mutations("sysfs", 30_000, 0x5eed_0003);
}

#[test]
fn corpus_perf_record() {
    run_corpus("perf_record");
}

#[test]
fn mutations_perf_record() {
    run_mutations("perf_record", 30_000, 0x5eed_0007);
}

#[test]
fn mutations_group_read() {
    run_mutations("group_read", 30_000, 0x5eed_0004);
}

#[test]
fn mutations_web_config() {
    run_mutations("web_config", 3_000, 0x5eed_0005);
}

#[test]
fn mutations_x509_sans() {
    run_mutations("x509_sans", 30_000, 0x5eed_0006);
}

/// The direct entry points, for a quick look at one input in a debugger.
#[test]
fn targets_accept_empty_input() {
    for (name, f) in TARGETS {
        assert_eq!(f(b""), Ok(()), "{name}");
    }
    assert_eq!(fuzzing::group_read(&[0u8; 24]), Ok(()));
}

/// Issue 11's new input shapes are seeds of the corpora, and each is
/// refused: duplicate terms, unsupported event modifiers (`u`, `k`, ...
/// are taken since issue 25), odd `.scale` values, and
/// configs with such specs, bad scales or bad names.
#[test]
fn new_shapes_are_seeds_and_refused() {
    use perf_exporter::config::Config;
    use perf_exporter::spec::{check_scale, parse};
    let read = |t: &str, f: &str| {
        let p = corpus_dir(t).join(f);
        String::from_utf8(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
            .expect("utf-8 seed")
    };
    for f in [
        "seed-duplicate-term",
        "seed-duplicate-bare-term",
        "seed-modifier-unsupported",
    ] {
        let s = read("event_spec", f);
        assert!(parse(&s).is_err(), "{f}: {s:?} parsed");
    }
    // perf's `u`, `k`, `h`, `G`, `H` are part of the grammar (issue 25).
    let s = read("event_spec", "seed-modifier");
    assert!(
        parse(&s).is_ok_and(|e| !e.modifiers.is_empty()),
        "seed-modifier: {s:?}"
    );
    for f in [
        "seed-scale-negative",
        "seed-scale-zero",
        "seed-scale-huge",
        "seed-scale-nan",
        "seed-scale-inf",
    ] {
        let s = read("sysfs", f);
        let v: f64 = s.trim().parse().expect("a float");
        assert!(check_scale(v).is_err(), "{f}: {v} accepted");
    }
    assert!(check_scale(read("sysfs", "seed-scale-imc").trim().parse().unwrap()).is_ok());
    for f in [
        "seed-duplicate-term",
        "seed-scale-huge",
        "seed-scale-negative",
        "seed-scale-zero",
        "seed-names",
        "seed-null",
        "seed-bare-sets",
    ] {
        let e = Config::parse(&read("config", f), "t.yaml")
            .map(|_| ())
            .expect_err(f)
            .to_string();
        assert!(
            !e.contains(":0:0") && e.len() > "t.yaml: ".len() + 10,
            "{f}: {e}"
        );
    }
}
