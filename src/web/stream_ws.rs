//! The WebSocket of `/api/v1/stream`: the upgrade (after the routing's
//! rate limit and auth; same-origin or `--web.allowed-origins` only, see
//! [`super::origin`]), a `--web.max-streams` slot, then one viewer's
//! loop: frames out, pings out, and the viewer dropped when it falls
//! behind or stops answering (see [`super::stream`]), or when a reload
//! revokes the login it was opened with (1008). An open stream keeps its
//! connection's `--web.max-connections` slot until it closes, and its
//! socket's send buffer is bounded ([`SEND_BUFFER`]).

use super::auth::parse_basic;
use super::io::{Body, StallTimeout};
use super::stream::{interval, liveness, per_cpu, QUEUE, SEND_BUFFER};
use super::{origin, ConnSlot, State, WebRuntime};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, AUTHORIZATION, CONNECTION, HOST, ORIGIN, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY,
    UPGRADE,
};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, OwnedSemaphorePermit};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

fn plain(status: StatusCode, msg: String) -> Response<Body> {
    let mut r = Response::new(Body::new(msg));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn header_has(req: &Request<Incoming>, name: hyper::header::HeaderName, token: &str) -> bool {
    req.headers().get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// Whether `Sec-WebSocket-Key` is 16 bytes in base64 (RFC 6455 4.2.1).
fn key_valid(k: &[u8]) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(k)
        .is_ok_and(|v| v.len() == 16)
}

/// The user and the hash the request's password was checked against
/// under `web` (the routing verified it), to tell whether a reload
/// revokes it; `None` when `web` has no auth.
fn login_of(web: &WebRuntime, req: &Request<Incoming>) -> Option<(String, String)> {
    web.auth.as_ref()?;
    let creds = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_basic)?;
    let hash = web.config.users.get(&creds.user)?.clone();
    Some((creds.user, hash))
}

/// `GET /api/v1/stream`: 101 and a viewer task, or why not (`web`: the
/// web config the routing admitted it under).
pub(super) fn upgrade(
    st: &Arc<State>,
    web: &WebRuntime,
    mut req: Request<Incoming>,
) -> Response<Body> {
    let q = req.uri().query();
    let (every, detail) = match interval(q).and_then(|d| Ok((d, per_cpu(q)?))) {
        Ok(v) => v,
        Err(e) => return plain(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    // Cross-site WebSocket hijacking: a browser page of another origin
    // (`super::origin`).
    if let Some(o) = req.headers().get(ORIGIN) {
        let host = req.headers().get(HOST).and_then(|h| h.to_str().ok());
        let https = web.config.tls.is_some();
        let ok = o
            .to_str()
            .is_ok_and(|o| origin::allowed(o, https, host, &st.allowed_origins));
        if !ok {
            tracing::debug!(origin = ?o, "live view: upgrade from another origin refused");
            return plain(
                StatusCode::FORBIDDEN,
                "Forbidden: /api/v1/stream is same-origin only; this page's Origin is neither the exporter's own (scheme, host and port of the request) nor one of --web.allowed-origins\n".into(),
            );
        }
    }
    // RFC 6455 4.1: an upgrade is an HTTP/1.1 (or later) GET.
    if req.version() < hyper::Version::HTTP_11 {
        return plain(
            StatusCode::BAD_REQUEST,
            "/api/v1/stream is a WebSocket: the upgrade needs HTTP/1.1\n".into(),
        );
    }
    // RFC 6455 4.2.1: the key is 16 bytes, base64-encoded.
    let key = req
        .headers()
        .get(SEC_WEBSOCKET_KEY)
        .filter(|k| key_valid(k.as_bytes()))
        .cloned();
    let version_ok = req
        .headers()
        .get("sec-websocket-version")
        .is_some_and(|v| v == "13");
    let (Some(key), true, true, true) = (
        key,
        version_ok,
        header_has(&req, CONNECTION, "upgrade"),
        header_has(&req, UPGRADE, "websocket"),
    ) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "/api/v1/stream is a WebSocket (version 13): send `Connection: Upgrade`, `Upgrade: websocket` and `Sec-WebSocket-Key` (16 bytes in base64); for one frame over HTTP, GET /api/v1/snapshot\n".into(),
        );
    };
    let stream_slot = match &st.streams {
        Some(sem) => match sem.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "Limit of open streams reached ({}: --web.max-streams, at most half of --web.max-connections), try again later.\n",
                        st.max_streams
                    ),
                )
            }
        },
        None => None,
    };
    let frames = match st.subscribe(every, detail) {
        Ok(rx) => rx,
        Err(why) => return plain(StatusCode::SERVICE_UNAVAILABLE, why),
    };
    // The connection's `--web.max-connections` slot goes with the stream.
    let conn_slot = req.extensions().get::<ConnSlot>().and_then(ConnSlot::take);
    let held = Held {
        slots: [stream_slot, conn_slot],
        login: login_of(web, &req),
        frames,
        web_changes: st.web_changes.subscribe(),
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let st2 = st.clone();
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(up) => {
                let cfg = WebSocketConfig::default()
                    // Viewers send nothing but control frames: a small
                    // read buffer (the default, 128 KiB, is allocated up
                    // front for every stream), and frames written as they
                    // come (each is flushed anyway).
                    .read_buffer_size(READ_BUFFER)
                    .write_buffer_size(0)
                    .max_message_size(Some(64 * 1024))
                    .max_frame_size(Some(64 * 1024));
                let (io, read) = bounded(up);
                let ws =
                    WebSocketStream::from_partially_read(io, read, Role::Server, Some(cfg)).await;
                viewer(st2, ws, every, held).await;
            }
            Err(e) => tracing::debug!(error = %e, "WebSocket upgrade failed"),
        }
    });
    let mut r = Response::new(Body::new(""));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    r
}

