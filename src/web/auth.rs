//! HTTP basic authentication against the bcrypt hashes of the web config
//! (`basic_auth_users`), and the `rate_limit` token bucket.
//!
//! bcrypt is slow on purpose (cost 10 is tens of milliseconds), so, as in
//! exporter-toolkit: a verification result is cached, keyed by a SHA-256
//! of user, hash and password (never the password itself); only one
//! verification runs at a time; and an unknown user is checked against a
//! dummy hash of the highest cost in use (made when the web config is
//! loaded), so response times do not reveal which users exist.
//!
//! Successes and failures are cached apart: successes in a
//! least-recently-used cache that is never cleared wholesale, failures in
//! their own, so a flood of distinct wrong passwords cannot evict the
//! verdicts of legitimate clients (issue 11).
//!
//! Failed logins back a client off ([`Backoff`]): after
//! [`FREE_FAILURES`] failures from one address, each further failure
//! refuses every request from it (429 with `Retry-After`) for a time that
//! doubles from one second up to [`MAX_DELAY`]; a success forgets the
//! client. The table of clients is bounded (the least recently seen goes).
//! A client refused because the verification queue was full (503) is
//! refused for the `Retry-After` it was given, with no failure counted.

use crate::bounded::lock;
use base64::Engine as _;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Successful verifications kept at most (the least recently used goes).
const SUCCESS_MAX: usize = 1024;
/// Failed verifications kept at most (then that cache starts over).
const FAILURE_MAX: usize = 1024;

/// Credentials from an `Authorization: Basic ...` header.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Credentials {
    /// The user.
    pub user: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Parses an `Authorization` header value of the Basic scheme; `None`
/// for any other scheme or a malformed value.
pub(super) fn parse_basic(header: &str) -> Option<Credentials> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (user, password) = text.split_once(':')?;
    Some(Credentials {
        user: user.to_string(),
        password: password.to_string(),
    })
}

/// The users of a web config and the verification cache.
#[derive(Debug)]
pub(super) struct BasicAuth {
    users: BTreeMap<String, String>,
    cache: Mutex<Verdicts>,
    /// One bcrypt at a time (it is CPU-bound).
    bcrypt: Mutex<()>,
    /// A hash of the users' highest cost, for unknown users.
    dummy: String,
}

/// The verification caches.
#[derive(Debug, Default)]
struct Verdicts {
    /// Successes, with when each was last used (a tick).
    ok: HashMap<[u8; 32], u64>,
    tick: u64,
    failed: HashSet<[u8; 32]>,
}

impl Verdicts {
    fn get(&mut self, key: &[u8; 32]) -> Option<bool> {
        self.tick += 1;
        if let Some(t) = self.ok.get_mut(key) {
            *t = self.tick;
            return Some(true);
        }
        self.failed.contains(key).then_some(false)
    }

    fn insert(&mut self, key: [u8; 32], ok: bool) {
        self.tick += 1;
        if ok {
            if self.ok.len() >= SUCCESS_MAX {
                if let Some(oldest) = self.ok.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k) {
                    self.ok.remove(&oldest);
                }
            }
            self.ok.insert(key, self.tick);
        } else {
            if self.failed.len() >= FAILURE_MAX {
                self.failed.clear();
            }
            self.failed.insert(key);
        }
    }
}

impl BasicAuth {
    /// Auth for `users` (user -> bcrypt hash); `None` when there are none.
    pub(super) fn new(users: &BTreeMap<String, String>) -> Option<Self> {
        if users.is_empty() {
            return None;
        }
        let cost = users
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        Some(BasicAuth {
            users: users.clone(),
            cache: Mutex::new(Verdicts::default()),
            bcrypt: Mutex::new(()),
            dummy: bcrypt::hash("perf-exporter: no such user", cost).unwrap_or_default(),
        })
    }

