//! The live view's data: `/api/v1/snapshot` (one frame) and the WebSocket
//! `/api/v1/stream?interval=1s` (a frame per interval), both built by
//! [`crate::export::live`] from the shared collection.
//!
//! **One collection for every viewer.** A [`Hub`] ticks once a second
//! while any stream is open. At each tick it works out which of the
//! intervals in use are due, and if any is, collects once through
//! [`State::shared_collect`] (which a `/metrics` scrape in flight joins
//! too): N viewers on M intervals cost one `read()` per group per tick.
//! Each interval (and per-CPU detail: `per_cpu=0`, `1` or `all`)
//! keeps its previous collection and its [`live::Framer`]; its frame is
//! built and encoded once per interval, on the ticker, and the one buffer
//! is broadcast to all its viewers (each gets a reference to the same
//! bytes, [`Utf8Bytes`]; nothing is encoded or copied per viewer before
//! the socket write).
//!
//! **Slow viewers are dropped.** A stream's socket has a send buffer of
//! its own bound (`SO_SNDBUF` [`SEND_BUFFER`], which Linux doubles: at
//! most 128 KiB of kernel memory per stream, where the kernel's
//! autotuning lets one grow to 4 MiB). Frames in flight (handed to the
//! stream, not yet written into that buffer: those queued in its
//! interval's broadcast channel plus the one being written) are counted,
//! and a viewer with more than [`QUEUE`] of them is closed (1008, "too
//! slow"). A viewer that stops reading altogether is found sooner: the
//! server pings every interval (a nonce and a sequence number, see
//! `stream_ws`) and closes a viewer that has echoed none for [`liveness`]
//! of the interval; a write that stays blocked that long ends the viewer
//! too. Each close is counted in `perf_live_streams_closed_total` by
//! reason ([`super::CLOSE_REASONS`]). Nothing is buffered without bound.
//!
//! The WebSocket protocol is tokio-tungstenite's: it is the WebSocket crate
//! most of the tokio ecosystem uses, it runs on any `AsyncRead +
//! AsyncWrite` (hyper 1's upgraded connection, through TLS or not), and
//! the tests' client is the same crate. The upgrade itself is hyper's, so
//! the routing in front of it (rate limit, basic auth, TLS) is the one
//! every other page goes through.

use super::State;
use crate::bounded::lock;
use crate::config::derived::DerivedTable;
use crate::export::live::{self, PerCpuDetail, Reasons};
use crate::snapshot::Family;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// Frames a viewer may have in flight (queued for it, or being written to
/// its socket) before it is dropped.
pub(super) const QUEUE: usize = 4;
/// `SO_SNDBUF` of a stream's socket (Linux doubles it: 128 KiB of kernel
/// memory per stream at most). A frame is 3 to 90 KB at 512 CPUs
/// (`per_cpu=0` to `all`), once a second at most.
pub(super) const SEND_BUFFER: usize = 64 * 1024;
/// Distinct `interval` and `per_cpu` pairs streamed at once: each keeps
/// its previous collection and its framer (at 20,000 series, about
/// 0.4 MB each); a stream asking for another gets 503 naming those in
/// use. A pair no stream uses any more is forgotten.
pub(super) const MAX_CHANNELS: usize = 8;
/// The longest interval of a stream.
const MAX_INTERVAL_SECS: u64 = 60;
/// The longest interval of a snapshot: the request is held that long,
/// under its own small bound ([`super::MAX_SNAPSHOTS`]); for longer
/// windows, the stream.
pub(super) const MAX_SNAPSHOT_SECS: u64 = 10;

/// How long a viewer may show no sign of life (or a write may block):
/// three intervals, and at least five seconds.
pub(super) fn liveness(interval: Duration) -> Duration {
    (interval * 3).max(Duration::from_secs(5))
}

/// Parses `interval=` of the query (default 1s): whole seconds from 1s
/// to 60s, in the duration syntax of the flags.
pub(super) fn interval(query: Option<&str>) -> Result<Duration, String> {
    interval_upto(query, MAX_INTERVAL_SECS)
}

/// [`interval`], up to `max_secs`.
pub(super) fn interval_upto(query: Option<&str>, max_secs: u64) -> Result<Duration, String> {
    let Some(v) = param(query, "interval")? else {
        return Ok(Duration::from_secs(1));
    };
    let v = v.as_str();
    let allowed = format!(
        "interval must be a whole number of seconds from 1s to {max_secs}s, e.g. interval=1s, interval=5s"
    );
    let d = crate::duration::parse(v).map_err(|e| format!("interval=`{v}`: {e}; {allowed}"))?;
    if d.subsec_nanos() != 0 || d.as_secs() == 0 || d.as_secs() > max_secs {
        return Err(format!("interval=`{v}`: {allowed}"));
    }
    Ok(d)
}

/// Parses `per_cpu=` of the query ([`PerCpuDetail`]; by default the
/// inputs of the per-CPU derived values).
pub(super) fn per_cpu(query: Option<&str>) -> Result<PerCpuDetail, String> {
    param(query, "per_cpu")?
        .as_deref()
        .map_or(Ok(PerCpuDetail::default()), PerCpuDetail::parse)
}

