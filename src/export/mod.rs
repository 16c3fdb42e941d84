//! Exporters of an engine [`crate::snapshot::Snapshot`]: Prometheus text on
//! scrape, OTLP push, JSON frames of the live view, profiles (pprof, and
//! a flame graph's tree for the live page).
//!
//! A scrape is answered by the web layer with [`prometheus`]; an exporter
//! that pushes on its own schedule (OTLP today) is a [`Push`], started by
//! the application with a way to collect and stopped at shutdown.

pub mod flame;
pub mod live;
pub(crate) mod otlp;
pub mod pprof;
pub mod prometheus;

/// An exporter that pushes collections on its own schedule, on a thread
/// of its own (so a slow receiver never delays `/metrics`).
pub trait Push: Send + std::fmt::Debug {
    /// Its name in logs (`otlp`).
    fn name(&self) -> &'static str;

    /// Stops pushing: cancels an export in flight, pushes a last time
    /// (bounded) and waits for that.
    fn shutdown(self: Box<Self>);
}
