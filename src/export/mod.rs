//! Exporters of an engine [`crate::snapshot::Snapshot`]: Prometheus text on
//! scrape, OTLP push.

pub mod otlp;
pub mod prometheus;