/// The value of `name=` in the query (the first), percent-decoded (and
/// `+` a space, as browsers encode forms); pairs without `=` are ignored.
pub(super) fn param(query: Option<&str>, name: &str) -> Result<Option<String>, String> {
    for kv in query.unwrap_or("").split('&') {
        if let Some((k, v)) = kv.split_once('=') {
            if percent_decode(k)? == name {
                return percent_decode(v).map(Some);
            }
        }
    }
    Ok(None)
}

/// `%XX` and `+` decoded; the result must be UTF-8.
fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
                let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) else {
                    return Err(format!("`{s}`: `%` must be followed by two hex digits"));
                };
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` is not UTF-8 once percent-decoded"))
}

/// `per_cpu=` as a query says it.
fn detail_name(d: PerCpuDetail) -> &'static str {
    match d {
        PerCpuDetail::Off => "0",
        PerCpuDetail::Derived => "1",
        PerCpuDetail::All => "all",
    }
}

/// What a viewer asked for: the interval in seconds, and the per-CPU
/// detail. Viewers that ask the same share the encoded frames.
type Key = (u64, PerCpuDetail);

/// A collection, and when it began.
#[derive(Clone)]
struct Point {
    at: Instant,
    families: Arc<Vec<Family>>,
}

/// One interval's viewers, its previous collection, and what builds its
/// frames.
struct Channel {
    tx: broadcast::Sender<Utf8Bytes>,
    prev: Option<Point>,
    framer: live::Framer,
    /// A viewer subscribed since the last frame was sent: the next frame
    /// carries `unavailable` even if it did not change.
    joined: bool,
}

/// The intervals in use, and whether the ticker runs.
#[derive(Default)]
struct Inner {
    channels: BTreeMap<Key, Channel>,
    ticking: bool,
}

/// Shares collections between every open stream (module docs).
#[derive(Default)]
pub(super) struct Hub {
    inner: Mutex<Inner>,
    /// Collections made for streams (for tests of the sharing).
    pub(super) collections: std::sync::atomic::AtomicU64,
    /// Streams the server closed, by [`super::CLOSE_REASONS`].
    pub(super) closed: [std::sync::atomic::AtomicU64; 4],
    /// The [`live::Framer`] of the last `/api/v1/snapshot`, for the next
    /// one: it knows the series' CPUs, so that a snapshot does not learn
    /// them again (about 0.5 ms at 512 CPUs).
    snapshots: Mutex<Option<live::Framer>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl State {
    /// Subscribes to the frames of `interval` (with the per-CPU detail
    /// `per_cpu`), starting the ticker if it does not run; refused (with
    /// why) when [`MAX_CHANNELS`] other pairs are streamed.
    pub(super) fn subscribe(
        self: &Arc<Self>,
        interval: Duration,
        per_cpu: PerCpuDetail,
    ) -> Result<broadcast::Receiver<Utf8Bytes>, String> {
        let mut g = lock(&self.hub.inner);
        let key = (interval.as_secs(), per_cpu);
        // Pairs whose last viewer left (the ticker forgets them too).
        g.channels.retain(|_, c| c.tx.receiver_count() > 0);
        if !g.channels.contains_key(&key) && g.channels.len() >= MAX_CHANNELS {
            let in_use: Vec<String> = g
                .channels
                .keys()
                .map(|(secs, d)| format!("interval={secs}s&per_cpu={}", detail_name(*d)))
                .collect();
            return Err(format!(
                "Limit of distinct stream intervals reached ({MAX_CHANNELS} pairs of interval and per_cpu streamed at once), try again later or use one in use: {}\n",
                in_use.join(", ")
            ));
        }
        let ch = g.channels.entry(key).or_insert_with(|| Channel {
            tx: broadcast::channel(QUEUE).0,
            prev: None,
            framer: live::Framer::default(),
            joined: false,
        });
        // Under the lock the ticker sends under: this viewer's first frame
        // is the next one sent, and it is full.
        ch.joined = true;
        let rx = ch.tx.subscribe();
        if !g.ticking {
            g.ticking = true;
            let st = self.clone();
            tokio::spawn(async move { st.tick().await });
        }
        Ok(rx)
    }

    /// Ticks once a second until no stream is left.
    async fn tick(self: Arc<Self>) {
        let mut t = tokio::time::interval(Duration::from_secs(1));
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n: u64 = 0;
        loop {
            t.tick().await;
            let due: Vec<Key> = {
                let mut g = lock(&self.hub.inner);
                g.channels.retain(|_, c| c.tx.receiver_count() > 0);
                if g.channels.is_empty() {
                    g.ticking = false;
                    return;
                }
                g.channels
                    .iter()
                    .filter(|((secs, _), c)| c.prev.is_none() || n.is_multiple_of(*secs))
                    .map(|(k, _)| *k)
                    .collect()
            };
            n += 1;
            if due.is_empty() {
                continue;
            }
            let got = tokio::time::timeout(self.request_timeout, self.shared_collect()).await;
            let Ok(Some(c)) = got else {
                tracing::warn!("live view: a collection failed or timed out; frames skipped");
                continue;
            };
            self.hub
                .collections
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let now = Point {
                at: c.at,
                families: c.full(),
            };
            let reasons = self.reasons();
            let derived = self.derived();
            let mut g = lock(&self.hub.inner);
            for k in due {
                let Some(ch) = g.channels.get_mut(&k) else {
                    continue;
                };
                if let Some(p) = ch.prev.replace(now.clone()) {
                    let f = frame(&mut ch.framer, &p, &now, &reasons, k.1, &derived);
                    let json = ch.framer.encode_stream(&f, ch.joined);
                    ch.joined = false;
                    let _ = ch.tx.send(json.into());
                }
            }
        }
    }

    /// Why each unavailable metric is unavailable, as the landing page
    /// says it.
    pub(super) fn reasons(&self) -> Reasons {
        super::landing::reasons(&lock(&self.engine))
    }

    /// The serving engine's derived metrics (the config's `derived:`).
    pub(super) fn derived(&self) -> Arc<DerivedTable> {
        lock(&self.engine).derived().clone()
    }

    /// `/api/v1/snapshot`: one frame over `interval` (with the per-CPU
    /// detail `per_cpu`), from two shared collections.
    pub(super) async fn one_frame(
        self: &Arc<Self>,
        interval: Duration,
        per_cpu: PerCpuDetail,
    ) -> Option<String> {
        let first = self.shared_collect().await?;
        tokio::time::sleep_until((first.at + interval).into()).await;
        let second = self.shared_collect().await?;
        let p = |c: &super::collect::Collected| Point {
            at: c.at,
            families: c.full(),
        };
        // (Concurrent snapshots: the others start a Framer of their own.)
        let mut framer = lock(&self.hub.snapshots).take().unwrap_or_default();
        let f = frame(
            &mut framer,
            &p(&first),
            &p(&second),
            &self.reasons(),
            per_cpu,
            &self.derived(),
        );
        let json = framer.encode(&f);
        *lock(&self.hub.snapshots) = Some(framer);
        Some(json)
    }
}

/// One frame, from `prev` to `cur`.
fn frame(
    framer: &mut live::Framer,
    prev: &Point,
    cur: &Point,
    reasons: &Reasons,
    per_cpu: PerCpuDetail,
    derived: &DerivedTable,
) -> live::Frame {
    let secs = cur.at.duration_since(prev.at).as_secs_f64();
    framer.frame(
        &prev.families,
        &cur.families,
        secs,
        reasons,
        per_cpu,
        derived,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(interval(None), Ok(Duration::from_secs(1)));
        assert_eq!(interval(Some("interval=5s")), Ok(Duration::from_secs(5)));
        assert_eq!(
            interval(Some("a=b&interval=1m")),
            Ok(Duration::from_secs(60))
        );
        for bad in [
            "interval=500ms",
            "interval=2m",
            "interval=0s",
            "interval=1.5s",
        ] {
            let e = interval(Some(bad)).unwrap_err();
            assert!(e.contains("whole number of seconds from 1s to 60s"), "{e}");
        }
        let e = interval_upto(Some("interval=1m"), MAX_SNAPSHOT_SECS).unwrap_err();
        assert!(e.contains("from 1s to 10s"), "{e}");
        let e = interval(Some("interval=fast")).unwrap_err();
        assert!(e.starts_with("interval=`fast`: "), "{e}");
    }

    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(interval(Some("interval=5%73")), Ok(Duration::from_secs(5)));
        assert_eq!(
            interval(Some("%69nterval=1%6D")),
            Ok(Duration::from_secs(60))
        );
        assert_eq!(per_cpu(Some("per_cpu=%61ll")), Ok(PerCpuDetail::All));
        assert_eq!(interval(Some("interval")), Ok(Duration::from_secs(1)));
        for bad in [
            "interval=5%7",
            "interval=%zz",
            "interval=%+1",
            "interval=%ff",
        ] {
            let e = interval(Some(bad)).unwrap_err();
            assert!(
                e.contains("hex digits") || e.contains("not UTF-8"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn per_cpu_is_in_by_default_and_all_on_request() {
        use PerCpuDetail::{All, Derived, Off};
        for (q, want) in [
            (None, Derived),
            (Some("interval=1s"), Derived),
            (Some("interval=1s&per_cpu=1"), Derived),
            (Some("per_cpu=true"), Derived),
            (Some("per_cpu=all&interval=5s"), All),
            (Some("per_cpu=0"), Off),
            (Some("interval=1s&per_cpu=false"), Off),
        ] {
            assert_eq!(per_cpu(q), Ok(want), "{q:?}");
        }
        let e = per_cpu(Some("interval=1s&per_cpu=yes")).unwrap_err();
        assert!(e.starts_with("per_cpu=`yes`: per_cpu is 0 ("), "{e}");
        assert!(e.contains(" or all ("), "{e}");
    }
}
