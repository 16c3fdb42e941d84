//! `GET /api/v1/profile?seconds=N&event=E&by=pod|cgroup|process&pod=..|cgroup=..|process=..`:
//! a gzipped pprof profile of call stacks, taken by the application's
//! [`Profiler`] on a blocking thread. One profile at a time per exporter:
//! another request meanwhile gets 429 with `Retry-After` (the seconds
//! left of the one running). Authenticated like `/metrics` (the route
//! comes after the same admission).

use crate::engine::sample::{By, ProfileFilter};
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
}

/// Takes profiles (the application's; blocking).
pub trait Profiler: Send + Sync + std::fmt::Debug {
    /// Samples as asked and returns the gzipped pprof profile, or why not.
    fn profile(&self, req: &ProfileRequest) -> Result<Vec<u8>, String>;
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
        (None, Some(c), None) if by == By::Cgroup => ProfileFilter::Name(c),
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
    Ok(ProfileRequest {
        duration: Duration::from_secs(seconds),
        event,
        freq,
        by,
        filter,
    })
}

/// Takes the profile a query asks for, unless one is running.
pub(super) async fn handle(slot: &Slot, query: Option<&str>) -> Result<Vec<u8>, Refused> {
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
    let r = tokio::task::spawn_blocking(move || p.profile(&req)).await;
    *crate::bounded::lock(&slot.busy_until) = None;
    match r {
        Ok(Ok(gz)) => Ok(gz),
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
        ] {
            assert!(parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[derive(Debug)]
    struct Slow;
    impl Profiler for Slow {
        fn profile(&self, _: &ProfileRequest) -> Result<Vec<u8>, String> {
            std::thread::sleep(Duration::from_millis(300));
            Ok(vec![1])
        }
    }

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
            assert_eq!(first.await.unwrap(), Ok(vec![1]));
            assert_eq!(handle(&slot, Some("seconds=1")).await, Ok(vec![1]));
        });
    }
}