/// What a stream runs on.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The upgraded connection (as `serve_http` wrapped it, over TLS or not)
/// and the bytes read past the upgrade request, its socket's send buffer
/// bounded to [`SEND_BUFFER`] (Linux doubles it): what a viewer that does
/// not read holds in the kernel, where autotuning lets a send buffer grow
/// to 4 MiB.
fn bounded(up: hyper::upgrade::Upgraded) -> (Box<dyn Io>, Vec<u8>) {
    type Plain = TokioIo<StallTimeout<tokio::net::TcpStream>>;
    type Tls = TokioIo<StallTimeout<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>>;
    let up = match up.downcast::<Plain>() {
        Ok(p) => {
            bound_send_buffer(p.io.inner().get_ref());
            return (Box::new(p.io.into_inner()), p.read_buf.to_vec());
        }
        Err(up) => up,
    };
    match up.downcast::<Tls>() {
        Ok(p) => {
            bound_send_buffer(p.io.inner().get_ref().get_ref().0);
            (Box::new(p.io.into_inner()), p.read_buf.to_vec())
        }
        Err(up) => {
            tracing::warn!("live view: the stream's socket was not found under its connection; its send buffer is not bounded");
            (Box::new(TokioIo::new(up)), Vec::new())
        }
    }
}

/// `SO_SNDBUF` of a stream's socket: [`SEND_BUFFER`].
fn bound_send_buffer(tcp: &tokio::net::TcpStream) {
    if let Err(e) = socket2::SockRef::from(tcp).set_send_buffer_size(SEND_BUFFER) {
        tracing::warn!(error = %e, "live view: cannot bound the stream's socket send buffer");
    }
}

/// What an open stream holds: its `--web.max-streams` and
/// `--web.max-connections` slots (released when it ends), and the login
/// it was opened with, checked again after each web config change.
struct Held {
    slots: [Option<OwnedSemaphorePermit>; 2],
    login: Option<(String, String)>,
    web_changes: tokio::sync::watch::Receiver<u64>,
    /// Its interval's frames.
    frames: broadcast::Receiver<Utf8Bytes>,
}

/// A stream's read buffer: viewers send only control frames.
const READ_BUFFER: usize = 4 * 1024;

