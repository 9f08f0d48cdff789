"""installer/python.py and host/pythons.py's uv reading, as data: uv 0.13.10's own outputs
(`uv python install` failures measured on this machine, 2026-12-07; `uv python list --only-downloads
--output-format json` rows trimmed to the keys read)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchfit.host.pythons import describe_uv_python_source, parse_uv_downloads
from torchfit.installer.python import explain_uv_failure, uv_request

OFFLINE = """error: Failed to install cpython-3.11.7-linux-x86_64-gnu
  cause: Failed to download `https://github.com/astral-sh/python-build-standalone/releases/download/20240107/cpython-3.11.7%2B20240107-x86_64-unknown-linux-gnu-install_only.tar.gz`
  cause: Network connectivity is disabled, but the requested data wasn't found in the cache: https://github.com/astral-sh/python-build-standalone/releases/download/20240107/cpython-3.11.7%2B20240107-x86_64-unknown-linux-gnu-install_only.tar.gz
"""
NO_NETWORK = """error: Failed to install cpython-3.11.7-linux-x86_64-gnu
  cause: Request failed after 3 retries in 10.7s
  cause: Failed to download `https://github.com/astral-sh/python-build-standalone/releases/download/20240107/cpython-3.11.7%2B20240107-x86_64-unknown-linux-gnu-install_only.tar.gz`
  cause: dns error
  cause: failed to lookup address information: Name or service not known
"""
NO_DOWNLOAD = "error: No download found for request: cpython-3.12-linux-x86_64-gnu\n"
MIRROR_LACKS = """error: Failed to install cpython-3.11.7-linux-x86_64-gnu
  cause: failed to query metadata of file `/srv/mirror/20260101/cpython-3.11.7+20260101-x86_64-unknown-linux-gnu-install_only.tar.gz`: No such file or directory (os error 2)
