//! Exporters of an engine [`crate::engine::Snapshot`]: Prometheus text on
//! scrape, OTLP push.

pub mod otlp;
pub mod prometheus;
