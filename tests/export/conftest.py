"""Fixtures of the export tests: recorded index pages (tests/support/indexes.py), a local
variant index and "PyPI" served on 127.0.0.1 with the helpers that export to them and hand the
result to real pip or uv, and the abridged lock of `torchfit install` the containerfile tests read.

The indexes are local: an HTTP server on 127.0.0.1 serves a PEP 503 "variant index"
(whl/cpu/: torch 2.13.0+cpu, plus torch's dependencies, as download.pytorch.org
hosts them) and a "PyPI" (pypi/: the dependencies). On this machine torch is the
real CPU wheel in /opt/wheels and the dependencies come from /opt/pypi; elsewhere
(CI) a small synthetic torch wheel without dependencies stands in.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import make_facts
from tests.support.cli import run_main
from tests.support.indexes import private_cache, rsps
from tests.support.wheels import record_digest, serve_dir
from torchfit.compat.facts import facts_to_json
from torchfit.lock.uvbin import find_uv
from torchfit.runner import Runner

__all__ = ["private_cache", "rsps"]


TORCH = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
REAL_WHEEL = Path("/opt/wheels") / TORCH
REAL_PYPI = Path("/opt/pypi/simple")
DEPS = ("filelock", "typing-extensions", "setuptools", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "fsspec")


@dataclass
class LocalIndex:
    url: str  # http://127.0.0.1:PORT
    real: bool

    @property
    def variant(self) -> str:
        return f"{self.url}/whl/cpu"

    @property
    def pypi(self) -> str:
        return f"{self.url}/pypi"


def _synthetic_wheel(path: Path) -> None:
    """A minimal valid wheel named like the real one (no dependencies)."""
    files = {
        "torch/__init__.py": b"__version__ = '2.13.0+cpu'\n",
        "torch-2.13.0+cpu.dist-info/METADATA": b"Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cpu\n"
                                              b"Requires-Python: >=3.10\n",
        "torch-2.13.0+cpu.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: torchfit-tests\nRoot-Is-Purelib: false\n"
                                           b"Tag: cp311-cp311-manylinux_2_28_x86_64\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
            record.append(f"{name},{record_digest(data)},{len(data)}")
        record.append("torch-2.13.0+cpu.dist-info/RECORD,,")
        zf.writestr("torch-2.13.0+cpu.dist-info/RECORD", "\n".join(record) + "\n")


def _page(links: list[str]) -> str:
    return "<!DOCTYPE html><html><body>\n" + "".join(f"{a}<br/>\n" for a in links) + "</body></html>\n"


@pytest.fixture(scope="session")
def local_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalIndex]:
    root = tmp_path_factory.mktemp("indexes")
    real = REAL_WHEEL.is_file() and all((REAL_PYPI / d / "index.html").is_file() for d in DEPS)
    (root / "files").mkdir()
    wheel = root / "files" / TORCH
    if real:
        wheel.symlink_to(REAL_WHEEL)
    else:
        _synthetic_wheel(wheel)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    href = "../../../files/" + TORCH.replace("+", "%2B")
    (root / "whl" / "cpu" / "torch").mkdir(parents=True)
    (root / "whl" / "cpu" / "torch" / "index.html").write_text(_page([f'<a href="{href}#sha256={digest}">{TORCH}</a>']))
    (root / "pypi").mkdir()
    if real:
        for dep in DEPS:
            # /opt/pypi pages link ../../files/NAME: make them absolute file:// URLs, served from both indexes.
            page = (REAL_PYPI / dep / "index.html").read_text()
            page = re.sub(r'href="\.\./\.\./files/', 'href="file:///opt/pypi/files/', page)
            for index in (root / "whl" / "cpu", root / "pypi"):
                (index / dep).mkdir()
                (index / dep / "index.html").write_text(page)
    with serve_dir(root) as url:
        yield LocalIndex(url, real)


@pytest.fixture(scope="session")
def facts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("facts") / "cpu-box.json"
    facts = make_facts(driver=None, gpus=[], glibc="2.35", pythons=["3.11.7"], name="cpu-box")
    path.write_text(json.dumps(facts_to_json(facts)))
    return path


def export(capsys, facts: Path, idx: LocalIndex, fmt: str, out: Path, *extra: str) -> str:  # type: ignore[no-untyped-def]
    code, _, err = run_main(capsys, "export", "--format", fmt, "--facts", str(facts), "--variant", "cpu",
                            "torch==2.13.0", "--torch-index-url", idx.variant, "--pypi-url", idx.pypi,
                            "--allow-insecure-index", "-o", str(out), *extra)
    assert code == 0, err
    return out.read_text()


def pip_dry_run(requirements: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """pip with no user/site configuration (--isolated), resolving for CPython 3.11 on manylinux_2_28 x86_64."""
    return subprocess.run(
        [python311(), "-m", "pip", "install", "--isolated", "--dry-run", "--no-cache-dir",
         "--disable-pip-version-check", "--target", str(requirements.parent / "target"),
         "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--only-binary=:all:",
         *options, "-r", str(requirements)],
        capture_output=True, text=True, timeout=300,
    )


def python311() -> str:
    """A CPython 3.11 for pip (its Requires-Python checks use the running interpreter)."""
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    found = shutil.which("python3.11")
    if found is None:
        pytest.skip("pip needs CPython 3.11 to resolve for cp311 wheels")
    return found


def need_uv() -> str:
    """uv where torchfit finds it (lock.uvbin.find_uv: beside this interpreter first, where
    `pip install -e '.[test]'` puts it, then on PATH), so these run under the README's command."""
    uv = find_uv(Runner())
    if uv is None:
        pytest.skip("uv is not installed (pip install uv)")
    return uv


