//! Generates a large Intel server sysfs tree at run time (nothing of it is
//! committed): the PMUs of the `intel-skx` fixture, with any number of
//! CPUs, sockets and memory-controller PMUs.
//!
//! * `devices/system/cpu/{online,possible,present}` = `0-(N-1)`; CPU `c`
//!   is on package `c / (N / sockets)` (contiguous halves, as Linux numbers
//!   a 2-socket machine without SMT interleaving).
//! * Core, software, tracepoint and `msr` PMUs are copied as they are.
//! * `uncore_imc_0` .. `uncore_imc_{imcs_per_socket-1}` are copies of the
//!   fixture's `uncore_imc_0` with a cpumask of the first CPU of each
//!   socket, as on a real multi-socket Intel server (each PMU counts its
//!   channel on every socket); `power` and `cstate_pkg` get the same
//!   cpumask and `cstate_core` every CPU.
//!
//! [`generate_cpuinfo`] writes the matching `<procfs>/cpuinfo`: every CPU
//! a Skylake-SP of the fixture's identity (`GenuineIntel-6-55-4`), so the
//! sets and metrics a config guards with `requires_cpu` count as on a real
//! host (without it the identity is unknown and they are left out).
//!
//! Used by `benches/scale.rs`, `benches/hot_path.rs` and
//! `tests/sim/bench_support.rs` and `tests/allocations.rs` through `#[path]`.
#![allow(dead_code)]

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The shape of the generated machine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Online CPUs.
    pub cpus: u32,
    /// Packages.
    pub sockets: u32,
    /// `uncore_imc_*` PMUs (one box per socket each).
    pub imcs_per_socket: u32,
}

/// 512 CPUs, 2 sockets, 8 memory controllers per socket.
pub(crate) const SHAPE_512: Shape = Shape {
    cpus: 512,
    sockets: 2,
    imcs_per_socket: 8,
};

/// The fixture the PMUs come from.
pub(crate) fn skx_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-skx")
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &dst)?;
        } else {
            fs::copy(e.path(), &dst)?;
        }
    }
    Ok(())
}

/// Writes the tree under `root` (which must exist and be empty).
pub(crate) fn generate(root: &Path, shape: Shape) -> io::Result<()> {
    if shape.cpus == 0 || shape.sockets == 0 || !shape.cpus.is_multiple_of(shape.sockets) {
        return Err(io::Error::other(format!("bad shape {shape:?}")));
    }
    let src = skx_fixture().join("bus/event_source/devices");
    let dst = root.join("bus/event_source/devices");
    fs::create_dir_all(&dst)?;
    let per_socket = shape.cpus / shape.sockets;
    let last = shape.cpus - 1;
    let firsts: Vec<String> = (0..shape.sockets)
        .map(|s| (s * per_socket).to_string())
        .collect();
    let firsts = firsts.join(",");
    for pmu in [
        "breakpoint",
        "cpu",
        "kprobe",
        "msr",
        "software",
        "tracepoint",
        "uprobe",
        "power",
        "cstate_pkg",
        "cstate_core",
    ] {
        copy_dir(&src.join(pmu), &dst.join(pmu))?;
    }
    fs::write(dst.join("power/cpumask"), format!("{firsts}\n"))?;
    fs::write(dst.join("cstate_pkg/cpumask"), format!("{firsts}\n"))?;
    fs::write(dst.join("cstate_core/cpumask"), format!("0-{last}\n"))?;
    for i in 0..shape.imcs_per_socket {
        let d = dst.join(format!("uncore_imc_{i}"));
        copy_dir(&src.join("uncore_imc_0"), &d)?;
        // Dynamic PMU types above every type the fixture uses.
        fs::write(d.join("type"), format!("{}\n", 100 + i))?;
        fs::write(d.join("cpumask"), format!("{firsts}\n"))?;
    }
    let cpu = root.join("devices/system/cpu");
    fs::create_dir_all(&cpu)?;
    for f in ["online", "possible", "present"] {
        fs::write(cpu.join(f), format!("0-{last}\n"))?;
    }
    fs::write(cpu.join("offline"), "\n")?;
    for c in 0..shape.cpus {
        let t = cpu.join(format!("cpu{c}/topology"));
        fs::create_dir_all(&t)?;
        fs::write(
            t.join("physical_package_id"),
            format!("{}\n", c / per_socket),
        )?;
        fs::write(t.join("die_id"), "0\n")?;
        fs::write(t.join("core_id"), format!("{}\n", (c % per_socket) / 2))?;
        // Two threads per core: CPUs 2k and 2k+1.
        let first = c - c % 2;
        let siblings = if first + 1 < shape.cpus {
            format!("{first}-{}\n", first + 1)
        } else {
            format!("{first}\n")
        };
        fs::write(t.join("core_cpus_list"), &siblings)?;
        fs::write(t.join("thread_siblings_list"), siblings)?;
    }
    Ok(())
}

/// Writes `<procfs>/cpuinfo` for `shape` (`procfs` must exist): one
/// `processor` block per CPU with the `vendor_id`, `cpu family`, `model`
/// and `stepping` of the `intel-skx` fixture's CPU 0 and the CPU's package
/// as `physical id`.
pub(crate) fn generate_cpuinfo(procfs: &Path, shape: Shape) -> io::Result<()> {
    if shape.cpus == 0 || shape.sockets == 0 || !shape.cpus.is_multiple_of(shape.sockets) {
        return Err(io::Error::other(format!("bad shape {shape:?}")));
    }
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/procfs/intel-skx/cpuinfo");
    let text = fs::read_to_string(fixture)?;
    let first = text.split("\n\n").next().unwrap_or_default();
    let keep: Vec<&str> = first
        .lines()
        .filter(|l| {
            let key = l.split(':').next().unwrap_or_default().trim();
            matches!(
                key,
                "vendor_id" | "cpu family" | "model" | "model name" | "stepping"
            )
        })
        .collect();
    let per_socket = shape.cpus / shape.sockets;
    let mut out = String::new();
    for c in 0..shape.cpus {
        out.push_str(&format!("processor\t: {c}\n"));
        for l in &keep {
            out.push_str(l);
            out.push('\n');
        }
        out.push_str(&format!("physical id\t: {}\n\n", c / per_socket));
    }
    fs::write(procfs.join("cpuinfo"), out)
}
