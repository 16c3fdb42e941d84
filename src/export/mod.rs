//! Exporters of an engine [`crate::engine::Snapshot`].

pub mod prometheus;
