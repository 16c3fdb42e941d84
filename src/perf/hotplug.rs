//! A cheap CPU hotplug signal: the kernel's uevents.
//!
//! When a CPU goes online or offline (`echo 0 > .../cpuN/online`, SMT
//! control, physical hot-add), the kernel broadcasts a uevent such as
//! `offline@/devices/system/cpu/cpu1` to every `NETLINK_KOBJECT_UEVENT`
//! socket bound to multicast group 1, before the sysfs write returns. (It
//! reaches sockets of every network namespace owned by the initial user
//! namespace, so a container without a user namespace sees it too; no
//! privilege is needed to listen.) sysfs files cannot be watched with
//! inotify, and re-reading `devices/system/cpu/online` at every scrape
//! costs an `openat`, a `read` and a `close`; this costs nothing per scrape.
//!
//! [`UeventWatcher`] owns such a socket and a thread blocked in `poll(2)`
//! on it. For every CPU uevent it bumps a generation counter, which the
//! engine compares with the value it saw when it last read the online list
//! ([`Kernel::hotplug_generation`](super::Kernel::hotplug_generation)): an
//! atomic load, no syscall. [`UeventWatcher::wait`] blocks until it moves,
//! so the engine can apply a hotplug between scrapes. The thread is stopped
//! through an `eventfd` when the watcher is dropped.
//!
//! The signal can lag the sysfs write by the time the thread takes to be
//! scheduled, and no uevent reaches a container in its own user namespace,
//! so the engine also re-reads the online list when a group read fails
//! with `ENODEV` or a group's `time_enabled` stands still (the kernel stops
//! an offline CPU's events at once), and at every collection while a CPU
//! is known offline.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Why the watcher could not start.
#[derive(Debug, thiserror::Error)]
pub enum HotplugError {
    /// `socket(AF_NETLINK, ..., NETLINK_KOBJECT_UEVENT)` failed.
    #[error("cannot open a NETLINK_KOBJECT_UEVENT socket: {0}")]
    Socket(std::io::Error),
    /// Binding to the kernel's uevent multicast group failed.
    #[error("cannot bind the uevent socket to the kernel's multicast group: {0}")]
    Bind(std::io::Error),
    /// The stop `eventfd` could not be created.
    #[error("cannot create the watcher's stop eventfd: {0}")]
    EventFd(std::io::Error),
    /// The thread could not be spawned.
    #[error("cannot start the hotplug watcher thread: {0}")]
    Thread(std::io::Error),
}

/// Whether a kernel uevent message (`ACTION@DEVPATH\0KEY=VALUE\0...`) says a
/// CPU came or went: action `online`, `offline`, `add` or `remove` on
/// `/devices/system/cpu/cpuN`.
pub fn is_cpu_hotplug_uevent(msg: &[u8]) -> bool {
    let head = msg.split(|&b| b == 0).next().unwrap_or(&[]);
    let Some(at) = head.iter().position(|&b| b == b'@') else {
        return false;
    };
    let (action, devpath) = (&head[..at], &head[at + 1..]);
    if !matches!(action, b"online" | b"offline" | b"add" | b"remove") {
        return false;
    }
    devpath
        .strip_prefix(b"/devices/system/cpu/cpu")
        .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
}

struct Shared {
    generation: AtomicU64,
    /// The socket failed in a way that may lose events for good.
    failed: AtomicBool,
    /// Held while the generation moves, so a waiter cannot miss it.
    lock: Mutex<()>,
    /// Notified when the generation moves or the socket fails.
    moved: Condvar,
}

impl Shared {
    /// Runs `f` under the lock and wakes every waiter.
    fn signal(&self, f: impl FnOnce(&Self)) {
        let _g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        f(self);
        self.moved.notify_all();
    }
}

/// Counts CPU hotplug uevents on a background thread. See the
/// [module docs](self).
pub struct UeventWatcher {
    shared: Arc<Shared>,
    stop: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for UeventWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UeventWatcher")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

fn last_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn uevent_socket() -> Result<OwnedFd, HotplugError> {
    // SAFETY: socket(2) takes no pointers; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::NETLINK_KOBJECT_UEVENT,
        )
    };
    if fd < 0 {
        return Err(HotplugError::Socket(last_error()));
    }
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_nl is plain data for which all-zero is valid.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_pid = 0; // let the kernel pick the port id
    addr.nl_groups = 1; // the kernel's uevents (udev re-broadcasts on 2)
                        // SAFETY: the pointer and length describe a live, initialised
                        // sockaddr_nl for the duration of the call.
    let r = unsafe {
        libc::bind(
            sock.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(HotplugError::Bind(last_error()));
    }
    Ok(sock)
}

