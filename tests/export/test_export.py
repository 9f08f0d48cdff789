"""`torchfit export`: each format rendered from a real plan and accepted by real pip or uv (--dry-run).

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

from tests.support.cli import clean_env, run_clean
from tests.support.wheels import record_digest, serve_dir

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from tests.conftest import make_facts
from tests.support.cli import run_main
from torchfit.compat.facts import facts_to_json
from torchfit.lock.uv import find_uv
from torchfit.runner import Runner

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


def _export(capsys, facts: Path, idx: LocalIndex, fmt: str, out: Path, *extra: str) -> str:  # type: ignore[no-untyped-def]
    code, _, err = run_main(capsys, "export", "--format", fmt, "--facts", str(facts), "--variant", "cpu",
                            "torch==2.13.0", "--torch-index-url", idx.variant, "--pypi-url", idx.pypi,
                            "--allow-insecure-index", "-o", str(out), *extra)
    assert code == 0, err
    return out.read_text()


def _pip_dry_run(requirements: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """pip with no user/site configuration (--isolated), resolving for CPython 3.11 on manylinux_2_28 x86_64."""
    return subprocess.run(
        [_python311(), "-m", "pip", "install", "--isolated", "--dry-run", "--no-cache-dir",
         "--disable-pip-version-check", "--target", str(requirements.parent / "target"),
         "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--only-binary=:all:",
         *options, "-r", str(requirements)],
        capture_output=True, text=True, timeout=300,
    )


def _python311() -> str:
    """A CPython 3.11 for pip (its Requires-Python checks use the running interpreter)."""
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    found = shutil.which("python3.11")
    if found is None:
        pytest.skip("pip needs CPython 3.11 to resolve for cp311 wheels")
    return found


def _uv() -> str:
    """uv where torchfit finds it (lock.uv.find_uv: beside this interpreter first, where
    `pip install -e '.[test]'` puts it, then on PATH), so these run under the README's command."""
    uv = find_uv(Runner())
    if uv is None:
        pytest.skip("uv is not installed (pip install uv)")
    return uv


@pytest.fixture(scope="session")
def uv_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = _uv()
    venv = tmp_path_factory.mktemp("venv") / "py311"
    made = subprocess.run([uv, "venv", "-q", "--no-config", "-p", "3.11", str(venv)], capture_output=True,
                          text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"no CPython 3.11 for uv: {made.stderr.strip()[-200:]}")
    return venv


