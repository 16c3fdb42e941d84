//! The names the kubelet and the container runtimes give cgroups.
//!
//! The kubelet puts pods under `kubepods` by QoS class: guaranteed pods
//! directly, burstable and besteffort pods in a level of their own.
//!
//! | driver   | QoS level                    | pod                                      |
//! |----------|------------------------------|------------------------------------------|
//! | systemd  | `kubepods-burstable.slice`   | `kubepods-burstable-pod<uid, _ for ->.slice` |
//! | cgroupfs | `burstable`                  | `pod<uid>`                               |
//!
//! (guaranteed: `kubepods-pod<uid_>.slice` / `pod<uid>` right under
//! `kubepods.slice` / `kubepods`). The runtime names each container's
//! cgroup in the pod's: `cri-containerd-<id>.scope` (containerd),
//! `crio-<id>.scope` (CRI-O, whose monitor `crio-conmon-<id>.scope` is
//! not a container), `docker-<id>.scope` (Docker via cri-dockerd), and
//! under the cgroupfs driver the bare `<id>` (or `crio-<id>`).

/// The kubepods roots relative to the cgroup root: the systemd
/// driver's, the cgroupfs driver's, and the systemd driver's under a
/// kubelet `--cgroup-root` of `kubelet.slice`.
pub const KUBEPODS: &[&str] = &[
    "kubepods.slice",
    "kubepods",
    "kubelet.slice/kubelet-kubepods.slice",
];

/// A pod's QoS class (the `qos_class` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qos {
    /// Directly under kubepods.
    Guaranteed,
    /// Under the burstable level.
    Burstable,
    /// Under the besteffort level.
    BestEffort,
}

impl Qos {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Qos::Guaranteed => "guaranteed",
            Qos::Burstable => "burstable",
            Qos::BestEffort => "besteffort",
        }
    }
}

/// The QoS level a child of kubepods is, if it is one.
pub fn qos_level(name: &str) -> Option<Qos> {
    let n = name.strip_suffix(".slice").unwrap_or(name);
    if n == "burstable" || n.ends_with("kubepods-burstable") {
        Some(Qos::Burstable)
    } else if n == "besteffort" || n.ends_with("kubepods-besteffort") {
        Some(Qos::BestEffort)
    } else {
        None
    }
}

/// Whether `s` looks like a pod UID: hex digits and dashes (a UUID, or
/// the 32-hex hash of a static pod).
fn is_uid(s: &str) -> bool {
    (8..=64).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_hexdigit())
}

/// The pod UID (with dashes, as kube-state-metrics' `uid`) of a pod
/// cgroup's name, in either driver's form.
pub fn pod_uid(name: &str) -> Option<String> {
    let uid = if let Some(n) = name.strip_suffix(".slice") {
        // kubepods[-<qos>]-pod<uid with _>.slice
        let (_, u) = n.rsplit_once("-pod")?;
        u.replace('_', "-")
    } else {
        name.strip_prefix("pod")?.to_string()
    };
    is_uid(&uid).then_some(uid)
}

/// Whether a pod UID is a static pod's. The kubelet gives a pod read from
/// a manifest file or URL (etcd, kube-apiserver, ...) the MD5 hash of its
/// config as its UID: 32 lowercase hex digits, no dashes (also its
/// `kubernetes.io/config.hash` annotation); the API server gives every
/// other pod a UUID with dashes. kube-state-metrics lists the mirror pod
/// the kubelet creates for it, under the mirror's own UID, so a static
/// pod's cgroup UID never matches `kube_pod_info`'s `uid`: the mirror's
/// `kubernetes.io/config.hash` annotation carries it.
pub fn is_static_uid(uid: &str) -> bool {
    uid.len() == 32 && uid.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The container id of a container cgroup's name, or `None` for
/// anything else in a pod's cgroup (CRI-O's `crio-conmon-*` monitor
/// included).
pub fn container_id(name: &str) -> Option<&str> {
    if name.starts_with("crio-conmon-") {
        return None;
    }
    let n = name.strip_suffix(".scope").unwrap_or(name);
    let (id, prefixed) = ["cri-containerd-", "crio-", "docker-"]
        .iter()
        .find_map(|p| n.strip_prefix(p))
        .map_or((n, false), |id| (id, true));
    // A bare name (cgroupfs driver) must be a full 64-hex id; a scope
    // must have one of the runtime prefixes.
    let scope = name.ends_with(".scope");
    let ok_len = if prefixed {
        id.len() >= 12
    } else {
        id.len() == 64
    };
    (ok_len && (prefixed || !scope) && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0f5a1c2e-3b4d-4e6f-8a9b-0c1d2e3f4a5b";
    const ID: &str = "4a3c1f0e9d8b7a6c5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d";

    #[test]
    fn static_pod_uids_are_config_hashes() {
        let hash = "3f1c0a6b9e2d4c8f7a5b1e0d9c8b7a6f";
        assert!(is_static_uid(hash));
        let s = format!("kubepods-burstable-pod{hash}.slice");
        assert_eq!(pod_uid(&s).as_deref(), Some(hash));
        for not in [
            UID,
            "3F1C0A6B9E2D4C8F7A5B1E0D9C8B7A6F",
            "3f1c0a6b9e2d4c8f7a5b1e0d9c8b7a6",
            "3f1c0a6b-9e2d-4c8f-7a5b-1e0d9c8b7a6f",
        ] {
            assert!(!is_static_uid(not), "{not}");
        }
    }

    #[test]
    fn pod_uids_of_both_drivers() {
        let s = format!("kubepods-burstable-pod{}.slice", UID.replace('-', "_"));
        assert_eq!(pod_uid(&s).as_deref(), Some(UID));
        let g = format!("kubepods-pod{}.slice", UID.replace('-', "_"));
        assert_eq!(pod_uid(&g).as_deref(), Some(UID));
        assert_eq!(pod_uid(&format!("pod{UID}")).as_deref(), Some(UID));
        for not in [
            "kubepods-burstable.slice",
            "podman",
            "pod",
            "kubepods-pod.slice",
            "pod\"x",
        ] {
            assert_eq!(pod_uid(not), None, "{not}");
        }
    }

    #[test]
    fn container_ids_of_every_runtime() {
        for n in [
            format!("cri-containerd-{ID}.scope"),
            format!("crio-{ID}.scope"),
            format!("docker-{ID}.scope"),
            ID.to_string(),
            format!("crio-{ID}"),
        ] {
            assert_eq!(container_id(&n), Some(ID), "{n}");
        }
        for n in [
            format!("crio-conmon-{ID}.scope"),
            format!("crio-conmon-{ID}"),
            format!("{ID}.scope"),
            "cri-containerd-xyz.scope".into(),
            "abc".into(),
            "cpu.stat".into(),
        ] {
            assert_eq!(container_id(&n), None, "{n}");
        }
    }

    #[test]
    fn qos_levels() {
        assert_eq!(qos_level("kubepods-burstable.slice"), Some(Qos::Burstable));
        assert_eq!(qos_level("besteffort"), Some(Qos::BestEffort));
        assert_eq!(
            qos_level("kubelet-kubepods-besteffort.slice"),
            Some(Qos::BestEffort)
        );
        assert_eq!(qos_level("kubepods-pod1234abcd.slice"), None);
        assert_eq!(Qos::Guaranteed.as_str(), "guaranteed");
    }
}
