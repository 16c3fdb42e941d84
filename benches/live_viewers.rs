//! What 50 live-view viewers at 1 s cost the exporter (docs/src/
//! performance.md, "Live view"; issue goal: under 2% of one core): the release binary on this
//! host's live kernel with the default config, first idle for the same
//! time (the baseline), then with the viewers connected to
//! `/api/v1/stream?interval=1s`, each reading every frame. The cost is the
//! exporter's user+system CPU time from `/proc/<pid>/stat` over the window,
//! as a share of one core. A report, never an assertion.
//!
//! `scripts/bench-live-viewers.sh` builds the release binary and runs
//! this: `cargo bench --bench live_viewers -- --exporter PATH [--seconds
//! 30] [--viewers 50] [--no-per-cpu | --per-cpu all]` (`--test`: 5 viewers for 3 s).

#[path = "support/harness.rs"]
mod harness;

use futures_util::StreamExt;
use harness::{arg_value, err, machine, stat_cpu_seconds, Error, Server};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

/// Settings from the command line.
struct Run {
    exporter: PathBuf,
    seconds: u64,
    viewers: usize,
    /// `per_cpu=` of the stream's query (`1`: the default).
    per_cpu: String,
}

fn settings() -> Run {
    let args: Vec<String> = std::env::args().collect();
    let num = |name: &str, default: u64| {
        arg_value(&args, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    // `-- --test` (the criterion benches' smoke convention): a short run.
    let smoke = args.iter().any(|a| a == "--test");
    Run {
        exporter: arg_value(&args, "--exporter")
            .unwrap_or_else(|| "target/release/perf-exporter".into())
            .into(),
        seconds: num("--seconds", if smoke { 3 } else { 30 }),
        viewers: num("--viewers", if smoke { 5 } else { 50 }) as usize,
        per_cpu: if args.iter().any(|a| a == "--no-per-cpu") {
            "0".into()
        } else {
            arg_value(&args, "--per-cpu").unwrap_or_else(|| "1".into())
        },
    }
}

/// The exporter's CPU share of one core over `secs` while `during` runs.
async fn share<F: std::future::Future<Output = Result<u64, Error>>>(
    pid: u32,
    during: F,
) -> Result<(f64, f64, u64), Error> {
    let (c0, t0) = (stat_cpu_seconds(pid)?, Instant::now());
    let frames = during.await?;
    let (cpu, wall) = (stat_cpu_seconds(pid)? - c0, t0.elapsed().as_secs_f64());
    Ok((cpu / wall, wall, frames))
}

/// `n` viewers reading every frame for `secs`; the frames they got.
async fn viewers(port: u16, n: usize, secs: u64, per_cpu: &str) -> Result<u64, Error> {
    let q = format!("&per_cpu={per_cpu}");
    let url = format!("ws://127.0.0.1:{port}/api/v1/stream?interval=1s{q}");
    let mut tasks = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(secs);
    for _ in 0..n {
        let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .map_err(|e| err(format!("connect {url}: {e}")))?;
        tasks.push(tokio::spawn(async move {
            let mut frames = 0u64;
            while let Ok(Some(Ok(m))) = tokio::time::timeout_at(until, ws.next()).await {
                if matches!(m, Message::Text(_)) {
                    frames += 1;
                }
            }
            frames
        }));
    }
    let mut frames = 0;
    for t in tasks {
        frames += t.await.map_err(|e| err(e.to_string()))?;
    }
    Ok(frames)
}

fn main() -> Result<(), Error> {
    let r = settings();
    let s = Server::start(
        "perf-exporter",
        &r.exporter,
        &["--web.listen-address".into(), "127.0.0.1:{port}".into()],
        "/-/ready",
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (idle, wall, _) = rt.block_on(share(s.pid(), async {
        tokio::time::sleep(Duration::from_secs(r.seconds)).await;
        Ok(0)
    }))?;
    let (busy, wall2, frames) = rt.block_on(share(
        s.pid(),
        viewers(s.port, r.viewers, r.seconds, &r.per_cpu),
    ))?;
    println!("{}", machine());
    println!(
        "live view: {} viewers at interval=1s&per_cpu={} for {wall2:.0} s ({frames} frames received): exporter {:.2}% of one core; idle (no viewer, {wall:.0} s): {:.2}%; the viewers' share: {:.2}% (goal: under 2%)",
        r.viewers,
        r.per_cpu,
        100.0 * busy,
        100.0 * idle,
        100.0 * (busy - idle)
    );
    Ok(())
}
