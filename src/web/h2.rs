//! HTTP/2 with prior knowledge (a client that starts with the HTTP/2
//! preface on a plain-text connection) is refused cleanly: the server's
//! HTTP/2 preface (an empty SETTINGS frame), then GOAWAY with
//! `HTTP_1_1_REQUIRED` (RFC 9113 §3.3, §7), instead of a silent close.
//! Over TLS, ALPN offers HTTP/1.1 only, so this does not arise.

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

/// The first bytes of the HTTP/2 client preface (`PRI * HTTP/2.0`).
const PREFACE_START: &[u8; 4] = b"PRI ";

/// What the refusal says, in the GOAWAY frame's debug data.
const DEBUG: &[u8] = b"this server speaks HTTP/1.1 only";

/// Whether the connection starts with the HTTP/2 preface (peeked, so an
/// HTTP/1.1 request is left to read).
pub(super) async fn is_prior_knowledge(s: &TcpStream) -> bool {
    let mut buf = [0u8; 4];
    matches!(s.peek(&mut buf).await, Ok(4) if &buf == PREFACE_START)
}

/// The frames that refuse it.
fn refusal() -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + 9 + 8 + DEBUG.len());
    // SETTINGS, empty: length 0, type 0x4, no flags, stream 0.
    out.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
    // GOAWAY: type 0x7, stream 0; last stream 0, HTTP_1_1_REQUIRED (0xd).
    let len = (8 + DEBUG.len()) as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[0x7, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0xdu32.to_be_bytes());
    out.extend_from_slice(DEBUG);
    out
}

/// Sends the refusal and closes the write side.
pub(super) async fn refuse(mut s: TcpStream) {
    let _ = s.write_all(&refusal()).await;
    let _ = s.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goaway_frame() {
        let f = refusal();
        assert_eq!(&f[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        assert_eq!(&f[9..12], &[0, 0, (8 + DEBUG.len()) as u8]);
        assert_eq!(f[12], 0x7);
        assert_eq!(&f[18..26], &[0, 0, 0, 0, 0, 0, 0, 0xd]);
        assert_eq!(&f[26..], DEBUG);
    }
}
