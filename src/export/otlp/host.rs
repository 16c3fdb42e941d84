//! Host detection for the OTLP resource: `host.name`, `host.arch`, the
//! CPU's vendor and model, the Kubernetes node, and the machine id that
//! `service.instance.id` is derived from. Every file is read under the
//! procfs root given (`--path.procfs`), or next to it.

use super::flags::Env;
use crate::bounded::{read_attribute, read_string, CPUINFO_BYTES};
use std::path::{Path, PathBuf};

/// The OTel `host.arch` value of a Rust target architecture.
pub(super) fn host_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm32",
        "x86" => "x86",
        "powerpc64" => "ppc64",
        "powerpc" => "ppc32",
        other => other,
    }
}

/// `(vendor id, model name)` from `/proc/cpuinfo` text: `vendor_id` and
/// `model name` on x86; the `CPU implementer` code on Arm (which has no
/// model name there).
fn parse_cpuinfo(text: &str) -> (Option<String>, Option<String>) {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    };
    (
        field("vendor_id").or_else(|| field("CPU implementer")),
        field("model name"),
    )
}

/// Host resource attributes: `host.name`, `host.arch`,
/// `host.cpu.vendor.id`, `host.cpu.model.name`, and `k8s.node.name` from
/// `K8S_NODE_NAME` (the Helm chart sets it from the downward API).
pub(super) fn detect_host(procfs: &Path, env: Env<'_>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let host = read_attribute(&procfs.join("sys/kernel/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| env("HOSTNAME"));
    if let Some(h) = host {
        out.push(("host.name".to_string(), h));
    }
    out.push((
        "host.arch".to_string(),
        host_arch(std::env::consts::ARCH).to_string(),
    ));
    if let Ok(ci) = read_string(&procfs.join("cpuinfo"), CPUINFO_BYTES) {
        let (vendor, model) = parse_cpuinfo(&ci);
        if let Some(v) = vendor {
            out.push(("host.cpu.vendor.id".to_string(), v));
        }
        if let Some(m) = model {
            out.push(("host.cpu.model.name".to_string(), m));
        }
    }
    if let Some(n) = env("K8S_NODE_NAME") {
        out.push(("k8s.node.name".to_string(), n.trim().to_string()));
    }
    out
}

/// Where the machine id may be, for a procfs root: the root the procfs
/// sits in (`/proc` → `/`, `/host/proc` → `/host`), at
/// `etc/machine-id` (systemd) or `var/lib/dbus/machine-id` (D-Bus).
fn machine_id_paths(procfs: &Path) -> Vec<PathBuf> {
    let root = procfs.parent().unwrap_or(Path::new("/"));
    vec![
        root.join("etc/machine-id"),
        root.join("var/lib/dbus/machine-id"),
    ]
}

/// The host's machine id (32 hex digits, `machine-id(5)`), if readable.
pub(super) fn machine_id(procfs: &Path) -> Option<String> {
    machine_id_paths(procfs).into_iter().find_map(|p| {
        let s = read_attribute(&p).ok()?;
        let id = s.trim();
        (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| id.to_ascii_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::super::flags::env_of;
    use super::*;

    #[test]
    fn host_detection_from_procfs() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/kernel")).unwrap();
        std::fs::write(d.path().join("sys/kernel/hostname"), "node-a\n").unwrap();
        std::fs::write(
            d.path().join("cpuinfo"),
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n",
        )
        .unwrap();
        let env = env_of(&[]);
        let h = detect_host(d.path(), &env);
        assert_eq!(h[0], ("host.name".into(), "node-a".into()));
        assert!(h.contains(&("host.cpu.vendor.id".into(), "GenuineIntel".into())));
        assert!(h.contains(&(
            "host.cpu.model.name".into(),
            "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz".into()
        )));
        assert_eq!(
            parse_cpuinfo(
                "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
            ),
            (Some("0x41".into()), None)
        );
        assert_eq!(host_arch("x86_64"), "amd64");
        assert_eq!(host_arch("aarch64"), "arm64");
    }

    #[test]
    fn machine_id_next_to_the_procfs_root() {
        let d = tempfile::tempdir().unwrap();
        let procfs = d.path().join("proc");
        std::fs::create_dir_all(&procfs).unwrap();
        assert_eq!(machine_id(&procfs), None);
        std::fs::create_dir_all(d.path().join("var/lib/dbus")).unwrap();
        let dbus = "0123456789ABCDEF0123456789abcdef";
        std::fs::write(d.path().join("var/lib/dbus/machine-id"), dbus).unwrap();
        assert_eq!(machine_id(&procfs).as_deref(), Some(&*dbus.to_lowercase()));
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        std::fs::write(d.path().join("etc/machine-id"), "uninitialized\n").unwrap();
        assert_eq!(machine_id(&procfs).as_deref(), Some(&*dbus.to_lowercase()));
        let sd = "fedcba9876543210fedcba9876543210";
        std::fs::write(d.path().join("etc/machine-id"), format!("{sd}\n")).unwrap();
        assert_eq!(machine_id(&procfs).as_deref(), Some(sd));
    }
}
