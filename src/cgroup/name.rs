//! A cgroup's path as a label: a directory name is bytes (anything but `/`
//! and NUL), a label is UTF-8, and two cgroups must never share a label.
//!
//! The walk keeps paths as bytes ([`std::ffi::OsString`]) and opens the
//! directory by them; only the `cgroup` label is text, made here:
//!
//! * valid UTF-8 is kept as it is (so systemd's own escapes, such as
//!   `dev-disk-by\x2duuid`, read as they do in `systemctl`);
//! * each byte that is not UTF-8 is written `\xHH`, two lowercase hex
//!   digits (always `\x80` to `\xff`: the bytes below are ASCII, always
//!   valid);
//! * a real backslash that would read as such an escape (followed by `x`
//!   and two lowercase hex digits from `80` to `ff`, or `5c`) is itself
//!   written `\x5c`.
//!
//! So the byte name `x\xff` is labelled with the four characters `x\xff`,
//! a directory really named `x\xff` (a backslash, then `xff`) with
//! `x\x5cxff`, and `x\u{FFFD}` (valid UTF-8) with itself: three cgroups,
//! three series. The mapping is one-to-one (every label reads back to its
//! bytes; the tests check it exhaustively over short names), and it keeps
//! `/`, so a path's label is its components' labels joined with `/`.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;

/// The label of a path (or name) relative to the cgroup root. See the
/// [module docs](self).
pub fn label(raw: &OsStr) -> String {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        let mut rest = chunk.valid();
        while let Some(at) = rest.find('\\') {
            out.push_str(&rest[..at]);
            rest = &rest[at + 1..];
            if escape_at(rest.as_bytes()).is_some() {
                out.push_str("\\x5c");
            } else {
                out.push('\\');
            }
        }
        out.push_str(rest);
        for b in chunk.invalid() {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// The byte an escape stands for, when `after` (what follows a
/// backslash) starts with one: `x` and two lowercase hex digits, `80` to
/// `ff` or `5c`.
fn escape_at(after: &[u8]) -> Option<u8> {
    let [b'x', hi, lo, ..] = *after else {
        return None;
    };
    let digit = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let v = (digit(hi)? << 4) | digit(lo)?;
    (v >= 0x80 || v == b'\\').then_some(v)
}

/// The bytes a label stands for (the inverse of [`label`]).
#[cfg(test)]
pub fn raw(label: &str) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let b = label.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1..).and_then(escape_at)) {
            (b'\\', Some(v)) => {
                out.push(v);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    std::ffi::OsString::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    fn l(b: &[u8]) -> String {
        label(OsStr::from_bytes(b))
    }

    #[test]
    fn bytes_that_are_not_utf8_are_escaped_and_never_meet_their_lossy_twin() {
        assert_eq!(l(b"x\xff"), r"x\xff");
        assert_eq!(l("x\u{FFFD}".as_bytes()), "x\u{FFFD}");
        assert_eq!(l(br"x\xff"), r"x\x5cxff");
        assert_eq!(l(br"x\x5c"), r"x\x5cx5c");
        // systemd's escapes and other backslashes read as they are.
        assert_eq!(
            l(br"system.slice/systemd-fsck@dev-disk-by\x2duuid.service"),
            r"system.slice/systemd-fsck@dev-disk-by\x2duuid.service"
        );
        assert_eq!(l(br"a\xFF\x7f\\b\"), r"a\xFF\x7f\\b\");
        // A lone continuation byte, a truncated sequence, a valid one.
        assert_eq!(l(b"\x80a\xc3\xc3\xa9"), "\\x80a\\xc3\u{e9}");
        assert_eq!(l(b"a/\xfe/b"), r"a/\xfe/b");
    }

    /// One-to-one: every name of up to 5 bytes from an alphabet of the
    /// tricky bytes (backslash, the escape's letters and digits, lead and
    /// continuation bytes, `/`) has its own label, which reads back to it,
    /// and a path's label is its components' joined.
    #[test]
    fn labels_are_one_to_one_over_short_names() {
        let alphabet = b"\\x5cf8/\xff\x80\xc3\xa9";
        let mut seen: HashMap<String, Vec<u8>> = HashMap::new();
        let mut names: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..5 {
            let next: Vec<Vec<u8>> = names
                .iter()
                .filter(|n| n.len() == names.last().map_or(0, Vec::len))
                .flat_map(|n| {
                    alphabet.iter().map(move |&c| {
                        let mut m = n.clone();
                        m.push(c);
                        m
                    })
                })
                .collect();
            names.extend(next);
        }
        assert!(names.len() > 100_000);
        for n in names {
            let lab = l(&n);
            assert_eq!(raw(&lab), OsString::from_vec(n.clone()), "{lab}");
            let joined: Vec<String> = n.split(|&b| b == b'/').map(l).collect();
            assert_eq!(joined.join("/"), lab);
            if let Some(other) = seen.insert(lab.clone(), n.clone()) {
                panic!("{other:?} and {n:?} share the label {lab}");
            }
        }
    }
}
