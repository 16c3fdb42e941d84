"""Real container runtimes for the image tests (test_container.py): buildah
and podman on a private image store (.cache/deploy/storage, made by
scripts/images.sh), and a private containerd (own socket, root and state in
a temporary directory; never the system's). Every wait has a deadline."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import REPO

CACHE = REPO / ".cache/deploy"
STORAGE = CACHE / "storage"
STAMP = CACHE / "stamp"
RUST_BASE = "localhost/standin/rust:1-bookworm"
RUNTIME_BASE = "localhost/standin/distroless-cc:nonroot"
RUNTIME_BASE_ARM64 = "localhost/standin/distroless-cc:nonroot-arm64"
# A cold release build on 2 shared cores takes minutes; a cached one seconds.
BUILD_TIMEOUT = 60 * 60


def sh(cmd: list, timeout: float = 120, check: bool = True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(what: str, fn, deadline_s: float, interval: float = 0.2):
    """Calls fn until it returns a truthy value or the deadline passes."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {deadline_s} s (last: {last!r})")


def get(url: str) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None


class Store:
    """buildah/podman on the private containers-storage under .cache/deploy."""

    # Fixed: podman's database remembers it. On /run, so a reboot clears it.
    RUNROOT = Path("/run/perf-exporter-deploy-tests")

    def __init__(self):
        self.flags = ["--root", STORAGE, "--runroot", self.RUNROOT, "--storage-driver", "overlay"]

    def buildah(self, *args, timeout: float = 300, check: bool = True):
        return sh(["buildah", *self.flags, *args], timeout=timeout, check=check)

    def podman(self, *args, timeout: float = 120, check: bool = True):
        return sh(["podman", *self.flags, "--cgroup-manager", "cgroupfs", "--events-backend", "none",
                   *args], timeout=timeout, check=check)

    def derive(self, image: str, tag: str, user: str | None = None, drop_file_caps: bool = False) -> str:
        """A copy of image with another user, or with the binary's file
        capability removed (what an image pipeline that drops xattrs does)."""
        c = self.buildah("from", "--pull-never", image).stdout.strip()
        try:
            if user:
                self.buildah("config", "--user", user, c)
            if drop_file_caps:
                root = Path(self.buildah("mount", c).stdout.strip())
                sh(["setcap", "-r", root / "bin/perf-exporter"])
                assert sh(["getcap", root / "bin/perf-exporter"]).stdout.strip() == ""
                self.buildah("umount", c)
            self.buildah("rmi", tag, check=False)  # the previous run's
            self.buildah("commit", "--quiet", c, tag)
        finally:
            self.buildah("rm", c, check=False)
        return tag


# The capabilities of containerd's default spec. ctr takes no "ALL": each is
# dropped by name; the tests then check the process's sets in /proc.
DEFAULT_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
                "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
                "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]