/// Why a viewer's loop ended.
#[derive(Debug)]
enum End {
    Gone,
    /// More than [`QUEUE`] frames in flight, or a write blocked for
    /// [`liveness`].
    TooSlow(String),
    /// No ping echoed for [`liveness`].
    NoEcho(String),
    /// A reload revoked the login the stream was opened with.
    Revoked,
    /// The viewer broke the protocol: closed with the code RFC 6455
    /// gives (1002, 1007 invalid UTF-8, 1009 too big).
    Broke(CloseCode, String),
}

/// The close code for a read error, `None` when the connection is gone
/// (nothing to tell).
fn broke(e: &tokio_tungstenite::tungstenite::Error) -> Option<End> {
    use tokio_tungstenite::tungstenite::Error as E;
    let code = match e {
        E::Protocol(_) => CloseCode::Protocol,
        E::Utf8(_) => CloseCode::Invalid,
        E::Capacity(_) => CloseCode::Size,
        _ => return None,
    };
    // A close reason is at most 123 bytes.
    let mut why = e.to_string();
    while why.len() > 120 {
        why.pop();
    }
    Some(End::Broke(code, why))
}

/// Proof of reading: each ping carries this stream's random nonce and a
/// sequence number, and a pong is a sign of life only when it echoes a
/// ping sent and not yet answered. TCP delivers in order, so a viewer
/// that echoes ping `k` has read every frame sent before it; one that
/// never reads cannot echo (unsolicited pongs with anything else are
/// ignored), and is dropped after [`liveness`], whatever the socket
/// buffers on both sides could still hold (a viewer answering with
/// unsolicited pongs and never reading used to keep its stream until the
/// kernel's send buffer filled: minutes, and megabytes per viewer).
#[derive(Debug)]
struct Pings {
    nonce: u64,
    sent: u64,
    answered: u64,
}

impl Pings {
    fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        // A randomly keyed SipHash of nothing: a random u64 per stream.
        let nonce = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Pings {
            nonce,
            sent: 0,
            answered: 0,
        }
    }

    /// The next ping's payload: the nonce and the sequence, 16 bytes.
    fn next(&mut self) -> Vec<u8> {
        self.sent += 1;
        let mut p = self.nonce.to_be_bytes().to_vec();
        p.extend_from_slice(&self.sent.to_be_bytes());
        p
    }

    /// Whether `pong` answers a ping sent and not answered yet.
    fn answers(&mut self, pong: &[u8]) -> bool {
        let (Some(n), Some(k)) = (pong.get(..8), pong.get(8..16)) else {
            return false;
        };
        let (Ok(n), Ok(k)) = (<[u8; 8]>::try_from(n), <[u8; 8]>::try_from(k)) else {
            return false;
        };
        let k = u64::from_be_bytes(k);
        let ok = pong.len() == 16
            && u64::from_be_bytes(n) == self.nonce
            && k > self.answered
            && k <= self.sent;
        if ok {
            self.answered = k;
        }
        ok
    }
}

/// One viewer: frames of its interval, a ping each interval, and out when
/// it falls behind or has echoed no ping for [`liveness`] ([`Pings`]);
/// the server's closes counted by reason.
async fn viewer<S>(st: Arc<State>, ws: WebSocketStream<S>, every: Duration, held: Held)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Held {
        slots: _slots,
        login,
        web_changes,
        frames,
    } = held;
    let st2 = st.clone();
    let holds = move || st2.login_holds(login.as_ref());
    let (end, tx) = run(ws, every, liveness(every), frames, web_changes, holds).await;
    // In the order of `CLOSE_REASONS`; counted before the viewer is told.
    let reason = match end {
        End::Gone => return,
        End::TooSlow(_) => 0,
        End::NoEcho(_) => 1,
        End::Revoked => 2,
        End::Broke(..) => 3,
    };
    if let Some(n) = st.hub.closed.get(reason) {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    close(tx, end).await;
}

