"""host/pythons.py: the interpreters on PATH and pyenv's, through fake interpreters and a fake pyenv."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given

import torchfit.host.pythons as pythons_mod
from tests.host.conftest import FUZZ, LINE_TEXT
from tests.support.fakehost import (
    FIXTURES,
    FakeHost,
    fixture,
)
from torchfit.host import probe_host
from torchfit.host.pythons import (
    parse_pyenv_install_list,
    parse_pyenv_version,
    parse_pyenv_versions,
    parse_python_version,
    probe_pyenv,
    probe_pythons,
)
from torchfit.runner import Runner


def _fake_python(host: FakeHost, path: Path, prints: str, *, sleep: float = 0) -> Path:
    body = f"""
    import sys, time
    time.sleep({sleep})
    assert sys.argv[1:] == ["-c", {pythons_mod._PY_VERSION_CODE!r}], sys.argv
    print({prints!r})
    """
    return host.script(path.name, body, where=path.parent)


def test_pythons_on_path(host: FakeHost) -> None:
    a = host.tmp / "a"
    b = host.tmp / "b"
    real = _fake_python(host, host.tmp / "opt" / "python3.12", "3.12.9")
    a.mkdir()
    b.mkdir()
    (a / "python3.12").symlink_to(real)
    (a / "python3").symlink_to(real)  # same interpreter twice in one dir
    (b / "python3.12").symlink_to(real)  # and again in another dir
    _fake_python(host, a / "python3.10", "not a version")
    _fake_python(host, b / "python3.9", "3.9.20", sleep=30)  # hangs: left out
    _fake_python(host, b / "python3.13", "3.13.1")
    _fake_python(host, b / "python3-config", "3.13.1")  # not an interpreter name
    runner = Runner(env_overrides={"PATH": f"{a}{os.pathsep}{b}"})
    start = time.monotonic()
    found, why = probe_pythons(runner, timeout=1.0)
    assert time.monotonic() - start < 4.0
    assert why is None
    assert [(p.version, p.path, p.source) for p in found] == [
        ("3.12.9", str(a / "python3.12"), "path"),
        ("3.13.1", str(b / "python3.13"), "path"),
    ]


def test_pythons_prefer_the_host_interpreter_over_a_venv_link(host: FakeHost) -> None:
    real = _fake_python(host, host.tmp / "usr" / "bin" / "python3.12", "3.12.3")
    venv = host.tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {real.parent}\n")
    (venv / "bin" / "python3.12").symlink_to(real)
    runner = Runner(env_overrides={"PATH": f"{venv / 'bin'}{os.pathsep}{real.parent}"})
    found, _ = probe_pythons(runner)
    assert [p.path for p in found] == [str(real)]


def test_no_python_on_path(host: FakeHost) -> None:
    found, why = probe_pythons(Runner(env_overrides={"PATH": str(host.bin)}))
    assert found == ()
    assert why == "unknown, because no working python3 or python3.X on PATH"


def _fake_pyenv(host: FakeHost, *, install_list: str | None = None) -> Path:
    pyenv_root = host.home / ".pyenv"
    for v in ("3.11.7", "3.12.1"):
        _fake_python(host, pyenv_root / "versions" / v / "bin" / f"python{v[:4]}", v)
    (pyenv_root / "versions" / "3.12.1" / "envs" / "myenv").mkdir(parents=True)
    shims = pyenv_root / "shims"
    _fake_python(host, shims / "python3.12", "3.12.1")  # must not be run
    bare = "3.11.7\n3.12.1\n3.12.1/envs/myenv\nmyenv\npypy3.10-7.3.15\n3.13.0t\nsystem\n"
    host.tool(
        "pyenv",
        [
            {"argv": ["root"], "stdout": f"{pyenv_root}\n"},
            {"argv": ["--version"], "stdout": fixture(FIXTURES / "pyenv" / "version.txt")},
            {"argv": ["versions", "--bare"], "stdout": bare},
            {
                "argv": ["install", "--list"],
                "stdout": install_list
                if install_list is not None
                else fixture(FIXTURES / "pyenv" / "install-list.txt"),
            },
        ],
    )
    return shims


def test_pyenv_and_its_pythons(host: FakeHost) -> None:
    shims = _fake_pyenv(host)
    runner = Runner(
        env_overrides={
            "PATH": f"{shims}{os.pathsep}{host.bin}",
            "HOME": str(host.home),
            "PYENV_ROOT": str(host.home / ".pyenv"),
        }
    )
    facts = probe_host(runner, root=str(host.root))
    pyenv_root = host.home / ".pyenv"
    assert facts.pyenv is not None
    assert facts.pyenv.path == str(pyenv_root)
    assert facts.pyenv.version == "2.6.30"
    inst = facts.pyenv.installable
    assert "3.12.1" in inst and "3.14.4" in inst and "2.7.18" in inst
    # Final CPython releases and their free-threaded builds ("3.13.0t"), nothing else.
    assert not [v for v in inst if not v.removesuffix("t").replace(".", "").isdigit()]
    assert "3.13.0t" in inst
    assert len(inst) == len(set(inst))
    assert [(p.version, p.source) for p in facts.pythons] == [
        ("3.11.7", "pyenv"),
        ("3.12.1", "pyenv"),
    ]
    assert facts.pythons[1].path == str(pyenv_root / "versions/3.12.1/bin/python3.12")
    assert "pythons" not in facts.reasons and "pyenv" not in facts.reasons
    assert sorted(host.calls("pyenv")) == [
        ["--version"],
        ["install", "--list"],
        ["root"],
        ["versions", "--bare"],
    ]


def test_pyenv_without_install_list(host: FakeHost) -> None:
    _fake_pyenv(host, install_list="")
    pyenv, pythons, why = probe_pyenv(host.runner())
    assert pyenv is not None and pyenv.installable == ()
    assert len(pythons) == 2
    assert why is not None and "`pyenv install --list` gave no CPython release" in why


def test_pyenv_found_outside_path_via_pyenv_root(host: FakeHost) -> None:
    shims = _fake_pyenv(host)
    (host.home / ".pyenv" / "bin").mkdir()
    (host.bin / "pyenv").rename(host.home / ".pyenv" / "bin" / "pyenv")
    # Found through $PYENV_ROOT/bin, and through ~/.pyenv/bin when PYENV_ROOT is unset.
    for pyenv_root in (str(host.home / ".pyenv"), ""):
        env = {"PATH": str(shims), "HOME": str(host.home), "PYENV_ROOT": pyenv_root}
        pyenv, _, _ = probe_pyenv(Runner(env_overrides=env))
        assert pyenv is not None and pyenv.version == "2.6.30"


def test_no_pyenv(host: FakeHost) -> None:
    facts = probe_host(host.runner(), root=str(host.root))
    assert facts.pyenv is None
    assert facts.reasons["pyenv"].startswith("unknown, because pyenv not found on PATH")


@pytest.mark.skipif(
    not os.path.isdir(os.path.expanduser("~/.pyenv/versions")), reason="needs pyenv"
)
def test_real_pyenv_on_this_machine() -> None:
    pyenv, pythons, _ = probe_pyenv(Runner())
    assert pyenv is not None
    assert "3.12.1" in pyenv.installable
    assert pythons and all(
        p.source == "pyenv" and p.path and os.path.exists(p.path) for p in pythons
    )



def test_free_threaded_interpreters_are_marked() -> None:
    """A free-threaded build answers "3.13.2t" (sysconfig Py_GIL_DISABLED) and is kept,
    marked, in the facts; this interpreter (a GIL build) answers its plain version."""
    import subprocess

    from torchfit.host.pythons import _PY_VERSION_CODE, python_install

    out = subprocess.run([sys.executable, "-c", _PY_VERSION_CODE], capture_output=True, text=True, check=True)
    mine = parse_python_version(out.stdout)
    assert mine == ".".join(str(n) for n in sys.version_info[:3])
    assert python_install(mine, sys.executable, "path").free_threaded is False
    ft = python_install(parse_python_version("3.13.2t\n") or "", "/usr/bin/python3.13t", "path")
    assert (ft.version, ft.free_threaded, ft.label) == ("3.13.2", True, "3.13.2t")
    assert parse_pyenv_versions("3.12.1\n3.13.0t\nsystem\n") == ("3.12.1", "3.13.0t")



def test_parse_python_and_pyenv_outputs() -> None:
    assert parse_python_version("3.12.1\n") == "3.12.1"
    assert parse_python_version("Python 3.12.1") is None
    assert parse_pyenv_version(fixture(FIXTURES / "pyenv" / "version.txt")) == "2.6.30"
    assert parse_pyenv_versions(fixture(FIXTURES / "pyenv" / "versions-bare.txt"))[-1] == "3.13.0"
    listed = parse_pyenv_install_list(
        "Available versions:\n  3.12.1\n  3.13.0rc2\n  3.13.0t\n  3.14-dev\n  3.14.0a1\n"
        "  pypy3.10-7.3.15\n  anaconda3-2024.06-1\n  miniforge3-24.3.0-0\n  3.13.0\n"
    )
    assert listed == ("3.12.1", "3.13.0t", "3.13.0")  # 3.13.0t: pyenv builds free-threaded CPython


@FUZZ
@given(LINE_TEXT)
def test_fuzz_pythons_line_parsers(text: str) -> None:
    for parse in (parse_python_version, parse_pyenv_version):
        out = parse(text)
        assert out is None or isinstance(out, str)
    for parse_many in (parse_pyenv_versions, parse_pyenv_install_list):
        assert isinstance(parse_many(text), tuple)