    fn key(&self, c: &Credentials) -> [u8; 32] {
        let hash = self.users.get(&c.user).map_or("", String::as_str);
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for part in [c.user.as_bytes(), hash.as_bytes(), c.password.as_bytes()] {
            ctx.update(&(part.len() as u64).to_le_bytes());
            ctx.update(part);
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        out
    }

    /// The cached verdict for these credentials, if any (cheap: call it
    /// on the async thread before [`verify`](Self::verify)).
    pub(super) fn cached(&self, c: &Credentials) -> Option<bool> {
        lock(&self.cache).get(&self.key(c))
    }

    /// Verifies with bcrypt and caches the verdict. Blocking and slow:
    /// run it off the async thread.
    pub(super) fn verify(&self, c: &Credentials) -> bool {
        let key = self.key(c);
        if let Some(v) = lock(&self.cache).get(&key) {
            return v;
        }
        let known = self.users.get(&c.user);
        let ok = {
            let _one = lock(&self.bcrypt);
            match known {
                Some(hash) => bcrypt::verify(&c.password, hash).unwrap_or(false),
                None => {
                    let _ = bcrypt::verify(&c.password, &self.dummy);
                    false
                }
            }
        };
        lock(&self.cache).insert(key, ok);
        ok
    }
}

/// Failed logins a client may make before it is backed off.
pub(super) const FREE_FAILURES: u32 = 5;
/// The first back-off, doubled by each further failure.
const FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest back-off.
pub(super) const MAX_DELAY: Duration = Duration::from_secs(60);
/// A client's failures are forgotten after this long without one.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Clients tracked at most (about 64 bytes each).
pub(super) const CLIENTS_MAX: usize = 4096;

/// Per-client back-off after failed logins, keyed by the client's address
/// (an IPv6 client by its /64, which one host usually holds whole).
#[derive(Debug, Default)]
pub(super) struct Backoff {
    clients: Mutex<Clients>,
}

#[derive(Debug, Default)]
struct Clients {
    by_addr: HashMap<IpAddr, Client>,
    tick: u64,
}

#[derive(Debug, Clone, Copy)]
struct Client {
    failures: u32,
    last_failure: Instant,
    /// Refused until then.
    until: Option<Instant>,
    /// When last seen (a tick), for eviction.
    seen: u64,
}

impl Clients {
    /// `key`'s entry, made if new (evicting the least recently seen at
    /// [`CLIENTS_MAX`]), marked as seen now.
    fn entry(&mut self, key: IpAddr, now: Instant) -> &mut Client {
        self.tick += 1;
        let tick = self.tick;
        if !self.by_addr.contains_key(&key) && self.by_addr.len() >= CLIENTS_MAX {
            let oldest = self
                .by_addr
                .iter()
                .min_by_key(|(_, v)| v.seen)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.by_addr.remove(&k);
            }
        }
        let e = self.by_addr.entry(key).or_insert(Client {
            failures: 0,
            last_failure: now,
            until: None,
            seen: tick,
        });
        e.seen = tick;
        e
    }
}

/// The key of a client: its IPv4 address (also when IPv4-mapped), or the
/// /64 of its IPv6 address.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        },
    }
}

impl Backoff {
    /// How long `ip` must still wait, if it is backed off.
    pub(super) fn retry_after(&self, ip: IpAddr) -> Option<Duration> {
        self.retry_after_at(ip, Instant::now())
    }

    fn retry_after_at(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let c = lock(&self.clients);
        let until = c.by_addr.get(&client_key(ip))?.until?;
        (until > now).then(|| until - now)
    }

    /// Records a failed login from `ip`.
    pub(super) fn failed(&self, ip: IpAddr) {
        self.failed_at(ip, Instant::now());
    }

