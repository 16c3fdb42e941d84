//! Export statistics: `perf_otlp_exports_total{result}` for `/metrics`,
//! and the rate limit of export-failure logs.

use crate::snapshot::{Family, Kind, Sample};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The name of the export results' family, on `/metrics` and pushed.
pub(crate) const EXPORTS_NAME: &str = "perf_otlp_exports_total";

/// Its help.
pub(crate) const EXPORTS_HELP: &str =
    "OTLP metric exports by result (a failure is an export that got an error or timed out).";

/// Export results, for `perf_otlp_exports_total{result}` on `/metrics`.
#[derive(Debug, Default)]
pub struct ExportStats {
    success: AtomicU64,
    failure: AtomicU64,
}

impl ExportStats {
    /// Counts one export.
    pub fn record(&self, ok: bool) {
        let c = if ok { &self.success } else { &self.failure };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// `(successes, failures)` so far.
    fn counts(&self) -> (u64, u64) {
        (
            self.success.load(Ordering::Relaxed),
            self.failure.load(Ordering::Relaxed),
        )
    }

    /// The samples of [`EXPORTS_NAME`], by result.
    pub fn samples(&self) -> Vec<Sample> {
        let (ok, failed) = self.counts();
        let sample = |result: &str, n: u64| Sample {
            labels: vec![("result", result.into())].into(),
            value: n as f64,
            start_unix_nanos: 0,
        };
        vec![sample("success", ok), sample("failure", failed)]
    }

    /// The `perf_otlp_exports_total` family.
    pub fn family(&self) -> Family {
        Family {
            name: EXPORTS_NAME.into(),
            help: EXPORTS_HELP.into(),
            kind: Kind::Counter,
            samples: self.samples(),
        }
    }
}

/// Rate limiting of export-failure logs: the first failure is logged at
/// once, then at most one line per period with the number of failures in
/// between; the first success after failures is logged once.
#[derive(Debug)]
pub(super) struct FailureLog {
    period: Duration,
    last: Option<Instant>,
    suppressed: u64,
    failing: u64,
}

impl FailureLog {
    /// A limiter that logs at most once per `period`.
    pub(super) fn new(period: Duration) -> Self {
        FailureLog {
            period,
            last: None,
            suppressed: 0,
            failing: 0,
        }
    }

    /// A failure at `now`: `Some(failures not logged since the last line)`
    /// when this one is to be logged.
    pub(super) fn failure(&mut self, now: Instant) -> Option<u64> {
        self.failing += 1;
        match self.last {
            Some(t) if now.saturating_duration_since(t) < self.period => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }

    /// A success: `Some(consecutive failures before it)` when it ends a
    /// run of failures.
    pub(super) fn success(&mut self) -> Option<u64> {
        self.suppressed = 0;
        self.last = None;
        (self.failing > 0).then(|| std::mem::take(&mut self.failing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_log_rate_limits() {
        let t0 = Instant::now();
        let s = |n| t0 + Duration::from_secs(n);
        let mut l = FailureLog::new(Duration::from_secs(60));
        assert_eq!(l.failure(s(0)), Some(0));
        assert_eq!(l.failure(s(10)), None);
        assert_eq!(l.failure(s(59)), None);
        assert_eq!(l.failure(s(60)), Some(2));
        assert_eq!(l.failure(s(61)), None);
        assert_eq!(l.success(), Some(5));
        assert_eq!(l.success(), None);
        assert_eq!(l.failure(s(62)), Some(0));
    }

    #[test]
    fn export_stats_family() {
        let st = ExportStats::default();
        st.record(true);
        st.record(false);
        st.record(false);
        let f = st.family();
        assert_eq!(f.name, "perf_otlp_exports_total");
        assert_eq!(f.kind, Kind::Counter);
        assert_eq!(
            f.samples[0].labels,
            vec![("result", "success".to_string())].into()
        );
        assert_eq!(f.samples[0].value, 1.0);
        assert_eq!(f.samples[1].value, 2.0);
    }
}
