//! `Accept-Encoding` negotiation and gzip compression of `/metrics`, as
//! node_exporter does (Prometheus always asks for gzip; a scrape of a
//! large host shrinks about eightfold).

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write as _;

/// Whether an `Accept-Encoding` header accepts gzip (RFC 9110 §12.5.3):
/// `gzip` (or `x-gzip`) with a q-value above 0, or else `*` with one; not
/// when `identity` is preferred by a higher q-value.
pub(super) fn accepted(header: &str) -> bool {
    let (mut gzip, mut star, mut identity) = (None::<f32>, None::<f32>, None::<f32>);
    for part in header.split(',') {
        let mut it = part.split(';');
        let coding = it.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = it
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                (k.trim().eq_ignore_ascii_case("q")).then(|| v.trim().parse::<f32>().ok())?
            })
            .next()
            .unwrap_or(1.0);
        let slot = match coding.as_str() {
            "gzip" | "x-gzip" => &mut gzip,
            "*" => &mut star,
            "identity" => &mut identity,
            _ => continue,
        };
        *slot = Some(slot.map_or(q, |x: f32| x.max(q)));
    }
    let q = gzip.or(star).unwrap_or(0.0);
    q > 0.0 && identity.is_none_or(|i| q >= i)
}

/// Compresses a response body at the fastest level: exposition text
/// compresses well at any level, and the scrape's latency matters more.
pub(super) fn compress(body: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::with_capacity(body.len() / 6 + 64), Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(body);
    e.finish().unwrap_or_default()
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

    #[test]
    fn round_trip() {
        let body = "# HELP a b\n# TYPE a counter\na_total{cpu=\"0\"} 1\n".repeat(100);
        let z = compress(body.as_bytes());
        assert!(z.len() < body.len() / 4);
        let mut out = String::new();
        flate2::read::GzDecoder::new(&z[..])
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, body);
    }
}