class Containerd:
    """A private containerd: its own socket, root and state under a temporary
    directory, the CRI plugin off; bindir holds its containerd, ctr and shim
    (None: the system's). Stop it with stop() (kills its tasks)."""

    NS = "perf-exporter-test"

    def __init__(self, bindir: Path | None = None):
        self.bin = (lambda name: str(bindir / name)) if bindir else (lambda name: name)
        env = dict(os.environ)
        if bindir:
            env["PATH"] = f"{bindir}:{env['PATH']}"  # its shim
        self.dir = Path(tempfile.mkdtemp(prefix="pe-ctrd-"))
        self.sock = self.dir / "containerd.sock"
        cfg = self.dir / "config.toml"
        cfg.write_text(f'''version = 2
root = "{self.dir}/root"
state = "{self.dir}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.dir}/containerd.sock.ttrpc"
''')
        self.log = open(self.dir / "containerd.log", "w")
        self.proc = subprocess.Popen([self.bin("containerd"), "--config", cfg], stdout=self.log, stderr=self.log,
                                     start_new_session=True, env=env)
        self.names: list[str] = []
        poll("containerd answers", lambda: self.proc.poll() is None and
             self.ctr("version", check=False).returncode == 0, 30)
        # The shim keeps runc's state per namespace outside our directory:
        # a run that was killed leaves its containers there, and the next
        # run of the same name fails with "container with given ID already
        # exists". The namespace is this suite's own.
        runc_root = Path("/run/containerd/runc") / self.NS
        if runc_root.is_dir():
            for stale in runc_root.iterdir():
                sh(["runc", "--root", runc_root, "delete", "--force", stale.name], check=False)

    def version(self) -> str:
        out = self.ctr("version").stdout
        return re.search(r"Server:\s+Version:\s+v?(\S+)", out).group(1)

    def ctr(self, *args, timeout: float = 120, check: bool = True):
        return sh([self.bin("ctr"), "--address", self.sock, "--namespace", self.NS, *args], timeout=timeout, check=check)

    def import_image(self, store: Store, image: str) -> None:
        archive = self.dir / "image.tar"
        store.buildah("push", "--quiet", image, f"oci-archive:{archive}:{image}")
        self.ctr("images", "import", archive, timeout=300)
        archive.unlink()

    def flags(self, caps: list[str], seccomp: bool, allow_new_privs: bool, mounts=()) -> list[str]:
        """The chart's securityContext for ctr run: read-only root, every
        capability dropped but caps, no_new_privs (unless allow_new_privs),
        the runtime's default seccomp profile; the host's /sys read-only at
        /host/sys (as the chart mounts it), and `mounts` ((host path,
        container path) pairs) read-only; host network."""
        flags = ["--net-host", "--read-only", "--mount", "type=bind,src=/sys,dst=/host/sys,options=rbind:ro"]
        for src, dst in mounts:
            flags += ["--mount", f"type=bind,src={src},dst={dst},options=rbind:ro"]
        flags += [f for c in DEFAULT_CAPS for f in ("--cap-drop", c)]
        flags += [f for c in caps for f in ("--cap-add", f"CAP_{c}")]
        if seccomp:
            flags.append("--seccomp")
        if allow_new_privs:
            flags.append("--allow-new-privs")
        return flags

    def run(self, image: str, name: str, args: list[str], caps: list[str], *, seccomp: bool = True,
            allow_new_privs: bool = False, mounts=()) -> "Task":
        """Runs image detached (see flags()), its output to a log file."""
        log = self.dir / f"{name}.log"
        self.ctr("run", "--detach", "--log-uri", f"file://{log}", *self.flags(caps, seccomp, allow_new_privs, mounts),
                 image, name, "/bin/perf-exporter", *args, timeout=60)
        self.names.append(name)
        return Task(self, name, log)

    def run_to_exit(self, image: str, name: str, args: list[str], caps: list[str], *, seccomp: bool = True,
                    allow_new_privs: bool = False, deadline_s: float = 60) -> subprocess.CompletedProcess:
        """Runs image in the foreground (see flags()) until it exits: ctr's
        exit code is the container's."""
        self.names.append(name)  # stop() removes it if the deadline passes
        return self.ctr("run", "--rm", *self.flags(caps, seccomp, allow_new_privs), image, name,
                        "/bin/perf-exporter", *args, timeout=deadline_s, check=False)

    def stop(self) -> None:
        for name in self.names:
            self.ctr("tasks", "kill", "--signal", "SIGKILL", name, check=False, timeout=30)
            poll(f"{name} is gone", lambda n=name: self.ctr("tasks", "delete", n, check=False).returncode == 0
                 or n not in self.ctr("tasks", "ls", check=False).stdout, 30)
            self.ctr("containers", "delete", name, check=False)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()
        sh(["umount", "-R", self.dir / "root"], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class Task:
    def __init__(self, ctrd: Containerd, name: str, log: Path):
        self.ctrd, self.name, self.logfile = ctrd, name, log

    def log(self) -> str:
        return self.logfile.read_text() if self.logfile.exists() else ""

    def _row(self) -> list[str]:
        """This task's line of `ctr tasks ls`: TASK PID STATUS."""
        for line in self.ctrd.ctr("tasks", "ls").stdout.splitlines()[1:]:
            f = line.split()
            if f and f[0] == self.name:
                return f
        return [self.name, "0", "UNKNOWN"]

    def status(self) -> str:
        return self._row()[2]

    def pid(self) -> int:
        pid = int(self._row()[1])
        assert pid > 0, f"no task {self.name}"
        return pid
