"""A resolve whose uv waits on something that never comes is stopped by the stall limit
(TORCHFIT_STALL_TIMEOUT), in one line, with nothing left running (issue 34, R4 and R5):
a package index page that stops mid-body (uv's read would retry for minutes), and a source
build that sleeps while uv asks it for metadata. Real uv, a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.fakehost import alive
from tests.support.servers import http_server
from tests.support.wheels import write_sdist
from tests.test_planning import CPU_HOST, torch_tree

pytestmark = pytest.mark.slow

STALL = "uv made no progress for 5 s while resolving the project"


def _stopped(proc: object, took: float, building: bool) -> None:
    err = proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode == 1, err  # type: ignore[attr-defined]
    line = next(ln for ln in err.splitlines() if ln.startswith("torchfit: error:"))
    assert STALL in line and line.endswith("[resolve-failed]"), err
    assert ("(building a package from source to read its metadata)" in line) == building, err
    assert "TORCHFIT_STALL_TIMEOUT=SECONDS" in err and "Traceback" not in err
    assert took < 60, took  # the limit, not uv's own retries of minutes


def test_a_page_that_stops_mid_body_is_stopped_at_the_stall_limit(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    body = b"<html><body>" + b"<a href='slowpkg-1.0.tar.gz'>slowpkg-1.0.tar.gz</a>" * 10

    def answer(req: object) -> None:
        if req.path.rstrip("/").endswith("/simple/slowpkg"):  # type: ignore[attr-defined]
            req.send_response(200)  # type: ignore[attr-defined]
            req.send_header("Content-Type", "text/html")  # type: ignore[attr-defined]
            req.send_header("Content-Length", str(len(body) * 4))  # type: ignore[attr-defined]
            req.end_headers()  # type: ignore[attr-defined]
            req.wfile.write(body)  # type: ignore[attr-defined]
            req.wfile.flush()  # type: ignore[attr-defined]
            time.sleep(90)  # the rest never comes
            return
        req.send_response(404)  # type: ignore[attr-defined]
        req.end_headers()  # type: ignore[attr-defined]

    with http_server(answer) as srv:
        start = time.monotonic()
        proc = run_cli("resolve", *CPU_HOST, "--torch-index-url", index.as_uri(), "--index-url", srv.url + "/simple",
                       "--allow-insecure-index", "slowpkg",
                       env={"TORCHFIT_STALL_TIMEOUT": "5", "XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=120)
        _stopped(proc, time.monotonic() - start, building=False)


def test_a_build_that_sleeps_while_uv_reads_its_metadata_is_stopped(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    marker = tmp_path / "pid"
    backend = ("import os, time\n"
               "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
               "def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):\n"
               f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n    time.sleep(300)\n"
               "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n    time.sleep(300)\n")
    write_sdist(tmp_path / "links", "sleepy-1.0", {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
                          '[project]\nname = "sleepy"\ndynamic = ["version", "dependencies"]\n',
        "backend.py": backend})
    start = time.monotonic()
    proc = run_cli("resolve", "--offline", *CPU_HOST, "--torch-index-url", index.as_uri(),
                   "--find-links", str(tmp_path / "links"), "sleepy",
                   env={"TORCHFIT_STALL_TIMEOUT": "5", "XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=120)
    _stopped(proc, time.monotonic() - start, building=True)
    assert "sleepy 1.0 has no wheel: building it to read its metadata" in proc.stderr
    pid = int(marker.read_text())  # the build ran, and was stopped with uv
    time.sleep(0.5)
    assert not alive(pid), "the sleeping build outlived torchfit"
