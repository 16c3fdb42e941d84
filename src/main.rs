//! perf-exporter: the binary. Parses the flags ([`perf_exporter::cli`]),
//! starts logging, runs the application ([`perf_exporter::app`]) and turns
//! its outcome into output and an exit code.

use perf_exporter::cli::{Args, LogFormat, LogLevel};
use std::io::Write as _;
use std::process::ExitCode;

fn init_logging(level: LogLevel, format: LogFormat) {
    let b = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(level.directive()))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => b.json().init(),
        LogFormat::Logfmt => b
            .event_format(perf_exporter::app::logfmt::Logfmt::default())
            .init(),
    }
}

/// An error and its causes, each said once: a cause whose text its parent
/// already includes (`cannot read x: No such file ...`) is not repeated.
fn render(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cause = c.source();
    }
    out
}

fn main() -> ExitCode {
    let args = Args::parse_args();
    let (level, format) = args.log();
    init_logging(level, format);
    match perf_exporter::app::run(args.settings()) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            let written = stdout
                .write_all(out.text.as_bytes())
                .and_then(|()| stdout.flush());
            if let Some(why) = out.failure {
                eprintln!("perf-exporter: check failed: {why}");
                return ExitCode::from(1);
            }
            match written {
                // `list | head -1`: the reader left; exit quietly, as Unix
                // tools do.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("perf-exporter: cannot write the output: {e}");
                    ExitCode::from(1)
                }
                Ok(()) => ExitCode::SUCCESS,
            }
        }
        // `stat | head -1`, `top | head`: the reader left while the
        // command was writing; exit quietly, as Unix tools do.
        Err(e) if broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perf-exporter: {}", render(&e));
            ExitCode::from(1)
        }
    }
}

/// Whether an error (or a cause of it) is a write to a closed pipe.
fn broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(c) = at {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        at = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config file x.yaml: {source}")]
    struct Outer {
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_said_once() {
        let e = Outer {
            source: std::io::Error::from_raw_os_error(2),
        };
        assert_eq!(
            render(&e),
            "cannot read config file x.yaml: No such file or directory (os error 2)"
        );
    }
}
