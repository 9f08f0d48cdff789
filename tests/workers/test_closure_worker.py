"""workers/closure_worker.py run by real interpreters, judged by lock.closure: the one closure
check `install --lock` and `verify --lock` share (issue 17; the two callers used to
ignore different NCCL wheels, and the probe was a program in a string with its own marker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchfit.lock.closure import probe_closure
from torchfit.runner import Runner
from torchfit.workers import last_record, read_records, worker_argv

PACKAGING_ENV = r"""
import json, sys
sys.path[:0] = [%r]
from packaging.markers import default_environment
print(json.dumps(default_environment()))
"""


def _dist(site: Path, name: str, version: str, *requires: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    body = "".join(f"Requires-Dist: {r}\n" for r in requires)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{body}")
    (info / "RECORD").write_text("")


@pytest.fixture
def env(tmp_path: Path) -> Path:
    """A venv whose torch pins nvidia-nccl-cu12 2.27.3, holding 2.28.3 (an `install --nccl` pin) and filelock."""
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    site = next((prefix / "lib").glob("python3.*")) / "site-packages"
    _dist(site, "torch", "2.8.0", "nvidia-nccl-cu12==2.27.3; platform_system == 'Linux'", "filelock",
          "numpy; extra == 'opt'")
    _dist(site, "nvidia-nccl-cu12", "2.28.3")
    _dist(site, "filelock", "3.16.1")
    return prefix


def test_the_worker_speaks_the_record_protocol_with_packagings_marker_names(env: Path) -> None:
    python = str(env / "bin" / "python")
    res = subprocess.run(worker_argv(python, "closure"), capture_output=True, text=True, timeout=60)
    records = read_records(res.stdout)
    assert [r["kind"] for r in records] == ["closure", "done"], res.stdout + res.stderr
    data = last_record(records, "closure")
    assert data is not None
    # The env's interpreter answers, with the names and values packaging evaluates markers against.
    import packaging

    ours = subprocess.run([python, "-c", PACKAGING_ENV % os.path.dirname(os.path.dirname(packaging.__file__))],
                          capture_output=True, text=True, timeout=60, check=True)
    assert data["env"] == json.loads(ours.stdout)
    dists = {d[0]: d for d in data["dists"]}
    assert dists["torch"][1:] == ["2.8.0", ["nvidia-nccl-cu12==2.27.3; platform_system == 'Linux'", "filelock",
                                            "numpy; extra == 'opt'"], True]
    assert "torchfit" not in dists  # the worker's own directory is not the env's


def test_probe_closure_judges_the_nccl_wheel_by_the_pin_for_both_callers(env: Path) -> None:
    python = str(env / "bin" / "python")
    strict = probe_closure(python, Runner(), nccl_override=False)
    assert strict.count == 3
    assert strict.problems is not None and len(strict.problems) == 1
    assert "nvidia-nccl-cu12" in strict.problems[0] and "2.28.3" in strict.problems[0]
    assert probe_closure(python, Runner(), nccl_override=True).problems == ()


def test_a_missing_dependency_is_named(env: Path) -> None:
    site = next((env / "lib").glob("python3.*")) / "site-packages"
    for p in site.glob("filelock-*.dist-info/*"):
        p.unlink()
    next(site.glob("filelock-*.dist-info")).rmdir()
    problems = probe_closure(str(env / "bin" / "python"), Runner(), nccl_override=True).problems
    assert problems == ("torch 2.8.0 requires filelock, which is not installed",)


def test_an_interpreter_without_importlib_metadata_is_no_answer_with_its_reason() -> None:
    """Python 3.7 has no importlib.metadata: the worker's `error` record is the reason."""
    python = os.path.expanduser("~/.pyenv/versions/3.7.16/bin/python3.7")
    if not os.access(python, os.X_OK):
        pytest.skip("no pyenv Python 3.7 here")
    closure = probe_closure(python, Runner(), nccl_override=False)
    assert closure.problems is None
    assert closure.failure.startswith("ImportError: ") and "metadata" in closure.failure, closure.failure


def test_an_interpreter_that_does_not_run_is_no_answer_with_its_stderr(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'error while loading shared libraries: libpython3.11.so.1.0' >&2\nexit 127\n")
    python.chmod(0o755)
    closure = probe_closure(str(python), Runner(), nccl_override=False)
    assert closure.problems is None and closure.result.returncode == 127
    assert "libpython3.11.so.1.0" in closure.failure