"""


@pytest.mark.parametrize(("output", "said"), [
    (OFFLINE, "uv is offline (--offline or UV_OFFLINE) and its store has no Python 3.11.7"),
    (NO_DOWNLOAD, "uv's downloads list has no Python 3.11.7 for this platform"),
    (NO_NETWORK, "uv could not fetch Python 3.11.7 from https://github.com/astral-sh/python-build-standalone/"
                 "releases/download/20240107/cpython-3.11.7%2B20240107-x86_64-unknown-linux-gnu-install_only.tar.gz: "
                 "failed to lookup address information: Name or service not known"),
    (MIRROR_LACKS, "uv could not fetch Python 3.11.7: failed to query metadata of file `/srv/mirror/20260101/"
                   "cpython-3.11.7+20260101-x86_64-unknown-linux-gnu-install_only.tar.gz`: No such file or "
                   "directory (os error 2)"),
    ("", "uv could not fetch Python 3.11.7: no output"),
])
def test_why_uv_could_not(output: str, said: str) -> None:
    assert explain_uv_failure(output, "3.11.7") == said


@given(st.text(max_size=400))
def test_explain_never_raises(text: str) -> None:
    assert explain_uv_failure(text, "3.12").startswith(("uv", "Python"))


def _row(version: str, **kw: str) -> dict[str, str]:
    return {"implementation": "cpython", "version": version, "os": "linux", "libc": "gnu",
            "arch": "x86_64", "variant": "default", **kw}


def test_uv_downloads_for_this_platform() -> None:
    rows = [_row("3.16.0a2"), _row("3.14.2", variant="freethreaded"), _row("3.14.2"),
            _row("3.13.1", libc="musl"), _row("3.13.1", arch="aarch64"), _row("3.12.8", os="macos"),
            _row("3.12.8", implementation="pypy"), _row("3.12.8", variant="debug"), _row("3.11.7"), _row("3.11.7")]
    assert parse_uv_downloads(json.dumps(rows), "x86_64") == ("3.14.2t", "3.14.2", "3.11.7")
    assert parse_uv_downloads(json.dumps(rows), "aarch64") == ("3.13.1",)


@given(st.text(max_size=200))
def test_uv_downloads_garbage_is_empty_or_versions(text: str) -> None:
    assert all(isinstance(v, str) for v in parse_uv_downloads(text, "x86_64"))


def test_the_source_is_the_sites_setting_else_uv_default() -> None:
    assert describe_uv_python_source({}) == "python-build-standalone's releases (uv's default downloads)"
    env = {"UV_PYTHON_INSTALL_MIRROR": "https://u:secret@mirror.example/pbs", "UV_PYTHON_DOWNLOADS_JSON_URL": "/srv/d.json"}
    said = describe_uv_python_source(env)
    assert "secret" not in said and said.startswith("UV_PYTHON_INSTALL_MIRROR=https://") \
        and said.endswith("UV_PYTHON_DOWNLOADS_JSON_URL=/srv/d.json")


def test_uv_request_spells_free_threaded() -> None:
    assert (uv_request("3.13.2", True), uv_request("3.11.7", False)) == ("3.13.2t", "3.11.7")


def test_a_missing_python_is_uvs_before_pyenvs(matrix) -> None:  # type: ignore[no-untyped-def]
    """The plan names who provides a Python the host lacks: uv where its list has the minor,
    pyenv where only pyenv has it (or the facts have no uv), and --explain's why says so."""
    from dataclasses import replace

    from packaging.specifiers import SpecifierSet

    from tests.conftest import make_facts
    from torchfit.compat.facts import UvPythons
    from torchfit.compat.request import Request
    from torchfit.compat.resolver import resolve

    host = make_facts(driver=None, gpus=[], pythons=["3.6.8"], pyenv=["3.11.9", "3.12.4"])
    uv = UvPythons("/usr/bin/uv", ("3.12.8", "3.11.7"), "UV_PYTHON_INSTALL_MIRROR=file:///srv/pbs")
    request = Request(python=SpecifierSet("==3.12.*"), variant="cpu")
    plan = resolve([replace(host, uv_pythons=uv)], request, matrix)
    assert (plan.python_version, plan.python_source, plan.python_path) == ("3.12.8", "uv", None)
    assert "uv will install a prebuilt 3.12.8 (UV_PYTHON_INSTALL_MIRROR=file:///srv/pbs)" in plan.why["python"]
    assert any("`uv python install 3.12.8`" in r for r in plan.reasons)
    only_pyenv = resolve([replace(host, uv_pythons=UvPythons("/usr/bin/uv", ("3.11.7",)))], request, matrix)
    assert (only_pyenv.python_version, only_pyenv.python_source) == ("3.12.4", "pyenv")
    assert resolve([host], request, matrix).python_source == "pyenv"


def test_uvs_downloads_list_is_asked_once_until_what_decides_it_changes(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`uv python list --only-downloads` ran in every command (~0.1 s, issue 37): its answer is kept
    in the start-up cache, keyed by uv's binary and the settings that replace its list; a real
    (stand-in) uv process, each call recorded."""
    from torchfit.host.pythons import probe_uv_pythons
    from torchfit.runner import Runner

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = tmp_path / "calls"
    listing = [_row("3.13.9")]
    uv = tmp_path / "uv"
    uv.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\ncat <<'EOF'\n{json.dumps(listing)}\nEOF\n")
    uv.chmod(0o755)
    first, why = probe_uv_pythons(Runner(), str(uv), "x86_64")
    assert first is not None and first.installable == ("3.13.9",), (first, why)
    again, _ = probe_uv_pythons(Runner(), str(uv), "x86_64")
    assert again == first and len(calls.read_text().splitlines()) == 1  # from the cache
    monkeypatch.setenv("UV_PYTHON_INSTALL_MIRROR", "file:///srv/pythons")  # another source: asked again
    probe_uv_pythons(Runner(), str(uv), "x86_64")
    assert len(calls.read_text().splitlines()) == 2