    fn failed_at(&self, ip: IpAddr, now: Instant) {
        let mut c = lock(&self.clients);
        let e = c.entry(client_key(ip), now);
        if now.duration_since(e.last_failure) > FORGET_AFTER {
            e.failures = 0;
        }
        e.failures = e.failures.saturating_add(1);
        e.last_failure = now;
        if e.failures >= FREE_FAILURES {
            let doublings = (e.failures - FREE_FAILURES).min(16);
            e.until = Some(now + (FIRST_DELAY * (1 << doublings)).min(MAX_DELAY));
        }
    }

    /// Refuses `ip` for `wait` (unless it already is for longer), without
    /// counting a failure: it was told to come back later (`Retry-After`)
    /// because its credentials could not be verified yet.
    pub(super) fn told_to_wait(&self, ip: IpAddr, wait: Duration) {
        self.told_to_wait_at(ip, wait, Instant::now());
    }

    fn told_to_wait_at(&self, ip: IpAddr, wait: Duration, now: Instant) {
        let mut c = lock(&self.clients);
        let e = c.entry(client_key(ip), now);
        let until = now + wait;
        e.until = Some(e.until.map_or(until, |u| u.max(until)));
    }

    /// Forgets `ip`'s failures after a successful login.
    pub(super) fn succeeded(&self, ip: IpAddr) {
        lock(&self.clients).by_addr.remove(&client_key(ip));
    }
}

