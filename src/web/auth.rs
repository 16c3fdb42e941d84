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

use base64::Engine as _;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Successful verifications kept at most (the least recently used goes).
const SUCCESS_MAX: usize = 1024;
/// Failed verifications kept at most (then that cache starts over).
const FAILURE_MAX: usize = 1024;

/// Credentials from an `Authorization: Basic ...` header.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
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
pub fn parse_basic(header: &str) -> Option<Credentials> {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The users of a web config and the verification cache.
#[derive(Debug)]
pub struct BasicAuth {
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
    pub fn new(users: &BTreeMap<String, String>) -> Option<Self> {
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
    pub fn cached(&self, c: &Credentials) -> Option<bool> {
        lock(&self.cache).get(&self.key(c))
    }

    /// Verifies with bcrypt and caches the verdict. Blocking and slow:
    /// run it off the async thread.
    pub fn verify(&self, c: &Credentials) -> bool {
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

/// `rate_limit`: a token bucket holding up to `burst` requests, refilled
/// by one every `interval`.
#[derive(Debug)]
pub struct RateLimiter {
    interval: Duration,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// A full bucket.
    pub fn new(interval: Duration, burst: u32) -> Self {
        RateLimiter {
            interval,
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Takes a token if there is one.
    pub fn allow(&self) -> bool {
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
    fn token_bucket() {
        let r = RateLimiter::new(Duration::from_secs(3600), 2);
        assert!(r.allow());
        assert!(r.allow());
        assert!(!r.allow());
    }
}
