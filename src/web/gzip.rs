//! `Accept-Encoding` negotiation and gzip compression of `/metrics`, as
//! node_exporter does (Prometheus always asks for gzip; a scrape of a
//! large host shrinks six- to eightfold).
//!
//! One deflate compressor is kept per thread that compresses (the
//! runtime's thread, where a small host's scrapes collect and encode, and
//! the collector thread, where a large host's do; a few hundred KiB each)
//! and reset between responses: building one per response (a `GzEncoder`)
//! cost about 90 µs whatever the body's size, because the compressor's
//! state is allocated and cleared each time (issue 29; the figures are in
//! docs/src/performance.md). The gzip header and trailer (RFC 1952) are
//! written here around the raw deflate stream, the bytes `GzEncoder`
//! wrote.
//!
//! The backend is flate2's `zlib-rs` (the `zlib-rs` feature in
//! Cargo.toml) at level 1, zlib's "quick" strategy with the fixed Huffman
//! codes: on the five-event body of a 2-CPU host (7 KB) it deflates in
//! about half the CPU of miniz_oxide's level 1, its reset included, for
//! a body about 15% larger (2.4 against 2.1 KB); on a 200 KB body it is
//! as fast and about 25% larger. Scraped interleaved with a miniz_oxide
//! build of the same commit and node_exporter, it cost 10–16% less CPU
//! per gzip scrape (docs/src/performance.md, "Scrapes"). Level 2 (dynamic
//! codes) is the size of miniz_oxide's level 1 and twice the CPU on large
//! bodies.
//!
//! A reset clears zlib-rs's hash table of 65,536 two-byte heads (128 KiB,
//! about 4 µs), whatever the body's size: the table's size is a constant
//! of zlib-rs (`HASH_SIZE` in `src/deflate.rs` of zlib-rs 0.6.8), not
//! derived from the window bits or the memory level, so a smaller window
//! (`Compress::new_with_window_bits`, which the `zlib-rs` feature
//! enables) would not make a small body's reset cheaper.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};
use std::cell::{Cell, RefCell};

thread_local! {
    /// This thread's compressor, reset before each use.
    static DEFLATE: RefCell<Compress> = RefCell::new(new_compressor());
    /// The size of this thread's last gzip member, the room the next one
    /// is given: level 1 makes exposition text about a third of its size,
    /// so a guess from the input's size either grew the buffer twice (a
    /// sixth, before) or held twice the room for as long as the body is
    /// kept.
    static LAST_OUT: Cell<usize> = const { Cell::new(0) };
}

/// The gzip member header (RFC 1952 §2.3): deflate, no flags, no
/// modification time, `XFL` 4 (the fastest level), OS unknown (255), as
/// flate2's `GzEncoder` writes it.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 255];

/// Whether an `Accept-Encoding` header accepts gzip (RFC 9110 §12.5.3):
/// `gzip` (or `x-gzip`) with a q-value above 0, or else `*` with one; not
/// when `identity` is preferred by a higher q-value.
pub(super) fn accepted(header: &str) -> bool {
    let (mut gzip, mut star, mut identity) = (None::<f32>, None::<f32>, None::<f32>);
    for part in header.split(',') {
        let mut it = part.split(';');
        let coding = it.next().unwrap_or("").trim();
        let q = it
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                (k.trim().eq_ignore_ascii_case("q")).then(|| v.trim().parse::<f32>().ok())?
            })
            .next()
            .unwrap_or(1.0);
        let is = |name: &str| coding.eq_ignore_ascii_case(name);
        let slot = if is("gzip") || is("x-gzip") {
            &mut gzip
        } else if coding == "*" {
            &mut star
        } else if is("identity") {
            &mut identity
        } else {
            continue;
        };
        *slot = Some(slot.map_or(q, |x: f32| x.max(q)));
    }
    let q = gzip.or(star).unwrap_or(0.0);
    q > 0.0 && identity.is_none_or(|i| q >= i)
}

/// A raw deflate compressor at the fastest level: exposition text
/// compresses well at any level, and the scrape's latency matters more.
fn new_compressor() -> Compress {
    Compress::new(Compression::fast(), false)
}

