//! Exporters of an engine [`crate::snapshot::Snapshot`]: Prometheus text on
//! scrape, OTLP push, JSON frames of the live view.

pub mod live;
pub mod otlp;
pub mod prometheus;
