//! The one thing the web layer needs from an X.509 certificate that
//! rustls does not expose: its Subject Alternative Names, to enforce
//! `client_allowed_sans`.
//!
//! A minimal DER walk (RFC 5280): `Certificate → tbsCertificate →
//! [3] extensions → subjectAltName (2.5.29.17) → GeneralNames`. It reads
//! the DNS, e-mail (`rfc822Name`), URI and IP address names, the four
//! kinds exporter-toolkit compares, and skips the others. It never
//! panics on malformed input (it is fuzzed, see [`crate::fuzzing`]).

use std::net::{Ipv4Addr, Ipv6Addr};

/// A certificate that is not the DER this walk expects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed certificate: {0}")]
pub struct DerError(pub &'static str);

/// `2.5.29.17`, subjectAltName.
const OID_SAN: &[u8] = &[0x55, 0x1d, 0x11];

/// One tag-length-value: `(tag, content, rest)`.
fn tlv(input: &[u8]) -> Result<(u8, &[u8], &[u8]), DerError> {
    let (&tag, rest) = input.split_first().ok_or(DerError("truncated tag"))?;
    if tag & 0x1f == 0x1f {
        return Err(DerError("multi-byte tags are not used in certificates"));
    }
    let (&first, mut rest) = rest.split_first().ok_or(DerError("truncated length"))?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(DerError("bad length"));
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | usize::from(b);
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return Err(DerError("content runs past the end"));
    }
    let (content, rest) = rest.split_at(len);
    Ok((tag, content, rest))
}

/// The content of a TLV that must have `tag`.
fn expect<'a>(
    input: &'a [u8],
    tag: u8,
    what: &'static str,
) -> Result<(&'a [u8], &'a [u8]), DerError> {
    let (t, content, rest) = tlv(input)?;
    if t != tag {
        return Err(DerError(what));
    }
    Ok((content, rest))
}

/// The Subject Alternative Names of a DER certificate, as strings: DNS
/// names, e-mail addresses, URIs and IP addresses (`10.0.0.1`, `::1`).
/// A certificate without the extension has none.
pub fn subject_alt_names(cert_der: &[u8]) -> Result<Vec<String>, DerError> {
    let (cert, _) = expect(cert_der, 0x30, "not a SEQUENCE")?;
    let (mut tbs, _) = expect(cert, 0x30, "tbsCertificate is not a SEQUENCE")?;
    let mut out = Vec::new();
    while !tbs.is_empty() {
        let (tag, content, rest) = tlv(tbs)?;
        tbs = rest;
        if tag != 0xa3 {
            continue;
        }
        let (mut exts, _) = expect(content, 0x30, "extensions are not a SEQUENCE")?;
        while !exts.is_empty() {
            let (ext, rest) = expect(exts, 0x30, "an extension is not a SEQUENCE")?;
            exts = rest;
            let (oid, mut ext) = expect(ext, 0x06, "an extension has no OID")?;
            if oid != OID_SAN {
                continue;
            }
            if let Ok((_, rest)) = expect(ext, 0x01, "") {
                ext = rest; // `critical`
            }
            let (value, _) = expect(ext, 0x04, "an extension value is not an OCTET STRING")?;
            let (mut names, _) = expect(value, 0x30, "GeneralNames is not a SEQUENCE")?;
            while !names.is_empty() {
                let (tag, name, rest) = tlv(names)?;
                names = rest;
                match tag {
                    // rfc822Name [1], dNSName [2], uniformResourceIdentifier [6]
                    0x81 | 0x82 | 0x86 => {
                        if let Ok(s) = std::str::from_utf8(name) {
                            out.push(s.to_string());
                        }
                    }
                    // iPAddress [7]
                    0x87 => {
                        if let Ok(b) = <[u8; 4]>::try_from(name) {
                            out.push(Ipv4Addr::from(b).to_string());
                        } else if let Ok(b) = <[u8; 16]>::try_from(name) {
                            out.push(Ipv6Addr::from(b).to_string());
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_garbage_without_panicking() {
        assert!(subject_alt_names(&[]).is_err());
        assert!(subject_alt_names(&[0x30]).is_err());
        assert!(subject_alt_names(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(subject_alt_names(&[0x30, 0x02, 0x30, 0x00])
            .unwrap()
            .is_empty());
        assert!(subject_alt_names(&[0x1f, 0x00]).is_err());
    }

    #[test]
    fn reads_names() {
        // SEQUENCE { SEQUENCE { [3] { SEQUENCE { SEQUENCE { OID 2.5.29.17,
        // OCTET STRING { SEQUENCE { [2] "a.b", [7] 10.0.0.1, [1] "x@y" } } } } } } }
        let names = [
            &[0x82, 3][..],
            b"a.b",
            &[0x87, 4, 10, 0, 0, 1],
            &[0x81, 3],
            b"x@y",
        ]
        .concat();
        let wrap = |tag: u8, c: &[u8]| [&[tag, c.len() as u8][..], c].concat();
        let gn = wrap(0x30, &names);
        let ext = wrap(
            0x30,
            &[&[0x06, 3, 0x55, 0x1d, 0x11][..], &wrap(0x04, &gn)].concat(),
        );
        let exts = wrap(0xa3, &wrap(0x30, &ext));
        let tbs = wrap(0x30, &[&[0x02, 1, 1][..], &exts].concat());
        let cert = wrap(0x30, &tbs);
        assert_eq!(
            subject_alt_names(&cert).unwrap(),
            vec!["a.b".to_string(), "10.0.0.1".into(), "x@y".into()]
        );
    }
}
