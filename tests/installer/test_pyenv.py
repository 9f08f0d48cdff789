"""The interpreter step: a real `pyenv install -s` for a Python that is already there,
a fake pyenv on PATH that fails like python-build without OpenSSL headers, no pyenv at all."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.installer.conftest import DATA, leftovers, run_tf
from tests.installer.test_e2e import _facts_without_python, have_pyenv_version
from torchfit.errors import InstallFailed, PythonUnavailable
from torchfit.installer.pyenv import diagnose_build, ensure_python
from torchfit.runner import Runner

pytestmark = pytest.mark.filterwarnings("ignore")


def test_real_pyenv_install_s_of_an_installed_python() -> None:
    if not have_pyenv_version("3.9.18"):
        pytest.skip("pyenv with Python 3.9.18 is not installed")
    path, _ = ensure_python(Runner(), "3.9.18", timeout=120)
    assert path.endswith("/versions/3.9.18/bin/python3.9") and os.access(path, os.X_OK)


def _fake_pyenv_bin(tmp_path: Path) -> Path:
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    shutil.copy(DATA / "fake-pyenv", bindir / "pyenv")
    (bindir / "pyenv").chmod((bindir / "pyenv").stat().st_mode | stat.S_IXUSR)
    return bindir


def test_fake_pyenv_build_failure_is_explained(tmp_path: Path) -> None:
    bindir = _fake_pyenv_bin(tmp_path)
    runner = Runner({"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_PYENV_LOGDIR": str(tmp_path)})
    with pytest.raises(InstallFailed) as info:
        ensure_python(runner, "3.12.4", timeout=60)
    err = info.value
    assert err.step == "python" and err.code == 1 and err.argv[1:] == ["install", "-s", "3.12.4"]
    assert "Missing the OpenSSL lib?" in err.tail
    assert "openssl-devel" in err.hint and "libssl-dev" in err.hint and "openssl11-devel" in err.hint
    assert str(tmp_path / "python-build.20261130081500.4242.log") in err.hint


def test_cli_names_the_cause_and_keeps_the_log(tmp_path: Path) -> None:
    from tests.support.wheels import make_wheel, write_index

    # the torch source has a cp312 build (a stand-in: the install stops at the Python step)
    torch_index = write_index(tmp_path / "index", [make_wheel(tmp_path / "wheels", "torch", "2.13.0+cpu",
                                                              tag="cp312-cp312-manylinux_2_28_x86_64")]).as_uri()
    bindir = _fake_pyenv_bin(tmp_path)
    facts = _facts_without_python(tmp_path, installable=["3.12.4"])
    prefix = tmp_path / "env"
    proc = run_tf("install", "torch==2.13.0", "--variant", "cpu", "--python", "3.12", "--facts", str(facts),
                  "--torch-index-url", torch_index, "--prefix", str(prefix), "--json", state=tmp_path / "state",
                  PATH=f"{bindir}:{os.environ['PATH']}", FAKE_PYENV_LOGDIR=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert "pyenv could not build Python 3.12.4" in proc.stderr
    assert "OpenSSL headers are missing" in proc.stderr and "libssl-dev" in proc.stderr
    assert "python-build.20261130081500.4242.log" in proc.stderr
    assert (tmp_path / "python-build.20261130081500.4242.log").is_file()
    out = json.loads(proc.stdout)
    assert out["ok"] is False and out["step"] == "python" and "openssl-devel" in out["hint"]
    logs = list((tmp_path / "state").rglob("install-*.log"))
    assert logs and "Missing the OpenSSL lib?" in logs[0].read_text()
    assert not prefix.exists() and leftovers(tmp_path) == []


def test_no_pyenv_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    runner = Runner({"PATH": str(empty), "PYENV_ROOT": str(tmp_path / "nopyenv")})
    with pytest.raises(PythonUnavailable) as info:
        ensure_python(runner, "3.12.4")
    assert "pyenv is not available" in info.value.message and "pyenv#installation" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("output", "expect"),
    [
        ("ERROR: The Python zlib extension was not compiled. Missing the zlib?", "zlib1g-dev"),
        ("ModuleNotFoundError: No module named '_ctypes'", "libffi-devel"),
        ("configure: error: no acceptable C compiler found in $PATH", "build-essential"),
        ("WARNING: The Python bz2 extension was not compiled. Missing the bzip2 lib?\n"
         "WARNING: The Python sqlite3 extension was not compiled. Missing the SQLite3 lib?", "sqlite-devel"),
    ],
)
def test_diagnose_build(output: str, expect: str) -> None:
    diag = diagnose_build(output)
    assert expect in diag.hint("3.12.4")


def test_diagnose_unknown_definition() -> None:
    diag = diagnose_build("python-build: definition not found: 3.14.9\n\nSee all available versions")
    assert diag.unknown_version == "3.14.9" and "update" in diag.hint("3.14.9")
