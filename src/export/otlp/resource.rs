//! The OTLP resource: detected host attributes, then
//! `OTEL_RESOURCE_ATTRIBUTES` and `--otlp.resource-attributes` over them,
//! then `service.name`, `service.version`, `telemetry.sdk.*` and
//! `service.instance.id` where the user did not give them.
//!
//! `telemetry.sdk.*` names what encodes the data points: perf-exporter
//! builds them itself from its snapshots (through `opentelemetry-proto`'s
//! wire types, not the OpenTelemetry SDK), so `telemetry.sdk.name` is
//! `perf-exporter` and its version the exporter's, as the semantic
//! conventions ask of an implementation that is not the OpenTelemetry
//! SDK.
//!
//! `service.instance.id` is stable across restarts on the same host: a
//! UUID v5, in the namespace the semantic conventions give, of the host's
//! machine id (`machine-id(5)`, read next to the procfs root, so
//! `--path.procfs /host/proc` reads `/host/etc/machine-id`) with
//! `service.namespace` and `service.name`. The machine id itself is never
//! sent: `machine-id(5)` asks that it be hashed. Without a machine id the
//! source is `host.name` (stable while the host keeps its name); without
//! either, a random UUID v4 for this process.

use super::host::{detect_host, machine_id};
use super::parse::parse_key_values;
use super::table::{invalid, Given, Inputs, RESOURCE_ATTRIBUTES, SERVICE_NAME};
use super::OtlpError;
use std::path::Path;

/// The namespace of `service.instance.id` UUIDs (semantic conventions,
/// `service.instance.id`).
const INSTANCE_ID_NAMESPACE: uuid::Uuid = uuid::uuid!("4d63009a-8d0f-11ee-aad7-4c796ed8e320");

/// An attribute list where a later value of a key replaces the earlier.
#[derive(Debug, Default)]
struct Attributes(Vec<(String, String)>);

impl Attributes {
    fn set(&mut self, k: impl Into<String>, v: impl Into<String>) {
        let k = k.into();
        self.0.retain(|(rk, _)| *rk != k);
        self.0.push((k, v.into()));
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(rk, _)| rk == k)
            .map(|(_, v)| v.as_str())
    }

    fn set_default(&mut self, k: &str, v: impl FnOnce(&Self) -> String) {
        if self.get(k).is_none() {
            let v = v(self);
            self.0.push((k.to_string(), v));
        }
    }

    fn merge(&mut self, g: Option<Given>) -> Result<(), OtlpError> {
        if let Some(g) = g {
            let kv = parse_key_values(&g.value).map_err(|e| invalid(g.origin, e))?;
            for (k, v) in kv {
                self.set(k, v);
            }
        }
        Ok(())
    }
}

/// The resource attributes, `service.name` first.
pub(super) fn resolve(i: &Inputs<'_>, procfs: &Path) -> Result<Vec<(String, String)>, OtlpError> {
    let mut a = Attributes(detect_host(procfs, i.env));
    a.merge(i.var(&RESOURCE_ATTRIBUTES))?;
    let flag = i.flags.resource_attributes.as_deref();
    a.merge(i.get(&RESOURCE_ATTRIBUTES, flag).filter(|g| g.from_flag))?;
    let service = i
        .get(&SERVICE_NAME, i.flags.service_name.as_deref())
        .map(|g| g.value)
        .or_else(|| a.get("service.name").map(str::to_string))
        .unwrap_or_else(|| "perf-exporter".to_string());
    a.0.retain(|(k, _)| k != "service.name");
    a.0.insert(0, ("service.name".into(), service.trim().to_string()));
    let version = env!("CARGO_PKG_VERSION");
    a.set_default("service.version", |_| version.into());
    a.set_default("telemetry.sdk.name", |_| "perf-exporter".into());
    a.set_default("telemetry.sdk.language", |_| "rust".into());
    a.set_default("telemetry.sdk.version", |_| version.into());
    let machine = machine_id(procfs);
    a.set_default("service.instance.id", |a| {
        instance_id(machine.as_deref(), a)
    });
    Ok(a.0)
}

/// [`resolve`]'s `service.instance.id` (see the module docs).
fn instance_id(machine_id: Option<&str>, a: &Attributes) -> String {
    let source = machine_id
        .map(|m| format!("machine-id:{m}"))
        .or_else(|| a.get("host.name").map(|h| format!("host.name:{h}")));
    let Some(source) = source else {
        return random_uuid().to_string();
    };
    let name = format!(
        "{source}\n{}\n{}",
        a.get("service.namespace").unwrap_or(""),
        a.get("service.name").unwrap_or("")
    );
    uuid::Uuid::new_v5(&INSTANCE_ID_NAMESPACE, name.as_bytes()).to_string()
}

/// A random UUID v4 (from the same system random source as TLS).
fn random_uuid() -> uuid::Uuid {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    // The system's random source failing leaves zeros: still a valid,
    // if not unique, id.
    let _ = ring::rand::SystemRandom::new().fill(&mut b);
    uuid::Builder::from_random_bytes(b).into_uuid()
}
