//! Driving a command in a tmux session, as a user at a terminal would:
//! start it, read the pane (polling with a deadline), send keys.

use std::process::Command;
use std::time::Duration;

/// Runs `tmux args`, returning its standard output.
pub(crate) fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `tmux capture-pane` until `f` holds.
pub(crate) fn wait_pane(
    session: &str,
    what: &str,
    limit: Duration,
    f: impl Fn(&str) -> bool,
) -> String {
    let mut last = String::new();
    super::poll(limit, Duration::from_millis(100), || {
        let pane = tmux(&["capture-pane", "-p", "-J", "-S", "-200", "-t", session]);
        if f(&pane) {
            return Some(pane);
        }
        last = pane;
        None
    })
    .unwrap_or_else(|| panic!("{what}: pane:\n{last}"))
}

/// A tmux session, killed on drop.
pub(crate) struct Session(pub String);

impl Session {
    /// Starts `cmd` in a new detached 200×50 session named `name`; panics
    /// when tmux is not on PATH.
    pub(crate) fn start(name: &str, cmd: &str) -> Session {
        let tmux_ok = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(tmux_ok, "this test needs `tmux` on PATH");
        tmux(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "200",
            "-y",
            "50",
            cmd,
        ]);
        Session(name.to_string())
    }
}

impl Session {
    /// Sends Ctrl-C, waits for the `EXIT=$?` the session's command line
    /// echoes after the command, asserts that it exited 0, and returns
    /// the pane.
    pub(crate) fn ctrl_c_exits_0(&self) -> String {
        tmux(&["send-keys", "-t", &self.0, "C-c"]);
        let pane = wait_pane(&self.0, "exit after Ctrl-C", Duration::from_secs(10), |p| {
            p.contains("EXIT=")
        });
        assert!(pane.contains("EXIT=0"), "{pane}");
        pane
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}