/// Frames in flight for a viewer: those broadcast and not yet taken
/// (overwritten ones included), plus the one being written if `writing`.
fn in_flight(frames: &broadcast::Receiver<Utf8Bytes>, writing: bool) -> usize {
    frames.len() + usize::from(writing)
}

/// The viewer's loop (`limit`: how long it may echo no ping, or a write
/// block; `holds`: whether its login still holds after a web config
/// change): why it ended, and the stream's sending half.
async fn run<S>(
    ws: WebSocketStream<S>,
    every: Duration,
    limit: Duration,
    mut frames: broadcast::Receiver<Utf8Bytes>,
    mut web_changes: tokio::sync::watch::Receiver<u64>,
    holds: impl Fn() -> bool,
) -> (End, SplitSink<WebSocketStream<S>, Message>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut tx, mut rx) = ws.split();
    let mut ping = tokio::time::interval(every);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = Instant::now();
    let mut pings = Pings::new();
    let end = 'run: loop {
        let out: Message = tokio::select! {
            f = frames.recv() => match f {
                Ok(text) => Message::Text(text),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    break End::TooSlow(format!("too slow: {n} frames behind"));
                }
                Err(broadcast::error::RecvError::Closed) => break End::Gone,
            },
            _ = ping.tick() => {
                if seen.elapsed() > limit {
                    break End::NoEcho(format!("no ping echoed for {}s", limit.as_secs()));
                }
                Message::Ping(pings.next().into())
            }
            Ok(()) = web_changes.changed() => {
                if holds() {
                    continue;
                }
                break End::Revoked;
            }
            m = rx.next() => match m {
                Some(Ok(Message::Close(_))) | None => break End::Gone,
                Some(Err(e)) => break broke(&e).unwrap_or(End::Gone),
                Some(Ok(Message::Pong(p))) => {
                    if pings.answers(&p) {
                        seen = Instant::now();
                    }
                    continue;
                }
                // Nothing else a viewer sends is a sign of having read.
                Some(Ok(_)) => continue,
            },
        };
        // Written while the frames that keep coming are counted: once the
        // socket's bounded send buffer is full, the write waits and they
        // queue up.
        let frame = matches!(out, Message::Text(_));
        let mut probe = frames.resubscribe();
        let mut send = tx.send(out);
        let blocked = tokio::time::sleep(limit);
        tokio::pin!(blocked);
        loop {
            tokio::select! {
                r = &mut send => match r {
                    Ok(()) => break,
                    Err(_) => break 'run End::Gone,
                },
                () = &mut blocked => break 'run End::TooSlow("a frame write blocked".into()),
                f = probe.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = f {
                        break 'run End::Gone;
                    }
                    let n = in_flight(&frames, frame);
                    if n > QUEUE {
                        break 'run End::TooSlow(format!(
                            "too slow: {n} frames in flight (the bound is {QUEUE})"
                        ));
                    }
                }
            }
        }
    };
    (end, tx)
}

/// Tells the viewer why the server closes its stream (within a second).
async fn close<S>(mut tx: SplitSink<WebSocketStream<S>, Message>, end: End)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (code, why) = match end {
        End::Gone => return,
        End::TooSlow(why) | End::NoEcho(why) => (CloseCode::Policy, why),
        End::Revoked => (
            CloseCode::Policy,
            "credentials revoked by a web config reload".to_string(),
        ),
        End::Broke(code, why) => (code, why),
    };
    tracing::debug!(reason = %why, "live view: viewer dropped");
    let close = Message::Close(Some(CloseFrame {
        code,
        reason: Utf8Bytes::from(why),
    }));
    let _ = tokio::time::timeout(Duration::from_secs(1), tx.send(close)).await;
}

