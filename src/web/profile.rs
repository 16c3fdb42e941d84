//! `GET /api/v1/profile?seconds=N&event=E&by=pod|cgroup|process&pod=..|cgroup=..|process=..[&format=pprof|json]`:
//! a gzipped pprof profile of call stacks (or, with `format=json`, the
//! flame graph's tree the live page draws: [`crate::export::flame`]),
//! taken by the application's [`Profiler`] on a blocking thread. One profile at a time per exporter:
//! another request meanwhile gets 429 with `Retry-After` (the seconds
//! left of the one running). Authenticated like `/metrics` (the route
//! comes after the same admission).

use crate::engine::sample::{By, ProfileFilter, ProfileSample};
use crate::export::{flame, pprof};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The longest profile asked (`seconds`).
pub const MAX_PROFILE_SECS: u64 = 60;
/// `seconds` when not given.
pub const DEFAULT_PROFILE_SECS: u64 = 10;
/// The highest sampling frequency asked (`hz`).
pub const MAX_PROFILE_HZ: u64 = 1000;

/// What a profile request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileRequest {
    /// How long to sample.
    pub duration: Duration,
    /// The event (`None`: `cycles`, falling back to `cpu-clock`).
    pub event: Option<String>,
    /// Samples per second per CPU.
    pub freq: u64,
    /// The label samples go under.
    pub by: By,
    /// Which samples are kept.
    pub filter: ProfileFilter,
    /// What the answer is written as.
    pub format: ProfileFormat,
}

/// What a profile is answered as (`format=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProfileFormat {
    /// A gzipped pprof profile (`application/octet-stream`).
    #[default]
    Pprof,
    /// The flame graph's tree ([`flame`], `application/json`).
    Json,
}

impl ProfileFormat {
    /// The answer's content type.
    pub(super) fn content_type(self) -> &'static str {
        match self {
            ProfileFormat::Pprof => "application/octet-stream",
            ProfileFormat::Json => "application/json",
        }
    }

    /// `samples` written in this format.
    fn write(self, meta: &pprof::Meta, samples: &[ProfileSample]) -> Result<Vec<u8>, String> {
        match self {
            ProfileFormat::Pprof => pprof::encode(meta, samples).map_err(|e| e.to_string()),
            ProfileFormat::Json => Ok(flame::json(meta, samples)),
        }
    }
}

/// Takes profiles (the application's; blocking).
pub trait Profiler: Send + Sync + std::fmt::Debug {
    /// Samples as asked and returns the samples and what they were taken
    /// of, or why not.
    fn profile(&self, req: &ProfileRequest) -> Result<(pprof::Meta, Vec<ProfileSample>), String>;
}

/// The profiler and the one profile in flight.
#[derive(Debug, Default)]
pub(super) struct Slot {
    profiler: OnceLock<Arc<dyn Profiler>>,
    /// When the profile in flight ends.
    busy_until: Mutex<Option<Instant>>,
}

impl Slot {
    pub(super) fn set(&self, p: Arc<dyn Profiler>) {
        let _ = self.profiler.set(p);
    }
}

/// Why a profile request is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// Another profile runs: retry after this long.
    Busy(Duration),
    /// 400 (a bad query), 404 (no profiler), 500 (sampling failed).
    Status(hyper::StatusCode, String),
}

fn bad(msg: String) -> Refused {
    Refused::Status(hyper::StatusCode::BAD_REQUEST, format!("{msg}\n"))
}

/// The request of a query.
pub(super) fn parse(query: Option<&str>) -> Result<ProfileRequest, String> {
    use super::stream::param;
    let num = |name: &str, default: u64, max: u64| -> Result<u64, String> {
        match param(query, name)? {
            None => Ok(default),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(format!("`{name}={v}`: a whole number from 1 to {max}")),
            },
        }
    };
    let seconds = num("seconds", DEFAULT_PROFILE_SECS, MAX_PROFILE_SECS)?;
    let freq = num("hz", 99, MAX_PROFILE_HZ)?;
    let (pod, cgroup, process) = (
        param(query, "pod")?,
        param(query, "cgroup")?,
        param(query, "process")?,
    );
    let by = match param(query, "by")?.as_deref() {
        Some("pod") => By::Pod,
        Some("cgroup") => By::Cgroup,
        Some("process") => By::Process,
        Some(other) => return Err(format!("`by={other}`: pod, cgroup or process")),
        None if pod.is_some() => By::Pod,
        None if cgroup.is_some() => By::Cgroup,
        None => By::Process,
    };
    let filter = match (pod, cgroup, process) {
        (None, None, None) => ProfileFilter::All,
        (Some(p), None, None) if by == By::Pod => ProfileFilter::Name(p),
        // A path from the cgroupfs root, with or without its leading `/`
        // (the `cgroup` label of the metrics has none).
        (None, Some(c), None) if by == By::Cgroup => {
            ProfileFilter::Name(format!("/{}", c.trim_start_matches('/')))
        }
        (None, None, Some(p)) => match p.parse::<u32>() {
            Ok(pid) => ProfileFilter::Pid(pid),
            Err(_) if by == By::Process => ProfileFilter::Name(p),
            Err(_) => return Err(format!("`process={p}`: a pid (or a name with by=process)")),
        },
        _ => {
            return Err(
                "one of pod= (with by=pod), cgroup= (with by=cgroup) or process= at most".into(),
            )
        }
    };
    let event = param(query, "event")?.filter(|e| !e.is_empty());
    let format = match param(query, "format")?.as_deref() {
        None | Some("pprof") => ProfileFormat::Pprof,
        Some("json") => ProfileFormat::Json,
        Some(other) => return Err(format!("`format={other}`: pprof or json")),
    };
    Ok(ProfileRequest {
        duration: Duration::from_secs(seconds),
        event,
        freq,
        by,
        filter,
        format,
    })
}

