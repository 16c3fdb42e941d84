//! The numbers of the per-CPU columns as JSON: at 512 CPUs about 10,000
//! of them per frame, so how they are written is most of a frame's cost.
//!
//! They are written by `itoa` (whole numbers) and `ryu` into a buffer on
//! the stack, a batch of cells at a time, and each batch is appended to
//! the frame in one copy, not number by number. (Computing eight digits
//! at once in the lanes of a `u64` was measured too, and was no faster
//! than `itoa` on the benchmark machine.)

/// A cell: an integer when the value is one (event counts, bytes: the
/// usual case), else the shortest form of the value rounded to nanounits
/// (seconds, joules, counts scaled for multiplexing); `null` where there
/// is none. Its bytes: a comma and the longest number (`ryu` writes at
/// most 24 bytes; an integer below 2^53, at most 17 with its sign).
const CELL: usize = 25;

/// Cells per batch.
const BATCH: usize = 64;

/// Integers up to this are exact in an `f64`.
const EXACT: f64 = (1u64 << 53) as f64;

/// Appends `cells`, comma-separated.
pub(super) fn write_cells(out: &mut Vec<u8>, cells: &[Option<f64>]) {
    write_batches(out, cells, |buf, at, v| write_cell(buf, at, *v));
}

/// Appends `ints`, comma-separated.
pub(super) fn write_integers(out: &mut Vec<u8>, ints: &[u32]) {
    write_batches(out, ints, |buf, at, n| write_u64(buf, at, u64::from(*n)));
}

/// Appends `items` comma-separated, each written by `write` (at most
/// `CELL - 1` bytes at the position it is given; it returns where it
/// ended).
fn write_batches<T>(
    out: &mut Vec<u8>,
    items: &[T],
    write: impl Fn(&mut [u8; CELL * BATCH], usize, &T) -> usize,
) {
    let mut buf = [0u8; CELL * BATCH];
    for (k, batch) in items.chunks(BATCH).enumerate() {
        let mut at = 0;
        for item in batch {
            buf[at] = b',';
            at = write(&mut buf, at + 1, item);
        }
        // The first cell has no comma before it.
        out.extend_from_slice(&buf[usize::from(k == 0)..at]);
    }
}

/// Writes a cell (module docs) at `at`; returns where it ends.
fn write_cell(buf: &mut [u8; CELL * BATCH], at: usize, v: Option<f64>) -> usize {
    match v {
        // (A cast and back: `fract` is a libm call on baseline x86-64.)
        Some(v) if v.abs() < EXACT && (v as i64) as f64 == v => {
            let at = if v < 0.0 {
                buf[at] = b'-';
                at + 1
            } else {
                at
            };
            write_u64(buf, at, v.abs() as u64)
        }
        Some(v) if v.is_finite() => {
            let v = if v.abs() < 1e6 {
                (v * 1e9).round() / 1e9
            } else {
                v
            };
            write_bytes(buf, at, ryu::Buffer::new().format_finite(v).as_bytes())
        }
        _ => write_bytes(buf, at, b"null"),
    }
}

fn write_bytes(buf: &mut [u8], at: usize, b: &[u8]) -> usize {
    buf[at..at + b.len()].copy_from_slice(b);
    at + b.len()
}

/// Writes `n` in decimal at `at` (by `itoa`); returns where it ends.
fn write_u64(buf: &mut [u8], at: usize, n: u64) -> usize {
    write_bytes(buf, at, itoa::Buffer::new().format(n).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(v: &[Option<f64>]) -> String {
        let mut out = b"x".to_vec();
        write_cells(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn numbers_are_written_as_json_writes_them() {
        let cases = [
            (Some(0.0), "0"),
            (Some(7.0), "7"),
            (Some(10.0), "10"),
            (Some(99.0), "99"),
            (Some(100.0), "100"),
            (Some(1_234_567_891.0), "1234567891"),
            (Some(-42.0), "-42"),
            (Some(-0.0), "0"),
            (Some(9_007_199_254_740_991.0), "9007199254740991"),
            (Some(-9_007_199_254_740_991.0), "-9007199254740991"),
            (Some(1.000_000_000_4), "1.0"),
            (Some(0.25), "0.25"),
            (Some(-2.225_073_858_507_201_4e-308), "-0.0"),
            (
                Some(-1.797_693_134_862_315_7e308),
                "-1.7976931348623157e308",
            ),
            (Some(1e300), "1e300"),
            (Some(f64::NAN), "null"),
            (Some(f64::INFINITY), "null"),
            (None, "null"),
        ];
        for (v, want) in cases {
            assert_eq!(cells(&[v]), format!("x{want}"), "{v:?}");
        }
        let mut ints = vec![0u32, 5, 9, 10, 11, 99, 100, 999, 1000, 9999, 10_000];
        ints.extend([65_535, 99_999, 100_000, 123_456_789, u32::MAX]);
        let mut out = Vec::new();
        write_integers(&mut out, &ints);
        let want: Vec<String> = ints.iter().map(u32::to_string).collect();
        assert_eq!(String::from_utf8(out).unwrap(), want.join(","));
        let mut buf = [0u8; CELL * BATCH];
        for n in [0, 1, 9, 10, 99_999_999, 100_000_000, 1 << 53, u64::MAX] {
            let end = write_u64(&mut buf, 3, n);
            assert_eq!(&buf[3..end], n.to_string().as_bytes());
        }
        let end = write_u64(&mut buf, 3, u64::MAX);
        assert_eq!(&buf[3..end], u64::MAX.to_string().as_bytes());
    }

    #[test]
    fn integers_at_every_number_of_digits() {
        let mut buf = [0u8; CELL * BATCH];
        let edges = (0..20).flat_map(|e| {
            let p = 10u64.pow(e);
            [p - 1, p, p + 1]
        });
        for n in edges.chain([u64::MAX - 1, u64::MAX]) {
            let end = write_u64(&mut buf, 1, n);
            assert_eq!(&buf[1..end], n.to_string().as_bytes(), "{n}");
        }
    }

    #[test]
    fn batches_join_with_commas_and_the_longest_cells_fit() {
        for n in [0, 1, 63, 64, 65, 128, 200] {
            let v: Vec<Option<f64>> = (0..n)
                .map(|i| match i % 3 {
                    0 => Some(-1.797_693_134_862_315_7e308),
                    1 => Some(-9_007_199_254_740_991.0),
                    _ => None,
                })
                .collect();
            let want: Vec<String> = v
                .iter()
                .map(|x| match x {
                    Some(x) if x.abs() < 1e300 => format!("{x}"),
                    Some(_) => "-1.7976931348623157e308".into(),
                    None => "null".into(),
                })
                .collect();
            assert_eq!(cells(&v), format!("x{}", want.join(",")), "{n} cells");
        }
    }
}