def _uv_env(venv: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update({"VIRTUAL_ENV": str(venv), "UV_PREVIEW_FEATURES": "pylock", "UV_NO_CONFIG": "1"})
    return env


def test_requirements_is_accepted_by_pip(capsys, tmp_path: Path, facts_file: Path, local_index: LocalIndex) -> None:
    req = tmp_path / "requirements.txt"
    text = _export(capsys, facts_file, local_index, "requirements", req)
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    # the variant index alone, torch pinned to its local label
    assert body == [f"--index-url {local_index.variant}", "torch==2.13.0+cpu"]
    assert "pip install -c torch-constraints.txt" in text
    run = _pip_dry_run(req)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Would install" in run.stdout and "torch-2.13.0+cpu" in run.stdout
    if local_index.real:
        assert "sympy-" in run.stdout  # torch's dependencies came from the same (sole) index


def test_uv_config_is_accepted_by_uv(capsys, tmp_path: Path, facts_file: Path, local_index: LocalIndex,
                                     uv_venv: Path) -> None:
    uv = _uv()
    project = tmp_path / "proj"
    project.mkdir()
    text = _export(capsys, facts_file, local_index, "uv", project / "pyproject.toml")
    doc = tomllib.loads(text)
    (index,) = [i for i in doc["tool"]["uv"]["index"] if i.get("explicit")]
    assert index == {"name": "pytorch-cpu", "url": local_index.variant, "explicit": True}
    assert doc["tool"]["uv"]["sources"] == {"torch": {"index": "pytorch-cpu"}}
    assert doc["project"]["dependencies"] == ["torch==2.13.0+cpu"]
    assert doc["project"]["requires-python"] == "==3.11.*"
    env = _uv_env(uv_venv)
    # uv pip: the explicit index serves torch (via [tool.uv.sources]); the rest, the default index
    run = subprocess.run([uv, "pip", "install", "--dry-run", "--no-progress",
                          "--default-index", local_index.pypi, "-r", str(project / "pyproject.toml")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert "+ torch==2.13.0+cpu" in run.stderr
    # the project workflow: uv lock in the directory honours the file's own [[tool.uv.index]] tables
    env.pop("UV_NO_CONFIG")
    run = subprocess.run([uv, "lock", "--directory", str(project)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    lock = (project / "uv.lock").read_text()
    assert 'name = "torch"' in lock and "2.13.0+cpu" in lock and local_index.variant in lock


def test_pylock_is_accepted_by_uv(capsys, tmp_path: Path, facts_file: Path, local_index: LocalIndex,
                                  uv_venv: Path) -> None:
    uv = _uv()
    lock_path = tmp_path / "pylock.toml"
    text = _export(capsys, facts_file, local_index, "pylock", lock_path)
    doc = tomllib.loads(text)
    assert doc["lock-version"] == "1.0" and doc["requires-python"] == "==3.11.*"
    assert doc["environments"] == ["sys_platform == 'linux' and platform_machine == 'x86_64'"]
    pkgs = {p["name"]: p for p in doc["packages"]}
    torch = pkgs["torch"]
    assert torch["version"] == "2.13.0+cpu" and torch["index"] == local_index.variant
    (wheel,) = torch["wheels"]
    assert wheel["url"].endswith(TORCH.replace("+", "%2B")) and len(wheel["hashes"]["sha256"]) == 64
    if local_index.real:  # the closure, each dependency from the default index
        assert {"sympy", "mpmath", "networkx", "jinja2"} <= set(pkgs)
        assert all(p["index"] == local_index.pypi for n, p in pkgs.items() if n != "torch")
    assert doc["tool"]["torchfit"]["variant"] == "cpu"
    run = subprocess.run([uv, "pip", "install", "--dry-run", "--no-progress", "-r", str(lock_path)],
                         capture_output=True, text=True, timeout=300, env=_uv_env(uv_venv))
    assert run.returncode == 0, run.stderr
    assert "+ torch==2.13.0+cpu" in run.stderr


def test_from_a_lock_every_file_is_hash_pinned(capsys, tmp_path: Path, facts_file: Path,
                                               local_index: LocalIndex) -> None:
    _uv()
    lock_path = tmp_path / "pylock.toml"
    _export(capsys, facts_file, local_index, "pylock", lock_path)
    req = tmp_path / "requirements.txt"
    code, _, err = run_main(capsys, "export", "--format", "requirements", "--lock", str(lock_path),
                             "--allow-insecure-index", "-o", str(req))
    assert code == 0, err
    text = req.read_text()
    assert text.count("--hash=sha256:") == len(tomllib.loads(lock_path.read_text())["packages"])
    assert "torch==2.13.0+cpu \\\n    --hash=sha256:" in text
    run = _pip_dry_run(req, "--require-hashes")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "torch-2.13.0+cpu" in run.stdout
    # the same lock as uv configuration: the family pinned, the rest as constraints
    code, out, err = run_main(capsys, "export", "--format", "uv", "--lock", str(lock_path),
                               "--allow-insecure-index")
    assert code == 0, err
    doc = tomllib.loads(out)
    assert doc["project"]["dependencies"] == ["torch==2.13.0+cpu"]
    if local_index.real:
        assert any(c.startswith("sympy==") for c in doc["tool"]["uv"]["constraint-dependencies"])


def test_credentials_never_reach_an_exported_file(capsys, tmp_path: Path, facts_file: Path) -> None:
    out = tmp_path / "r.txt"
    code, _, err = run_main(capsys, "export", "--format", "requirements", "--facts", str(facts_file),
                            "--variant", "cpu", "--torch-index-url", "https://bob:hunter2@mirror.example.com/whl/{variant}",
                            "-o", str(out))
    assert code == 0, err
    text = out.read_text()
    assert "hunter2" not in text and "bob" not in text
    assert "--index-url https://mirror.example.com/whl/cpu" in text and "Credentials were removed" in text
    code, uvtext, _ = run_main(capsys, "export", "--format", "uv", "--facts", str(facts_file), "--variant", "cpu",
                               "--torch-index-url", "https://bob:hunter2@mirror.example.com/whl/{variant}")
    assert "hunter2" not in uvtext


def test_plan_from_resolving_a_gpu_host(capsys, tmp_path: Path) -> None:
    node = tmp_path / "h200.json"
    node.write_text(json.dumps(facts_to_json(make_facts(driver="580.159.04", gpus=["NVIDIA H200=sm_90"] * 2,
                                                        glibc="2.39", pythons=["3.12.3"], name="h200"))))
    code, out, err = run_main(capsys, "export", "--format", "requirements", "--facts", str(node),
                              "torchvision", "torchaudio")
    assert code == 0, err
    pins = [line for line in out.splitlines() if "==" in line and not line.startswith("#")]
    variant = re.search(r"--index-url https://download.pytorch.org/whl/(\S+)", out)
    assert variant and variant.group(1).startswith("cu13")
    assert pins[0].startswith("torch==") and pins[0].endswith(f"+{variant.group(1)}")
    assert [p.split("==")[0] for p in pins] == ["torch", "torchvision", "torchaudio"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--format", "yaml"), "invalid choice"),
        (("--format", "requirements", "--lock", "/nonexistent.toml"), "cannot read"),
        (("--format", "requirements", "--lock", "LOCK", "--variant", "cpu"), "drop --variant"),
        (("--format", "requirements", "--torch-index-url", "ftp://x/y"), "not an http(s):// or file:// URL"),
    ],
)
def test_bad_input(capsys, tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\n[[packages]]\nname = "torch"\nversion = "2.13.0+cpu"\n')
    code, _, err = run_main(capsys, "export", *[str(lock) if a == "LOCK" else a for a in args])
    assert code == 2 and needle in err, err


def test_not_a_pylock(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "x.toml"
    bad.write_text('name = "not a lock"\n')
    code, _, err = run_main(capsys, "export", "--format", "uv", "--lock", str(bad))
    assert code == 2 and "not a PEP 751 lock" in err


INSTALL_LOCK = """\
# PEP 751 lock written by `torchfit install`.
lock-version = "1.0"
created-by = "torchfit"
requires-python = "==3.12.*"

[[packages]]
name = "filelock"
version = "3.16.1"
wheels = [{{ name = "filelock-3.16.1-py3-none-any.whl", url = "https://files.pythonhosted.org/f/filelock-3.16.1-py3-none-any.whl", hashes = {{ sha256 = "{a}" }} }}]

[[packages]]
name = "torch"
version = "2.8.0+cu128"
wheels = [{{ name = "torch-2.8.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl", url = "https://download.pytorch.org/whl/cu128/torch-2.8.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{b}" }} }}]

[tool.torchfit]
schema = 1
torch-index-url = "https://user:***@mirror.example.com/whl/cu128"

[tool.torchfit.plan]
ok = true
python = "3.12"
torch = "2.8.0"
variant = "cu128"
index_url = "https://download.pytorch.org/whl/cu128"
""".format(a="a" * 64, b="b" * 64)


@pytest.mark.parametrize("fmt", ["requirements", "uv", "pylock"])
def test_a_lock_written_by_torchfit_install(capsys, tmp_path: Path, fmt: str) -> None:
    """The install lock has no packages.index: the variant and index come from [tool.torchfit]."""
    lock = tmp_path / "pylock.toml"
    lock.write_text(INSTALL_LOCK)
    code, out, err = run_main(capsys, "export", "--format", fmt, "--lock", str(lock))
    assert code == 0, err
    assert "***" not in out and "user" not in out
    if fmt == "requirements":
        lines = [line for line in out.splitlines() if not line.startswith("#")]
        assert lines[:2] == ["--index-url https://mirror.example.com/whl/cu128",
                             "--extra-index-url https://pypi.org/simple"]
        assert f"torch==2.8.0+cu128 \\\n    --hash=sha256:{'b' * 64}" in out
    elif fmt == "uv":
        doc = tomllib.loads(out)
        assert doc["project"]["dependencies"] == ["torch==2.8.0+cu128"]
        assert doc["tool"]["uv"]["constraint-dependencies"] == ["filelock==3.16.1"]
    else:
        doc = tomllib.loads(out)
        torch = next(p for p in doc["packages"] if p["name"] == "torch")
        assert doc["tool"]["torchfit"]["variant"] == "cu128" and torch["wheels"][0]["hashes"]["sha256"] == "b" * 64


@pytest.mark.online
def test_pylock_is_accepted_by_a_newer_pip(capsys, tmp_path: Path, facts_file: Path, local_index: LocalIndex) -> None:
    """pip installs from pylock.toml since 26 (experimental); this machine's pip is older, so fetch one."""
    _uv()
    venv = tmp_path / "pip-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    got = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--isolated",
                          "--index-url", "https://pypi.org/simple", "pip>=26"],
                         capture_output=True, text=True, timeout=300)
    if got.returncode != 0:
        pytest.skip(f"no pip>=26 from PyPI: {got.stderr.strip()[-200:]}")
    lock_path = tmp_path / "pylock.toml"  # pip reads only files named pylock.toml / pylock.NAME.toml
    _export(capsys, facts_file, local_index, "pylock", lock_path)
    run = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--isolated", "--dry-run",
                          "--no-cache-dir", "-r", str(lock_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "torch-2.13.0+cpu" in run.stdout


def test_the_install_mirror_variable_is_honoured(capsys, monkeypatch: pytest.MonkeyPatch, facts_file: Path) -> None:
    monkeypatch.setenv("TORCHFIT_TORCH_INDEX_URL", "https://mirror.corp/pytorch/whl/{variant}")
    code, out, err = run_main(capsys, "export", "--format", "requirements", "--facts", str(facts_file),
                              "--variant", "cpu")
    assert code == 0, err
    assert "--index-url https://mirror.corp/pytorch/whl/cpu" in out


# --- export finds the uv install uses (#21 of issue 13) ------------------------------------


def test_d21_export_finds_uv_beside_torchfit(tmp_path: Path) -> None:
    beside = Path(sys.executable).parent / "uv"
    if not os.access(beside, os.X_OK):
        pytest.skip("uv is not installed beside this Python")
    env = clean_env(PATH="/usr/bin:/bin")  # no uv on PATH
    wheel_dir = tmp_path / "empty"
    wheel_dir.mkdir()
    proc = run_clean("export", "--format", "pylock", "torch==2.13.0", "--assume", "gpu=none", "--python", "3.11",
              "--torch-index-url", wheel_dir.as_uri(), env=env, timeout=180)
    assert "needs uv" not in proc.stderr, proc.stderr

