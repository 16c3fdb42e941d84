//! The push thread: the push loop on a thread of its own with its own
//! single-threaded tokio runtime, so an unreachable or slow collector only
//! ever delays that thread, never `/metrics` (which shares nothing with
//! it but the engine's mutex, held for one collection).

use super::push::PushLoop;
use super::stats::ExportStats;
use super::{Collect, OtlpError, OtlpSettings};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The running push: a thread with its own runtime.
#[derive(Debug)]
pub(crate) struct Pusher {
    name: &'static str,
    stop: tokio::sync::watch::Sender<bool>,
    done: std::sync::mpsc::Receiver<()>,
    bound: Duration,
}

impl Pusher {
    /// Builds the exporter and starts pushing every interval, on a thread
    /// of its own. Fails when the exporter cannot be built (bad TLS files,
    /// endpoint). `collect` is called once per export. Series whose start
    /// the engine does not know are reported as counting since now (call
    /// this at start-up, with the engine).
    pub(crate) fn start(
        settings: OtlpSettings,
        collect: Collect,
        stats: Arc<ExportStats>,
    ) -> Result<Pusher, OtlpError> {
        let counting_since = SystemTime::now();
        let bound = settings.shutdown_timeout();
        spawn("otlp", bound, move |stop| {
            let p = PushLoop::new(settings, collect, stats, counting_since)?;
            Ok(p.run(stop))
        })
    }
}

/// Starts a push on a thread named `name` with its own single-threaded
/// runtime: `make` builds it there (a gRPC channel lives on the runtime)
/// and returns the loop, which runs until the stop signal; `bound` is how
/// long its shutdown may take.
pub(super) fn spawn<L>(
    name: &'static str,
    bound: Duration,
    make: impl FnOnce(tokio::sync::watch::Receiver<bool>) -> Result<L, OtlpError> + Send + 'static,
) -> Result<Pusher, OtlpError>
where
    L: std::future::Future<Output = ()>,
{
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), OtlpError>>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    std::thread::Builder::new()
        .name(format!("{name}-push"))
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(OtlpError::Start(e.to_string())));
                    return;
                }
            };
            rt.block_on(async move {
                match make(stop_rx) {
                    Ok(run) => {
                        let _ = ready_tx.send(Ok(()));
                        run.await;
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
            let _ = done_tx.send(());
        })
        .map_err(|e| OtlpError::Start(e.to_string()))?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(Pusher {
            name,
            stop: stop_tx,
            done: done_rx,
            bound,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(OtlpError::Start("the push thread exited".into())),
    }
}

impl crate::export::Push for Pusher {
    fn name(&self) -> &'static str {
        self.name
    }

    /// Stops the push: cancels an export in flight, pushes once more
    /// (bounded by [`OtlpSettings::shutdown_timeout`]) and waits for that.
    fn shutdown(self: Box<Self>) {
        let _ = self.stop.send(true);
        let wait = self.bound + Duration::from_secs(1);
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = self.done.recv_timeout(wait) {
            tracing::warn!(
                waited_ms = wait.as_millis() as u64,
                "the final OTLP export did not finish in time; exiting anyway"
            );
        }
    }
}