fn eventfd() -> Result<OwnedFd, HotplugError> {
    // SAFETY: eventfd(2) takes no pointers; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(HotplugError::EventFd(last_error()));
    }
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads every queued message; true if one was a CPU hotplug uevent from
/// the kernel, or if messages were lost. `Err` on an error that may lose
/// events for good.
fn drain(sock: RawFd, buf: &mut [u8]) -> Result<bool, std::io::Error> {
    let mut changed = false;
    loop {
        // SAFETY: sockaddr_nl is plain data for which all-zero is valid.
        let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        // SAFETY: buf is writable for buf.len() bytes, and from/len
        // describe a live sockaddr_nl, for the duration of the call.
        let n = unsafe {
            libc::recvfrom(
                sock,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&mut from as *mut libc::sockaddr_nl).cast(),
                &mut len,
            )
        };
        if n < 0 {
            let e = last_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(changed),
                Some(libc::EINTR) => continue,
                // The receive queue overflowed: events were dropped, one
                // of them may have been a CPU's.
                Some(libc::ENOBUFS) => changed = true,
                _ => return Err(e),
            }
            continue;
        }
        let n = (n as usize).min(buf.len());
        // Only the kernel (port id 0) sends uevents; ignore anything else.
        if from.nl_pid == 0 && is_cpu_hotplug_uevent(&buf[..n]) {
            changed = true;
        }
    }
}

fn run(sock: OwnedFd, stop: Arc<OwnedFd>, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 8192];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds is a live array of two pollfd for the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if r < 0 {
            if last_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break;
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents != 0 {
            match drain(sock.as_raw_fd(), &mut buf) {
                Ok(true) => shared.signal(|s| {
                    s.generation.fetch_add(1, Ordering::SeqCst);
                }),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "hotplug uevent socket failed; reading the online CPU list at every scrape from now on");
                    break;
                }
            }
        }
    }
    shared.signal(|s| s.failed.store(true, Ordering::SeqCst));
}

impl UeventWatcher {
    /// Opens the uevent socket and starts the thread.
    pub fn start() -> Result<Self, HotplugError> {
        let sock = uevent_socket()?;
        let stop = Arc::new(eventfd()?);
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            lock: Mutex::new(()),
            moved: Condvar::new(),
        });
        let thread = {
            let (stop, shared) = (stop.clone(), shared.clone());
            std::thread::Builder::new()
                .name("perf-hotplug".into())
                .stack_size(128 * 1024)
                .spawn(move || run(sock, stop, shared))
                .map_err(HotplugError::Thread)?
        };
        Ok(UeventWatcher {
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// How many CPU hotplug uevents (or bursts of them) were seen; `None`
    /// once the socket failed (the caller must then poll the online list).
    pub fn generation(&self) -> Option<u64> {
        if self.shared.failed.load(Ordering::SeqCst) {
            return None;
        }
        Some(self.shared.generation.load(Ordering::SeqCst))
    }

    /// Blocks until the generation differs from `seen` or `timeout`
    /// passes; returns the generation then (`None` once the socket failed).
    pub fn wait(&self, seen: u64, timeout: Duration) -> Option<u64> {
        let deadline = Instant::now() + timeout;
        let mut g = self
            .shared
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            let now = self.generation()?;
            let left = deadline.saturating_duration_since(Instant::now());
            if now != seen || left.is_zero() {
                return Some(now);
            }
            g = self
                .shared
                .moved
                .wait_timeout(g, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for UeventWatcher {
    fn drop(&mut self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of a live u64 to our eventfd.
        let r = unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if r == std::mem::size_of::<u64>() as isize {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        // Otherwise the thread stays blocked in poll(2); it holds its own
        // references to the fds, so nothing is closed under it.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_uevents() {
        let m = |s: &str| is_cpu_hotplug_uevent(s.as_bytes());
        assert!(m("offline@/devices/system/cpu/cpu1\0ACTION=offline\0"));
        assert!(m("online@/devices/system/cpu/cpu17\0"));
        assert!(m("add@/devices/system/cpu/cpu255"));
        assert!(m("remove@/devices/system/cpu/cpu3\0"));
        assert!(!m("change@/devices/system/cpu/cpu0\0"));
        assert!(!m("online@/devices/system/cpu/cpufreq\0"));
        assert!(!m("online@/devices/system/cpu/cpu1/cache\0"));
        assert!(!m("online@/devices/system/memory/memory3\0"));
        assert!(!m("add@/devices/system/cpu/cpu\0"));
        assert!(!m("libudev\0"));
        assert!(!m(""));
    }

    #[test]
    fn watcher_starts_and_stops() {
        let w = UeventWatcher::start().expect("uevent socket");
        assert_eq!(w.generation(), Some(0));
        assert_eq!(w.wait(0, Duration::from_millis(1)), Some(0));
        drop(w);
    }
}