/// Compresses a response body into one gzip member, with this thread's
/// compressor; `None` if deflate failed (the body is then sent as it is).
pub fn compress(body: &[u8]) -> Option<Vec<u8>> {
    let last = LAST_OUT.try_with(Cell::get).unwrap_or(0);
    let room = if last == 0 {
        body.len() / 3
    } else {
        last + last / 8
    };
    let mut out = Vec::with_capacity(room.min(body.len() + body.len() / 8) + 64);
    out.extend_from_slice(&HEADER);
    let kept = DEFLATE.try_with(|c| match c.try_borrow_mut() {
        Ok(mut c) => {
            c.reset();
            Some(deflate(&mut c, body, &mut out))
        }
        Err(_) => None,
    });
    let ended = match kept {
        Ok(Some(ended)) => ended,
        // Only while the thread is being torn down (or re-entered, which
        // nothing does): a compressor of its own.
        _ => deflate(&mut new_compressor(), body, &mut out),
    };
    if !ended {
        return None;
    }
    let mut crc = Crc::new();
    crc.update(body);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE: the input's length modulo 2^32 (RFC 1952 §2.3.1).
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    let _ = LAST_OUT.try_with(|l| l.set(out.len()));
    Some(out)
}

/// Deflates all of `input` into `out` (appended) and finishes the stream:
/// whether it ended. A freshly reset compressor given room always makes
/// progress; should a call fail, or make none with room to spare, the
/// stream is given up (false).
fn deflate(c: &mut Compress, input: &[u8], out: &mut Vec<u8>) -> bool {
    let start = c.total_in();
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(1024));
        }
        let (done_in, done_out) = (c.total_in(), c.total_out());
        let from = usize::try_from(done_in - start).unwrap_or(input.len());
        let rest = input.get(from..).unwrap_or_default();
        match c.compress_vec(rest, out, FlushCompress::Finish) {
            Ok(Status::StreamEnd) => return true,
            Err(_) => return false,
            Ok(Status::Ok | Status::BufError) => {
                let stuck = c.total_in() == done_in && c.total_out() == done_out;
                if stuck && out.capacity() - out.len() >= 64 {
                    return false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn negotiation() {
        for yes in [
            "gzip",
            "GZIP",
            "deflate, gzip;q=0.5",
            "*",
            "x-gzip",
            "gzip;q=1.0, identity; q=0.5, *;q=0",
            "br;q=1, *;q=0.1",
            "gzip, identity",
        ] {
            assert!(accepted(yes), "{yes}");
        }
        for no in [
            "",
            "identity",
            "gzip;q=0",
            "deflate, br",
            "*;q=0",
            "gzip;q=0.2, identity;q=0.8",
            "gzip;q=0, *",
        ] {
            assert!(!accepted(no), "{no}");
        }
    }

    /// The body decoded by flate2's gzip decoder (which checks the CRC32
    /// and ISIZE of the trailer) and, when the host has it, by `gzip -dc`.
    fn decoded(z: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut d = flate2::read::GzDecoder::new(z);
        d.read_to_end(&mut out).unwrap();
        // Nothing after the one member.
        assert_eq!(d.into_inner().len(), 0);
        out
    }

    fn gunzip(z: &[u8]) -> Option<Vec<u8>> {
        use std::io::Write as _;
        let mut child = std::process::Command::new("gzip")
            .arg("-dc")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        child.stdin.take().unwrap().write_all(z).unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "gzip -dc refused the member");
        Some(o.stdout)
    }

    #[test]
    fn round_trip() {
        let body = "# HELP a b\n# TYPE a counter\na_total{cpu=\"0\"} 1\n".repeat(100);
        let z = compress(body.as_bytes()).unwrap();
        assert!(z.len() < body.len() / 4);
        assert_eq!(z[..10], HEADER);
        assert_eq!(decoded(&z), body.as_bytes());
    }

    /// The kept compressor is reset between bodies: each member stands
    /// alone, whatever came before on the thread (a large body, an empty
    /// one, incompressible bytes that need more room than the estimate).
    #[test]
    fn each_body_is_one_whole_member() {
        let mut x = 0x9e37_79b9_u32;
        let noise: Vec<u8> = (0..70_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let text = "perf_page_faults_total{cpu=\"1\"} 123456\n".repeat(2_000);
        let bodies: [&[u8]; 5] = [text.as_bytes(), b"", &noise, b"x", text.as_bytes()];
        let members: Vec<Vec<u8>> = bodies.iter().map(|b| compress(b).unwrap()).collect();
        assert_eq!(members[0], members[4], "reset leaves nothing behind");
        for (b, z) in bodies.iter().zip(&members) {
            assert_eq!(&decoded(z)[..], *b);
            if let Some(out) = gunzip(z) {
                assert_eq!(&out[..], *b);
            }
        }
        // Another thread has its own compressor.
        let z = std::thread::spawn(move || compress(text.as_bytes()).unwrap())
            .join()
            .unwrap();
        assert_eq!(z, members[0]);
    }
}
