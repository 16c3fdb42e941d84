"""Shared fixtures of the deploy tests (Helm chart, dashboards, rules).

Run through scripts/test.sh, which installs the tools (scripts/fetch-tools.sh)
and the servers (scripts/fetch-servers.sh) and builds the exporter first. A
tool that is missing fails the test that needs it, loudly; nothing is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy/helm/perf-exporter"
GRAFANA = REPO / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
RULES = GRAFANA / "rules/perf-exporter.rules.yml"
RULES_TEST = GRAFANA / "rules/perf-exporter.rules.test.yml"
FIXTURES = REPO / "tests/fixtures/sysfs"
# A cgroup v2 tree in the Kubernetes layout (systemd driver, containerd).
CGROUP_FIXTURE = REPO / "tests/fixtures/cgroup/kubernetes-systemd"


def _tool(env: str, default: Path, what: str) -> Path:
    p = Path(os.environ[env]) if os.environ.get(env) else default
    if not p.exists():
        pytest.fail(f"{what} not found: {env} is not set and {default} does not exist; "
                    "run scripts/test.sh (or scripts/fetch-tools.sh / scripts/fetch-servers.sh / cargo build)")
    return p


@pytest.fixture(scope="session")
def node_modules() -> Path:
    return _tool("PERF_EXPORTER_TEST_NODE_MODULES", REPO / ".cache/tools/node/node_modules",
                 "node_modules with @grafana/schema and typescript")


def node_bin() -> Path:
    """The Node.js the tests run (scripts/fetch-tools.sh: this host's if >= 20,
    else one from the npm registry)."""
    return _tool("PERF_EXPORTER_TEST_NODE", REPO / ".cache/tools/bin/node", "Node.js (>= 20)")


@pytest.fixture(scope="session")
def promtool() -> Path:
    return _tool("PERF_EXPORTER_TEST_PROMTOOL", REPO / ".cache/servers/root/usr/bin/promtool", "promtool")


@pytest.fixture(scope="session")
def exporter_bin() -> Path:
    return _tool("PERF_EXPORTER_BIN", REPO / "target/debug/perf-exporter", "the perf-exporter binary")


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    """Runs cmd, returns the completed process (stdout/stderr as text)."""
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, **kw)


def tsc_check(node_modules: Path, files: dict[str, str], tmp_path: Path) -> None:
    """Type-checks TypeScript sources (name -> text) with the installed tsc,
    in a directory next to node_modules so that imports resolve; fails with
    tsc's output on any error."""
    work = node_modules.parent / f"check-{os.getpid()}-{tmp_path.name}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    try:
        for name, text in files.items():
            (work / name).write_text(text)
        tsconfig = {
            "compilerOptions": {
                "strict": True, "noEmit": True, "target": "es2022", "module": "nodenext",
                "moduleResolution": "nodenext", "skipLibCheck": True, "types": [],
                "noErrorTruncation": True,
            },
            "files": [n for n in files if n.endswith(".ts")],
        }
        (work / "tsconfig.json").write_text(json.dumps(tsconfig))
        r = run([node_bin(), node_modules / "typescript/bin/tsc", "-p", work], cwd=work)
        assert r.returncode == 0, f"tsc found type errors:\n{r.stdout}\n{r.stderr}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
