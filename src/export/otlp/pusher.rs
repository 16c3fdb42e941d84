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
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), OtlpError>>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let bound = settings.shutdown_timeout();
        std::thread::Builder::new()
            .name("otlp-push".into())
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
                    match PushLoop::new(settings, collect, stats, counting_since) {
                        Ok(p) => {
                            let _ = ready_tx.send(Ok(()));
                            p.run(stop_rx).await;
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
                stop: stop_tx,
                done: done_rx,
                bound,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(OtlpError::Start("the push thread exited".into())),
        }
    }
}

impl crate::export::Push for Pusher {
    fn name(&self) -> &'static str {
        "otlp"
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