/// Takes the profile a query asks for, unless one is running: its
/// content type and bytes.
pub(super) async fn handle(
    slot: &Slot,
    query: Option<&str>,
) -> Result<(&'static str, Vec<u8>), Refused> {
    let req = parse(query).map_err(bad)?;
    let Some(p) = slot.profiler.get().cloned() else {
        return Err(Refused::Status(
            hyper::StatusCode::NOT_FOUND,
            "profiles need the live kernel (not a fixture tree)\n".into(),
        ));
    };
    {
        let mut busy = crate::bounded::lock(&slot.busy_until);
        let now = Instant::now();
        if let Some(until) = *busy {
            return Err(Refused::Busy(
                until
                    .saturating_duration_since(now)
                    .max(Duration::from_secs(1)),
            ));
        }
        *busy = Some(now + req.duration);
    }
    let format = req.format;
    let r = tokio::task::spawn_blocking(move || {
        p.profile(&req)
            .and_then(|(meta, samples)| format.write(&meta, &samples))
    })
    .await;
    *crate::bounded::lock(&slot.busy_until) = None;
    match r {
        Ok(Ok(body)) => Ok((format.content_type(), body)),
        Ok(Err(e)) => Err(Refused::Status(
            hyper::StatusCode::INTERNAL_SERVER_ERROR,
            format!("profile failed: {e}\n"),
        )),
        Err(_) => Err(Refused::Status(
            hyper::StatusCode::INTERNAL_SERVER_ERROR,
            "profile failed\n".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries() {
        let r = parse(Some("seconds=3&pod=abc-123")).unwrap();
        assert_eq!(
            (r.duration, r.by, r.filter, r.freq),
            (
                Duration::from_secs(3),
                By::Pod,
                ProfileFilter::Name("abc-123".into()),
                99
            )
        );
        let r = parse(Some("by=cgroup&cgroup=%2Fa%2Fb&event=cpu-clock")).unwrap();
        assert_eq!(r.filter, ProfileFilter::Name("/a/b".into()));
        assert_eq!(r.event.as_deref(), Some("cpu-clock"));
        assert_eq!(r.format, ProfileFormat::Pprof);
        // The metrics' label (no leading `/`) names the same cgroup.
        let r = parse(Some("cgroup=a%2Fb&format=json")).unwrap();
        assert_eq!(r.filter, ProfileFilter::Name("/a/b".into()));
        assert_eq!(r.format, ProfileFormat::Json);
        assert_eq!(
            parse(Some("process=42")).unwrap().filter,
            ProfileFilter::Pid(42)
        );
        assert_eq!(parse(None).unwrap().duration, Duration::from_secs(10));
        for bad in [
            "seconds=0",
            "seconds=61",
            "seconds=x",
            "by=thread",
            "by=process&pod=x",
            "pod=a&cgroup=b",
            "by=pod&process=name",
            "hz=100000",
            "format=svg",
        ] {
            assert!(parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[derive(Debug)]
    struct Slow;
    impl Profiler for Slow {
        fn profile(&self, _: &ProfileRequest) -> Result<(pprof::Meta, Vec<ProfileSample>), String> {
            std::thread::sleep(Duration::from_millis(300));
            let meta = pprof::Meta {
                event: "cpu-clock".into(),
                label: "pod_uid",
                start: std::time::SystemTime::UNIX_EPOCH,
                duration: Duration::from_secs(1),
                comments: Vec::new(),
            };
            Ok((meta, Vec::new()))
        }
    }

    /// The flame graph of [`Slow`]'s empty profile.
    const EMPTY: &str = concat!(
        r#"{"event":"cpu-clock","unit":"nanoseconds","label":"pod_uid","seconds":1.0,"#,
        r#""notes":[],"frames_left_out":0,"#,
        r#""root":{"name":"all","kind":"root","samples":0,"events":0,"children":[]}}"#
    );

    #[test]
    fn one_profile_at_a_time() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let slot = Arc::new(Slot::default());
            assert!(matches!(
                handle(&slot, None).await,
                Err(Refused::Status(hyper::StatusCode::NOT_FOUND, _))
            ));
            slot.set(Arc::new(Slow));
            let s2 = slot.clone();
            let first = tokio::spawn(async move { handle(&s2, Some("seconds=5")).await });
            // The first holds the slot until it returns.
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                if crate::bounded::lock(&slot.busy_until).is_some() {
                    break;
                }
                assert!(Instant::now() < deadline);
                tokio::task::yield_now().await;
            }
            let second = handle(&slot, Some("seconds=1")).await;
            assert!(matches!(second, Err(Refused::Busy(d)) if d >= Duration::from_secs(1)));
            let (ctype, gz) = first.await.unwrap().unwrap();
            assert_eq!(ctype, "application/octet-stream");
            assert_eq!(&gz[..2], [0x1f, 0x8b], "gzip");
            assert_eq!(
                handle(&slot, Some("seconds=1&format=json")).await,
                Ok(("application/json", EMPTY.as_bytes().to_vec()))
            );
        });
    }
}
