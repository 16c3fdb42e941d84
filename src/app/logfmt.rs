//! `--log.format logfmt`: one `key=value` line per event, as Loki's and
//! Vector's logfmt parsers (and go-logfmt, which Prometheus's exporters
//! write with) read it:
//!
//! ```text
//! time=2026-11-26T17:17:40.610127Z level=info target=perf_exporter::web msg=listening address=127.0.0.1:9659
//! ```
//!
//! The time, level, target and message are keys like any field. A value
//! is quoted when it is empty or holds a space, `=`, `"` or a control
//! character; inside quotes `"` and `\` are escaped with `\`, and newlines,
//! tabs and other control characters are written as escapes, so an event
//! is always exactly one line. The exporter opens no spans: only the
//! event's own fields are written.

use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The logfmt event formatter, with the time written by `T` (RFC 3339 in
/// UTC by default).
#[derive(Debug, Clone)]
pub struct Logfmt<T = SystemTime> {
    timer: T,
}

impl Default for Logfmt {
    fn default() -> Self {
        Logfmt { timer: SystemTime }
    }
}

impl<T> Logfmt<T> {
    /// A formatter that takes the time from `timer`.
    pub fn with_timer(timer: T) -> Self {
        Logfmt { timer }
    }
}

fn level_str(l: &Level) -> &'static str {
    match *l {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

/// Whether a value must be quoted.
fn needs_quotes(v: &str) -> bool {
    v.is_empty()
        || v.chars()
            .any(|c| c == ' ' || c == '=' || c == '"' || c.is_control() || c.is_whitespace())
}

/// Writes `v` as a logfmt value: bare when it can be, else quoted and
/// escaped.
fn write_value(w: &mut impl fmt::Write, v: &str) -> fmt::Result {
    if !needs_quotes(v) {
        return w.write_str(v);
    }
    w.write_char('"')?;
    for c in v.chars() {
        match c {
            '"' => w.write_str("\\\"")?,
            '\\' => w.write_str("\\\\")?,
            '\n' => w.write_str("\\n")?,
            '\r' => w.write_str("\\r")?,
            '\t' => w.write_str("\\t")?,
            c if c.is_control() => write!(w, "\\u{:04x}", u32::from(c))?,
            c => w.write_char(c)?,
        }
    }
    w.write_char('"')
}

/// Collects the message and the other fields, in order.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    pairs: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = Some(value);
        } else {
            self.pairs.push((field.name(), value));
        }
    }
}

/// Keys the line itself writes; a field of the same name is written as
/// `field.NAME` so that no key appears twice.
const RESERVED: [&str; 4] = ["time", "level", "target", "msg"];

impl<S, N, T> FormatEvent<S, N> for Logfmt<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut time = String::new();
        self.timer.format_time(&mut Writer::new(&mut time))?;
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut line = String::with_capacity(128);
        line.push_str("time=");
        write_value(&mut line, &time)?;
        line.push_str(" level=");
        line.push_str(level_str(meta.level()));
        line.push_str(" target=");
        write_value(&mut line, meta.target())?;
        line.push_str(" msg=");
        write_value(&mut line, fields.message.as_deref().unwrap_or(""))?;
        for (k, v) in &fields.pairs {
            line.push(' ');
            if RESERVED.contains(k) {
                line.push_str("field.");
            }
            line.push_str(k);
            line.push('=');
            write_value(&mut line, v)?;
        }
        line.push('\n');
        writer.write_str(&line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::{Arc, Mutex};

    struct FixedTime;
    impl FormatTime for FixedTime {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            w.write_str("2026-11-26T17:17:40.610127Z")
        }
    }

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn capture(f: impl FnOnce()) -> String {
        let buf = Buf::default();
        let out = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(Level::DEBUG)
            .with_writer(move || buf.clone())
            .event_format(Logfmt::with_timer(FixedTime))
            .finish();
        tracing::subscriber::with_default(sub, f);
        let bytes = out.0.lock().expect("lock").clone();
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn lines_are_logfmt_with_time_level_and_msg_as_keys() {
        let out = capture(|| {
            tracing::info!(address = "127.0.0.1:9659", path = "/metrics", "listening");
            tracing::warn!(
                metric = "perf_cpu_cycles_total",
                reason = %"no core PMU in sysfs: a = b",
                count = 3,
                ok = true,
                "metric not (fully) available"
            );
        });
        assert_eq!(
            out,
            "time=2026-11-26T17:17:40.610127Z level=info target=perf_exporter::app::logfmt::tests msg=listening address=127.0.0.1:9659 path=/metrics\n\
             time=2026-11-26T17:17:40.610127Z level=warn target=perf_exporter::app::logfmt::tests msg=\"metric not (fully) available\" metric=perf_cpu_cycles_total reason=\"no core PMU in sysfs: a = b\" count=3 ok=true\n"
        );
    }

    #[test]
    fn quotes_backslashes_newlines_and_control_characters_are_escaped() {
        let out = capture(|| {
            tracing::error!(
                path = "C:\\x \"y\"",
                text = "two\nlines\tand\u{1b}[31m",
                empty = "",
                eq = "a=b",
                msg = "a field named like a key",
                "multi\nline"
            );
        });
        assert_eq!(
            out,
            "time=2026-11-26T17:17:40.610127Z level=error target=perf_exporter::app::logfmt::tests msg=\"multi\\nline\" path=\"C:\\\\x \\\"y\\\"\" text=\"two\\nlines\\tand\\u001b[31m\" empty=\"\" eq=\"a=b\" field.msg=\"a field named like a key\"\n"
        );
        assert_eq!(out.lines().count(), 1);
    }

    /// Issue 26 item 4: a reason is logged through one renderer
    /// (`LogFields`, written by `log_reason!`): the subject, then `code`,
    /// `reason` and `what_to_do`, then the rest.
    #[test]
    fn a_reason_is_logged_as_code_reason_and_what_to_do() {
        use crate::problem::{log_reason, LogFields, Problem};
        let p = Problem::GroupTooLarge {
            set: "topdown".into(),
            pmu: "cpu".into(),
            events: 5,
            counters: 2,
        };
        let out = capture(|| {
            log_reason!(
                Level::WARN,
                LogFields::of(&p),
                [pmu = "cpu",],
                [n = 1,],
                "group split"
            );
        });
        let expected = format!(
            "time=2026-11-26T17:17:40.610127Z level=warn target=perf_exporter::app::logfmt::tests msg=\"group split\" pmu=cpu code=group_too_large reason=\"{}\" what_to_do=\"{}\" n=1\n",
            p,
            p.what_to_do()
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn a_bare_value_has_nothing_to_quote() {
        let mut s = String::new();
        write_value(&mut s, "perf_cpu_cycles_total").expect("write");
        assert_eq!(s, "perf_cpu_cycles_total");
        for v in ["", "a b", "a=b", "a\"b", "a\nb"] {
            let mut s = String::new();
            write_value(&mut s, v).expect("write");
            assert!(s.starts_with('"') && s.ends_with('"'), "{v:?} -> {s}");
        }
    }
}