#[cfg(test)]
mod tests {
    use super::{run, End, Pings, QUEUE};
    use std::time::Duration;
    use tokio::sync::broadcast;
    use tokio_tungstenite::tungstenite::protocol::Role;
    use tokio_tungstenite::tungstenite::Utf8Bytes;
    use tokio_tungstenite::WebSocketStream;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// A server's WebSocket over a pipe of `pipe` bytes whose other end
    /// (returned, to keep it open) never reads, and a web config that
    /// never changes.
    async fn never_read(
        pipe: usize,
    ) -> (
        WebSocketStream<tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
        tokio::sync::watch::Sender<u64>,
        tokio::sync::watch::Receiver<u64>,
    ) {
        let (server, client) = tokio::io::duplex(pipe);
        let ws = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
        let (changes, web_changes) = tokio::sync::watch::channel(0);
        (ws, client, changes, web_changes)
    }

    /// A viewer whose peer never reads, behind an 8 KiB pipe (a full
    /// socket send buffer): the first 16 KiB frame's write waits, the
    /// frames that keep coming are in flight, and the fifth closes it,
    /// before any liveness bound (a minute here).
    #[test]
    fn a_viewer_with_more_than_4_frames_in_flight_is_closed() {
        rt().block_on(async {
            let (ws, _peer, _changes, web_changes) = never_read(8 * 1024).await;
            let (tx, frames) = broadcast::channel(QUEUE);
            let minute = Duration::from_secs(60);
            let mut viewer = tokio::spawn(run(ws, minute, minute, frames, web_changes, || true));
            let frame = Utf8Bytes::from("x".repeat(16 * 1024));
            // A frame at a time, each given to the viewer before the next:
            // four in flight are allowed, the fifth is not.
            for sent in 1..=QUEUE {
                tx.send(frame.clone()).expect("the viewer subscribes");
                let wait = tokio::time::timeout(Duration::from_millis(100), &mut viewer);
                if let Ok(end) = wait.await {
                    panic!("closed after {sent} frames: {end:?}");
                }
            }
            tx.send(frame).expect("the viewer subscribes");
            let end = tokio::time::timeout(Duration::from_secs(10), viewer)
                .await
                .expect("closed within the deadline")
                .expect("the viewer's task")
                .0;
            let End::TooSlow(why) = end else {
                panic!("{end:?}");
            };
            assert_eq!(why, "too slow: 5 frames in flight (the bound is 4)");
        });
    }

    /// A viewer that never echoes a ping is closed once `limit` has
    /// passed, frames or not.
    #[test]
    fn a_viewer_that_echoes_no_ping_is_closed_after_the_limit() {
        rt().block_on(async {
            let (ws, _peer, _changes, web_changes) = never_read(64 * 1024).await;
            let (_tx, frames) = broadcast::channel(QUEUE);
            let every = Duration::from_millis(20);
            let limit = Duration::from_millis(100);
            let start = std::time::Instant::now();
            let end = tokio::time::timeout(
                Duration::from_secs(10),
                run(ws, every, limit, frames, web_changes, || true),
            )
            .await
            .expect("closed within the deadline")
            .0;
            assert!(matches!(end, End::NoEcho(_)), "{end:?}");
            assert!(start.elapsed() >= limit);
        });
    }

    #[test]
    fn only_an_echo_of_a_ping_sent_and_not_yet_answered_is_a_sign_of_life() {
        let mut p = Pings::new();
        // Nothing sent yet: nothing answers, not even the right nonce.
        let mut early = p.nonce.to_be_bytes().to_vec();
        early.extend_from_slice(&1u64.to_be_bytes());
        assert!(!p.answers(&early));
        let first = p.next();
        let second = p.next();
        assert!(!p.answers(b""), "an empty unsolicited pong");
        assert!(!p.answers(b"any payload at all"));
        let mut forged = first.clone();
        forged[0] ^= 1;
        assert!(!p.answers(&forged), "another nonce");
        let mut long = second.clone();
        long.push(0);
        assert!(!p.answers(&long), "trailing bytes");
        assert!(p.answers(&second));
        // Answered already, or older than the last answer: not again.
        assert!(!p.answers(&second));
        assert!(!p.answers(&first));
        let third = p.next();
        assert!(p.answers(&third));
        // Another stream's nonce differs.
        assert_ne!(Pings::new().nonce, p.nonce);
    }
}
