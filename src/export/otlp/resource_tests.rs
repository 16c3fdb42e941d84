//! The OTLP resource through the settings (`resource.rs`'s tests, kept
//! apart so that `resource.rs` does not import the settings that build on
//! it).

use super::flags::{env_of, OtlpFlags};
use super::resource::resolve;
use super::settings::tests::{on, resolve as resolve_settings};
use super::table::Inputs;
use std::path::Path;

fn get(r: &[(String, String)], k: &str) -> Option<String> {
    r.iter().find(|(rk, _)| rk == k).map(|(_, v)| v.clone())
}

#[test]
fn resource_attributes() {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=prod,service.name=from-attrs,team=a%2Cb",
        ),
        ("K8S_NODE_NAME", "node-7"),
        ("HOSTNAME", "box"),
    ];
    let s = on(&OtlpFlags::default(), &env).resource;
    assert_eq!(get(&s, "service.name").as_deref(), Some("from-attrs"));
    assert_eq!(
        get(&s, "service.version").as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(get(&s, "deployment.environment").as_deref(), Some("prod"));
    assert_eq!(get(&s, "team").as_deref(), Some("a,b"));
    assert_eq!(get(&s, "k8s.node.name").as_deref(), Some("node-7"));
    assert_eq!(get(&s, "host.name").as_deref(), Some("box"));
    assert_eq!(
        get(&s, "host.arch").as_deref(),
        Some(super::host::host_arch(std::env::consts::ARCH))
    );
    // OTEL_SERVICE_NAME beats service.name in the attributes; the flag
    // beats both.
    let mut env2 = env.to_vec();
    env2.push(("OTEL_SERVICE_NAME", "svc"));
    let r = on(&OtlpFlags::default(), &env2).resource;
    assert_eq!(get(&r, "service.name").as_deref(), Some("svc"));
    let f = OtlpFlags {
        service_name: Some("flag-svc".into()),
        resource_attributes: Some("team=c".into()),
        ..Default::default()
    };
    let s = on(&f, &env2).resource;
    assert_eq!(s[0], ("service.name".into(), "flag-svc".into()));
    assert_eq!(get(&s, "team").as_deref(), Some("c"));
    assert_eq!(s.iter().filter(|(k, _)| k == "service.name").count(), 1);
    let none = on(
        &OtlpFlags::default(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")],
    )
    .resource;
    assert_eq!(get(&none, "service.name").as_deref(), Some("perf-exporter"));
    assert_eq!(get(&none, "k8s.node.name"), None);
    let e = resolve_settings(
        &OtlpFlags::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_RESOURCE_ATTRIBUTES", "novalue"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("OTEL_RESOURCE_ATTRIBUTES: "), "{e}");
}

fn resource_on(procfs: &Path, pairs: &[(&str, &str)], f: &OtlpFlags) -> Vec<(String, String)> {
    let env = env_of(pairs);
    let i = Inputs {
        flags: f,
        env: &env,
    };
    resolve(&i, procfs).unwrap()
}

#[test]
fn telemetry_sdk_and_a_stable_service_instance_id() {
    let d = tempfile::tempdir().unwrap();
    let procfs = d.path().join("proc");
    std::fs::create_dir_all(procfs.join("sys/kernel")).unwrap();
    std::fs::create_dir_all(d.path().join("etc")).unwrap();
    std::fs::write(procfs.join("sys/kernel/hostname"), "node-a\n").unwrap();
    let mid = "0123456789abcdef0123456789abcdef";
    std::fs::write(d.path().join("etc/machine-id"), format!("{mid}\n")).unwrap();
    let f = OtlpFlags::default();
    let r = resource_on(&procfs, &[], &f);
    assert_eq!(
        get(&r, "telemetry.sdk.name").as_deref(),
        Some("perf-exporter")
    );
    assert_eq!(get(&r, "telemetry.sdk.language").as_deref(), Some("rust"));
    assert_eq!(
        get(&r, "telemetry.sdk.version").as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let id = get(&r, "service.instance.id").unwrap();
    let u = uuid::Uuid::parse_str(&id).unwrap();
    assert_eq!(u.get_version_num(), 5, "{id}");
    assert!(!id.contains(mid));
    // Stable: the same host and service give the same id (a restart).
    assert_eq!(resource_on(&procfs, &[], &f), r);
    // Another service on the same host, or another host: another id.
    let other = resource_on(&procfs, &[("OTEL_SERVICE_NAME", "x")], &f);
    assert_ne!(get(&other, "service.instance.id").unwrap(), id);
    let ns = resource_on(
        &procfs,
        &[("OTEL_RESOURCE_ATTRIBUTES", "service.namespace=n")],
        &f,
    );
    assert_ne!(get(&ns, "service.instance.id").unwrap(), id);
    std::fs::write(d.path().join("etc/machine-id"), "f".repeat(32)).unwrap();
    let moved = resource_on(&procfs, &[], &f);
    assert_ne!(get(&moved, "service.instance.id").unwrap(), id);
    // Without a machine id: from host.name, still stable.
    std::fs::remove_file(d.path().join("etc/machine-id")).unwrap();
    let by_host = get(&resource_on(&procfs, &[], &f), "service.instance.id").unwrap();
    assert_eq!(
        get(&resource_on(&procfs, &[], &f), "service.instance.id").unwrap(),
        by_host
    );
    // The user's value wins.
    let user = resource_on(
        &procfs,
        &[(
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.instance.id=pod-1,telemetry.sdk.name=x",
        )],
        &f,
    );
    assert_eq!(get(&user, "service.instance.id").as_deref(), Some("pod-1"));
    assert_eq!(get(&user, "telemetry.sdk.name").as_deref(), Some("x"));
    // Nothing to derive it from: a random v4.
    let nothing = resource_on(Path::new("/nonexistent/proc"), &[], &f);
    let id = get(&nothing, "service.instance.id").unwrap();
    assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 4);
}