@pytest.fixture(scope="session")
def uv_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = need_uv()
    venv = tmp_path_factory.mktemp("venv") / "py311"
    made = subprocess.run([uv, "venv", "-q", "--no-config", "-p", "3.11", str(venv)], capture_output=True,
                          text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"no CPython 3.11 for uv: {made.stderr.strip()[-200:]}")
    return venv


def uv_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update({"VIRTUAL_ENV": str(venv), "UV_PREVIEW_FEATURES": "pylock", "UV_NO_CONFIG": "1"})
    return env


# A lock as `torchfit install` writes it (abridged): the CPU torch 2.13.0 wheel for Python 3.11 on
# manylinux_2_28, a dependency, the NCCL pin, the host it was made for (Ubuntu 24.04).
CONTAINER_LOCK = """\
lock-version = "1.0"
created-by = "torchfit"
requires-python = "==3.11.*"

[[packages]]
name = "filelock"
version = "4.3.1"
wheels = [{{ name = "filelock-4.3.1-py3-none-any.whl", url = "https://files.pythonhosted.org/f/filelock-4.3.1-py3-none-any.whl", hashes = {{ sha256 = "{a}" }} }}]

[[packages]]
name = "torch"
version = "2.13.0+cpu"
wheels = [{{ name = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", url = "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{b}" }} }}]

[tool.torchfit]
schema = 1
torch-index-url = "https://download.pytorch.org/whl/cpu"

[tool.torchfit.nccl]
mechanism = "{mechanism}"
{library}
[tool.torchfit.plan]
ok = true
python = "3.11"
torch = "2.13.0"
variant = "cpu"
index_url = "https://download.pytorch.org/whl/cpu"

[[tool.torchfit.hosts]]
glibc = "2.39"
os = "{os}"
arch = "x86_64"
"""


def container_lock(tmp_path: Path, *, os_fact: str = "ubuntu:24.04", mechanism: str = "none", library: str = "") -> Path:
    path = tmp_path / "pylock.toml"
    path.write_text(CONTAINER_LOCK.format(a="a" * 64, b="b" * 64, os=os_fact, mechanism=mechanism,
                                library=f'library = "{library}"\n' if library else ""))
    return path


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a podman with its own storage under the session's tmp, reset at the end
    (tests/support/podman.py)."""
    from tests.support.podman import podman_env

    yield from podman_env(tmp_path_factory.mktemp("podman"))
