//! Routing: limits, rate limit and auth first, then the metric, landing,
//! health and lifecycle pages.

use super::auth::{parse_basic, MAX_DELAY};
use super::io::Body;
use super::scrape::Want;
use super::{
    landing, stream, stream_ws, Reject, State, WebRuntime, BCRYPT_QUEUE, MAX_BODY_BYTES,
    MAX_SNAPSHOTS,
};
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    HeaderValue, ACCEPT, ACCEPT_ENCODING, ALLOW, AUTHORIZATION, CONNECTION, CONTENT_ENCODING,
    CONTENT_TYPE, RETRY_AFTER, VARY,
};
use hyper::{Method, Request, Response, StatusCode};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;

fn respond(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Body::new(body));
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(ctype) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body)
}

/// Handles one request from `peer` and adds the web config's headers.
pub(super) async fn handle(st: Arc<State>, req: Request<Incoming>, peer: IpAddr) -> Response<Body> {
    let web = st.web();
    let mut resp = route(&st, &web, req, peer).await;
    for (k, v) in &web.config.headers {
        resp.headers_mut().insert(k.clone(), v.clone());
    }
    resp
}

/// What basic auth says of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Login {
    /// Authorized (or no auth configured).
    Ok,
    /// No Basic credentials.
    Missing,
    /// Wrong credentials (counted for the client's back-off).
    Wrong,
    /// Not verified: the bcrypt queue was full or the wait too long;
    /// try again after this long.
    Busy(Duration),
}

/// How long a client refused for a full bcrypt queue should wait: what
/// the queue takes to drain at the last verification's pace, from 1s to
/// [`MAX_DELAY`].
fn drain_time(web: &WebRuntime) -> Duration {
    let one = Duration::from_micros(web.bcrypt_micros.load(Ordering::Relaxed));
    let queued = web.bcrypt_waiting.load(Ordering::Relaxed).max(BCRYPT_QUEUE) + 1;
    (one * queued as u32).clamp(Duration::from_secs(1), MAX_DELAY)
}

async fn authorized(st: &State, web: &Arc<WebRuntime>, req: &Request<Incoming>) -> Login {
    let Some(auth) = &web.auth else {
        return Login::Ok;
    };
    let Some(creds) = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_basic)
    else {
        return Login::Missing;
    };
    let verdict = |ok| if ok { Login::Ok } else { Login::Wrong };
    // The fast path: credentials verified before (a returning scraper)
    // are answered from the cache, never behind the queue.
    if let Some(v) = auth.cached(&creds) {
        return verdict(v);
    }
    // A bounded queue, and a bounded wait in it: a flood of uncached
    // credentials cannot hold a legitimate client past its scrape timeout.
    if web.bcrypt_waiting.fetch_add(1, Ordering::Relaxed) >= BCRYPT_QUEUE {
        web.bcrypt_waiting.fetch_sub(1, Ordering::Relaxed);
        return Login::Busy(drain_time(web));
    }
    let one = tokio::time::timeout(st.request_timeout, web.bcrypt_gate.acquire()).await;
    web.bcrypt_waiting.fetch_sub(1, Ordering::Relaxed);
    let Ok(Ok(_one)) = one else {
        return Login::Busy(drain_time(web));
    };
    let w = web.clone();
    let started = Instant::now();
    let ok = tokio::task::spawn_blocking(move || w.auth.as_ref().is_some_and(|a| a.verify(&creds)))
        .await;
    let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    web.bcrypt_micros.store(took, Ordering::Relaxed);
    ok.map_or_else(|_| Login::Busy(drain_time(web)), verdict)
}

/// `d` in whole seconds for `Retry-After`: rounded up, at least 1.
fn whole_secs(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

/// 429 with `Retry-After`.
fn too_many(retry_after: Option<Duration>) -> Response<Body> {
    let mut r = text(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n");
    if let Some(d) = retry_after {
        r.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(whole_secs(d)));
    }
    r
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method not allowed; use {allow}\n"),
    );
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    r
}