/// `rate_limit`: a token bucket holding up to `burst` requests, refilled
/// by one every `interval`.
#[derive(Debug)]
pub(super) struct RateLimiter {
    interval: Duration,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// A full bucket.
    pub(super) fn new(interval: Duration, burst: u32) -> Self {
        RateLimiter {
            interval,
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Takes a token if there is one.
    pub(super) fn allow(&self) -> bool {
        let mut s = lock(&self.state);
        let now = Instant::now();
        let refill = now.duration_since(s.1).as_secs_f64() / self.interval.as_secs_f64().max(1e-9);
        s.0 = (s.0 + refill).min(self.burst);
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_header() {
        let c = parse_basic("Basic YWxpY2U6c2VjcmV0OmNvbG9u").unwrap();
        assert_eq!(c.user, "alice");
        assert_eq!(c.password, "secret:colon");
        assert!(parse_basic("basic YWxpY2U6").is_some());
        assert!(parse_basic("Bearer abc").is_none());
        assert!(parse_basic("Basic !!!").is_none());
        assert!(parse_basic("Basic YWxpY2U=").is_none()); // no colon
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn verifies_and_caches() {
        let hash = bcrypt::hash("pw", 4).unwrap();
        let users = BTreeMap::from([("alice".to_string(), hash)]);
        let a = BasicAuth::new(&users).unwrap();
        let good = Credentials {
            user: "alice".into(),
            password: "pw".into(),
        };
        let bad = Credentials {
            user: "alice".into(),
            password: "nope".into(),
        };
        let nobody = Credentials {
            user: "bob".into(),
            password: "pw".into(),
        };
        assert_eq!(a.cached(&good), None);
        assert!(a.verify(&good));
        assert_eq!(a.cached(&good), Some(true));
        assert!(!a.verify(&bad));
        assert!(!a.verify(&nobody));
        assert_eq!(a.cached(&nobody), Some(false));
        assert!(BasicAuth::new(&BTreeMap::new()).is_none());
    }

    /// Issue 11: 1,030 distinct wrong passwords evicted every legitimate
    /// verdict.
    #[test]
    fn failures_never_evict_successes() {
        let mut v = Verdicts::default();
        let key = |i: u32| {
            let mut k = [0u8; 32];
            k[..4].copy_from_slice(&i.to_le_bytes());
            k
        };
        v.insert(key(0), true);
        for i in 1..5000 {
            v.insert(key(i), false);
        }
        assert_eq!(v.get(&key(0)), Some(true));
        // Successes go least recently used first.
        for i in 10_000..10_000 + SUCCESS_MAX as u32 - 1 {
            v.insert(key(i), true);
        }
        assert_eq!(v.get(&key(0)), Some(true)); // used: now the newest
        v.insert(key(99_999), true);
        assert_eq!(v.get(&key(0)), Some(true));
        assert_eq!(v.get(&key(10_000)), None);
        assert_eq!(v.ok.len(), SUCCESS_MAX);
    }

    #[test]
    fn failures_back_a_client_off_and_a_success_forgets_it() {
        let b = Backoff::default();
        let (a, other): (IpAddr, IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES - 1 {
            b.failed_at(a, t0);
        }
        assert_eq!(b.retry_after_at(a, t0), None);
        b.failed_at(a, t0);
        assert_eq!(b.retry_after_at(a, t0), Some(FIRST_DELAY));
        assert_eq!(b.retry_after_at(other, t0), None);
        // Each further failure doubles the wait, up to the cap.
        b.failed_at(a, t0);
        assert_eq!(b.retry_after_at(a, t0), Some(2 * FIRST_DELAY));
        for _ in 0..40 {
            b.failed_at(a, t0);
        }
        assert_eq!(b.retry_after_at(a, t0), Some(MAX_DELAY));
        assert_eq!(b.retry_after_at(a, t0 + MAX_DELAY), None);
        // Long after, the failures are forgotten.
        let later = t0 + FORGET_AFTER + Duration::from_secs(1);
        b.failed_at(a, later);
        assert_eq!(b.retry_after_at(a, later), None);
        b.succeeded(a);
        assert!(lock(&b.clients).by_addr.is_empty());
        // An IPv6 host is one client across its /64; IPv4-mapped is IPv4.
        let v6 = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            client_key(v6("2001:db8::1")),
            client_key(v6("2001:db8::ffff:2"))
        );
        assert_ne!(
            client_key(v6("2001:db8::1")),
            client_key(v6("2001:db8:0:1::1"))
        );
        assert_eq!(client_key(v6("::ffff:10.0.0.1")), a);
    }

    /// Issue 28: a client refused for a full bcrypt queue waits as told,
    /// without a failure counted against it.
    #[test]
    fn told_to_wait_refuses_until_then_and_counts_no_failure() {
        let b = Backoff::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let t0 = Instant::now();
        b.told_to_wait_at(a, Duration::from_secs(3), t0);
        assert_eq!(b.retry_after_at(a, t0), Some(Duration::from_secs(3)));
        // A shorter wait does not cut a longer one.
        b.told_to_wait_at(a, Duration::from_secs(1), t0);
        assert_eq!(b.retry_after_at(a, t0), Some(Duration::from_secs(3)));
        assert_eq!(b.retry_after_at(a, t0 + Duration::from_secs(3)), None);
        assert_eq!(lock(&b.clients).by_addr[&a].failures, 0);
        // Its free failures are all still there.
        let later = t0 + Duration::from_secs(3);
        for _ in 0..FREE_FAILURES - 1 {
            b.failed_at(a, later);
        }
        assert_eq!(b.retry_after_at(a, later), None);
    }

    #[test]
    fn the_client_table_is_bounded() {
        let b = Backoff::default();
        let t0 = Instant::now();
        let ip = |i: u32| IpAddr::V4(std::net::Ipv4Addr::from(i));
        for _ in 0..FREE_FAILURES {
            b.failed_at(ip(0), t0);
        }
        for i in 1..=CLIENTS_MAX as u32 {
            b.failed_at(ip(i), t0);
        }
        let c = lock(&b.clients);
        assert_eq!(c.by_addr.len(), CLIENTS_MAX);
        // The least recently seen went, not the table.
        assert!(!c.by_addr.contains_key(&ip(0)));
        assert!(c.by_addr.contains_key(&ip(CLIENTS_MAX as u32)));
    }

    #[test]
    fn token_bucket() {
        let r = RateLimiter::new(Duration::from_secs(3600), 2);
        assert!(r.allow());
        assert!(r.allow());
        assert!(!r.allow());
    }
}