async fn route(
    st: &Arc<State>,
    web: &Arc<WebRuntime>,
    req: Request<Incoming>,
    peer: IpAddr,
) -> Response<Body> {
    if let Some(refused) = admit(st, web, &req, peer).await {
        return refused;
    }
    let get = req.method() == Method::GET || req.method() == Method::HEAD;
    let full = req.uri().path();
    // `--web.route-prefix`: every route is under it; the bare prefix goes
    // to the page (whose relative links need the trailing `/`).
    let path = if st.route_prefix.is_empty() {
        full
    } else if full == st.route_prefix {
        return redirect(&format!("{}/", st.route_prefix));
    } else {
        match full.strip_prefix(st.route_prefix.as_str()) {
            Some(rest) if rest.starts_with('/') => rest,
            _ => return text(StatusCode::NOT_FOUND, "404 page not found\n"),
        }
    };
    if path == st.telemetry_path {
        if !get {
            return method_not_allowed("GET, HEAD");
        }
        let header = |name| {
            req.headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .unwrap_or("")
        };
        let want = Want::of(header(ACCEPT), header(ACCEPT_ENCODING));
        return metrics(st, want).await;
    }
    match path {
        "/" | "/-/healthy" | "/-/ready" | "/api/v1/snapshot" if !get => {
            method_not_allowed("GET, HEAD")
        }
        "/api/v1/stream" if req.method() != Method::GET => method_not_allowed("GET"),
        "/api/v1/stream" => stream_ws::upgrade(st, web, req),
        "/api/v1/snapshot" => snapshot(st, req.uri().query()).await,
        "/api/v1/profile" if !get => method_not_allowed("GET, HEAD"),
        "/api/v1/profile" => match super::profile::handle(&st.profiles, req.uri().query()).await {
            Ok((ctype, body)) => respond(StatusCode::OK, ctype, body),
            Err(super::profile::Refused::Busy(wait)) => {
                let mut r = too_many(Some(wait));
                *r.body_mut() = Body::new(format!(
                    "another profile is being taken (one at a time per exporter): retry after {} s\n",
                    whole_secs(wait)
                ));
                r
            }
            Err(super::profile::Refused::Status(code, msg)) => text(code, msg),
        },
        "/" => {
            let s = st.clone();
            match tokio::task::spawn_blocking(move || landing::landing(&s)).await {
                Ok(page) => respond(StatusCode::OK, "text/html; charset=utf-8", page),
                Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "landing page failed\n"),
            }
        }
        "/-/healthy" if st.collection_stuck() => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Unhealthy: a collection has run longer than --web.request-timeout ({}); no scrape can succeed\n",
                crate::duration::render(st.request_timeout)
            ),
        ),
        "/-/healthy" => text(StatusCode::OK, "Healthy\n"),
        "/-/ready" => text(StatusCode::OK, "Ready\n"),
        "/-/reload" => reload(st, &req).await,
        _ => text(StatusCode::NOT_FOUND, "404 page not found\n"),
    }
}

/// What turns a request away before its route: a body over the limit,
/// the rate limit, a client backed off after failed logins, missing or
/// wrong credentials. `None`: the request goes on.
async fn admit(
    st: &Arc<State>,
    web: &Arc<WebRuntime>,
    req: &Request<Incoming>,
    peer: IpAddr,
) -> Option<Response<Body>> {
    let too_big = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES);
    if too_big {
        let mut r = text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body too large (limit {MAX_BODY_BYTES} bytes)\n"),
        );
        r.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        return Some(r);
    }
    if let Some(l) = &web.limiter {
        if !l.allow() {
            st.reject(Reject::RateLimit);
            return Some(too_many(None));
        }
    }
    // A client backed off after failed logins gets no verification at
    // all (not even a cached one: that would be a free oracle).
    if web.auth.is_some() {
        if let Some(wait) = st.backoff.retry_after(peer) {
            st.reject(Reject::RateLimit);
            return Some(too_many(Some(wait)));
        }
    }
    let login = authorized(st, web, req).await;
    match login {
        Login::Ok if web.auth.is_some() => st.backoff.succeeded(peer),
        Login::Wrong => st.backoff.failed(peer),
        // Not a failed login (nothing was verified), but the client is
        // told to wait, and refused until then: one that retries at once
        // cannot take the queue's next place.
        Login::Busy(wait) => {
            st.backoff.told_to_wait(peer, wait);
            st.reject(Reject::AuthBusy);
            let mut r = text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "Too many logins waiting for verification ({BCRYPT_QUEUE}); your credentials were not checked, try again later. Clients whose credentials were verified before are not affected.\n"
                ),
            );
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(whole_secs(wait)));
            return Some(r);
        }
        _ => {}
    }
    if login != Login::Ok {
        st.reject(Reject::Unauthorized);
        let mut r = text(StatusCode::UNAUTHORIZED, "Unauthorized\n");
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic"),
        );
        return Some(r);
    }
    None
}

/// `/-/reload` (`--web.enable-lifecycle`): POST or PUT.
async fn reload(st: &Arc<State>, req: &Request<Incoming>) -> Response<Body> {
    let Some(l) = st.lifecycle.get() else {
        return text(
            StatusCode::FORBIDDEN,
            "Lifecycle API is not enabled (start with --web.enable-lifecycle).\n",
        );
    };
    if req.method() != Method::POST && req.method() != Method::PUT {
        return method_not_allowed("POST, PUT");
    }
    match tokio::time::timeout(st.request_timeout, l.reload()).await {
        Ok(Ok(summary)) => text(StatusCode::OK, format!("{summary}\n")),
        Ok(Err(e)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to reload config: {e}\n"),
        ),
        Err(_) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the reload is still running after --web.request-timeout ({}); its outcome will be logged\n",
                crate::duration::render(st.request_timeout)
            ),
        ),
    }
}

/// A permanent redirect to `to` (the route prefix with its `/`).
fn redirect(to: &str) -> Response<Body> {
    let mut r = text(StatusCode::PERMANENT_REDIRECT, format!("see {to}\n"));
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(hyper::header::LOCATION, v);
    }
    r
}

/// A slot under `--web.max-requests`, or the 503 that says there is none.
fn request_slot(st: &State) -> Result<Option<OwnedSemaphorePermit>, Box<Response<Body>>> {
    let Some(sem) = &st.inflight else {
        return Ok(None);
    };
    sem.clone().try_acquire_owned().map(Some).map_err(|_| {
        st.reject(Reject::MaxRequests);
        Box::new(text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Limit of concurrent requests reached ({}), try again later.\n",
                st.max_requests
            ),
        ))
    })
}

/// `/metrics`: a slot under `--web.max-requests`, then a shared
/// collection bounded by `--web.request-timeout`.
async fn metrics(st: &Arc<State>, want: Want) -> Response<Body> {
    let permit = match request_slot(st) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let c = match tokio::time::timeout(st.request_timeout, st.shared_collect_for(Some(want))).await
    {
        Ok(Some(c)) => c,
        Ok(None) => return text(StatusCode::INTERNAL_SERVER_ERROR, "collection failed\n"),
        Err(_) => {
            st.reject(Reject::Timeout);
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "collection took longer than --web.request-timeout ({})\n",
                    crate::duration::render(st.request_timeout)
                ),
            );
        }
    };
    let e = c.body(st, want);
    let mut r = respond(StatusCode::OK, e.ctype, e.body.clone());
    if e.gzip {
        r.headers_mut()
            .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    r.headers_mut()
        .insert(VARY, HeaderValue::from_static("Accept-Encoding"));
    let b = std::mem::take(r.body_mut());
    *r.body_mut() = b.holding(permit);
    r
}

/// `/api/v1/snapshot[?interval=1s]`: one live-view frame, from two shared
/// collections `interval` apart (at most 10s); one of the live API's own
/// [`MAX_SNAPSHOTS`] slots meanwhile, never a `--web.max-requests` one
/// (scrapes do not wait behind the live API).
async fn snapshot(st: &Arc<State>, query: Option<&str>) -> Response<Body> {
    let parsed = stream::interval_upto(query, stream::MAX_SNAPSHOT_SECS)
        .and_then(|d| Ok((d, stream::per_cpu(query)?)));
    let (every, detail) = match parsed {
        Ok(v) => v,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    // (Not counted as `max_requests`: that reason means refused scrapes.)
    let Ok(permit) = st.snapshots.clone().try_acquire_owned() else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Limit of concurrent /api/v1/snapshot requests reached ({MAX_SNAPSHOTS}), try again later; /metrics is not affected.\n"
            ),
        );
    };
    let limit = st.request_timeout + every;
    let r = match tokio::time::timeout(limit, st.one_frame(every, detail)).await {
        Ok(Some(json)) => respond(StatusCode::OK, "application/json", json),
        Ok(None) => text(StatusCode::INTERNAL_SERVER_ERROR, "collection failed\n"),
        Err(_) => {
            st.reject(Reject::Timeout);
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                "collection took longer than --web.request-timeout\n",
            )
        }
    };
    drop(permit);
    r
}
