"""`torchfit install` end to end on this machine: real uv and pip installs of CPU torch
2.13.0 from a local PEP 503 mirror, the lock, `--lock` rebuilds, an authenticated HTTP
mirror whose password must never show, and the lock's refusal on a host that contradicts it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import (
    CPU_ARGS,
    env_dists,
    leftovers,
    needs_uv,
    run_tf,
)
from tests.support.wheels import record_digest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore")]


def _lock(prefix: Path) -> dict[str, Any]:
    return tomllib.loads((prefix / "pylock.toml").read_text())


def _locked_set(lock: dict[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {p["name"]: (p["version"], tuple(w["hashes"]["sha256"] for w in p.get("wheels", [])))
            for p in lock["packages"]}


def test_install_cpu_torch_imports_and_is_locked(cpu_env: dict[str, Any]) -> None:
    prefix: Path = cpu_env["prefix"]
    out = cpu_env["json"]
    assert out["ok"] is True and out["installer"].startswith("uv ")
    assert out["runtime"]["torch"] == "2.13.0+cpu" and out["runtime"].get("cuda") is None
    # import torch, for real, in the env torchfit built
    code = "import torch; print(torch.__version__, torch.version.cuda, torch.ones(2).sum().item())"
    res = subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["2.13.0+cpu", "None", "2.0"]
    # the lock: PEP 751, every package with its sha256, [tool.torchfit]
    lock = _lock(prefix)
    assert lock["lock-version"] == "1.0" and lock["created-by"] == "torchfit"
    names = {p["name"] for p in lock["packages"]}
    assert {"torch", "sympy", "networkx", "jinja2", "filelock", "fsspec", "typing-extensions"} <= names
    for p in lock["packages"]:
        assert p["wheels"], p
        for w in p["wheels"]:
            assert len(w["hashes"]["sha256"]) == 64 and ("url" in w or "path" in w), p
    torch = next(p for p in lock["packages"] if p["name"] == "torch")
    assert torch["version"] == "2.13.0+cpu"
    tool = lock["tool"]["torchfit"]
    assert tool["plan"]["torch"] == "2.13.0" and tool["plan"]["variant"] == "cpu"
    assert tool["expected"]["torch"] == "2.13.0+cpu"
    assert tool["nccl"]["mechanism"] == "none"
    assert tool["hosts"][0]["arch"] and tool["torch-index-url"].startswith("file://")
    # uv built it (the runtime dependency, beside this interpreter), and said so; no pip
    # seeded into the env unless asked for (--seed, see the relocked env)
    assert "torchfit: installer: uv " in cpu_env["stderr"]
    assert not (prefix / "bin" / "pip").exists() and "pip" not in env_dists(prefix)
    # the env works at PREFIX, not at the temporary path it was built under
    act = subprocess.run(["bash", "-c", f"source '{prefix}/bin/activate' && command -v python && echo $TORCHFIT_ENV"],
                         capture_output=True, text=True, timeout=60)
    assert act.stdout.split() == [str(prefix / "bin" / "python"), str(prefix)], act.stderr
    assert (prefix / "torchfit-install.log").is_file()
    assert leftovers(prefix.parent) == []


def test_lock_rebuilds_the_same_set(cpu_env: dict[str, Any], cpu_env_relocked: dict[str, Any]) -> None:
    first, second = cpu_env["prefix"], cpu_env_relocked["prefix"]
    assert _locked_set(_lock(first)) == _locked_set(_lock(second))
    assert _lock(second)["tool"]["torchfit"]["rebuilt-from"] == str(first / "pylock.toml")
    seed = {"pip", "setuptools", "wheel", "packaging"}
    a = {k: v for k, v in env_dists(first).items() if k not in seed}
    b = {k: v for k, v in env_dists(second).items() if k not in seed}
    assert a == b and a["torch"] == "2.13.0+cpu"
    # hashes were checked: the rebuild ran pip/uv with --require-hashes
    log = (second / "torchfit-install.log").read_text()
    assert "--require-hashes" in log
    # --seed: pip in the env, and it works at PREFIX, not at the temporary path
    assert "pip" in env_dists(second) and "pip" not in env_dists(first)
    pip = subprocess.run([str(second / "bin" / "pip"), "--version"], capture_output=True, text=True, timeout=120)
    assert pip.returncode == 0 and str(second) in pip.stdout, pip.stdout + pip.stderr


@needs_uv
def test_uv_never_takes_the_family_from_another_source(tmp_path: Path, cpu_env: dict[str, Any]) -> None:
    """The guarantee the uv path rests on, checked against the real uv: with the family routed
    to an explicit torch index that lacks torch, resolution fails, although a find-links
    directory (/opt/wheels) and the local indexes do hold torch."""
    from torchfit.lock.uv import uv_project
    from torchfit.lock.uvbin import find_uv
    from torchfit.runner import Runner

    empty = tmp_path / "empty" / "simple"
    empty.mkdir(parents=True)
    (empty / "index.html").write_text("<html><body></body></html>\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(uv_project(["torch==2.13.0"], empty.as_uri()))
    uv = find_uv(Runner())
    assert uv
    argv = [uv, "pip", "compile", "--no-config", "--python", str(cpu_env["prefix"] / "bin" / "python"),
            "--find-links", "/opt/wheels", "--index", "file:///opt/pypi/simple", "--index",
            "file:///opt/pypi-more/simple", "--index-strategy", "unsafe-best-match", str(project / "pyproject.toml")]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "torch" in res.stderr, res.stdout + res.stderr
    # and with the real torch index, the same resolution finds it there
    (project / "pyproject.toml").write_text(uv_project(["torch==2.13.0"], _torch_index_of(cpu_env)))
    ok = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "torch==2.13.0+cpu" in ok.stdout, ok.stderr


def _torch_index_of(env: dict[str, Any]) -> str:
    return str(_lock(env["prefix"])["tool"]["torchfit"]["torch-index-url"])


def test_lock_refused_on_a_host_that_contradicts_it(cpu_env: dict[str, Any], tmp_path: Path,
                                                    state_home: Path) -> None:
    lock = str(cpu_env["prefix"] / "pylock.toml")
    prefix = tmp_path / "env"
    proc = run_tf("install", "--lock", lock, "--prefix", str(prefix), "--assume", "glibc=2.17", state=state_home)
    assert proc.returncode == 1, proc.stderr
    assert "contradicts" in proc.stderr and "glibc" in proc.stderr and "--force" in proc.stderr
    assert not prefix.exists() and leftovers(tmp_path) == []
    forced = run_tf("install", "--lock", lock, "--prefix", str(prefix), "--assume", "glibc=2.17", "--force",
                    "--json", state=state_home)
    assert forced.returncode == 0, forced.stderr
    assert "--force" in forced.stderr and json.loads(forced.stdout)["runtime"]["torch"] == "2.13.0+cpu"


def test_tampered_lock_fails_the_hash_check(cpu_env: dict[str, Any], tmp_path: Path, state_home: Path) -> None:
    text = (cpu_env["prefix"] / "pylock.toml").read_text()
    torch = next(p for p in _lock(cpu_env["prefix"])["packages"] if p["name"] == "torch")
    good = torch["wheels"][0]["hashes"]["sha256"]
    bad_lock = tmp_path / "pylock.toml"
    bad_lock.write_text(text.replace(good, "0" * 64))
    prefix = tmp_path / "env"
    proc = run_tf("install", "--lock", str(bad_lock), "--prefix", str(prefix), state=state_home)
    assert proc.returncode == 1, proc.stderr
    assert "install-family" in proc.stderr and "hash" in proc.stderr.lower()
    assert not prefix.exists() and leftovers(tmp_path) == []


@needs_uv
def test_authenticated_http_mirror_never_shows_the_password(auth_mirror: dict[str, Any], tmp_path: Path) -> None:
    state = tmp_path / "state"
    prefix = tmp_path / "env"
    url = auth_mirror["url"]
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", url, "--extra-index-url", url,
                  "--allow-insecure-index", "--prefix", str(prefix), "--json", state=state)
    assert proc.returncode == 0, proc.stderr
    assert any(path.endswith(".whl") for path, _ in auth_mirror["seen"]), "torch came from the mirror"
    _assert_no_secret(proc, prefix, state)


def test_pip_installer_through_the_authenticated_mirror(auth_mirror: dict[str, Any], tmp_path: Path) -> None:
    """The pip path end to end (family step, dependency step, --report hashes), credentials hidden."""
    state = tmp_path / "state"
    prefix = tmp_path / "env"
    url = auth_mirror["url"]
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", url, "--extra-index-url", url, "--installer", "pip",
                  "--allow-insecure-index", "--prefix", str(prefix), "--json", state=state)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["installer"].startswith("pip ") and out["runtime"]["torch"] == "2.13.0+cpu"
    assert any(path.endswith(".whl") for path, _ in auth_mirror["seen"])
    lock = _lock(prefix)
    torch = next(p for p in lock["packages"] if p["name"] == "torch")
    assert torch["wheels"][0]["url"].startswith(f"http://127.0.0.1:{auth_mirror['port']}/files/")
    assert all(len(w["hashes"]["sha256"]) == 64 for p in lock["packages"] for w in p["wheels"])
    _assert_no_secret(proc, prefix, state)
    # and the pip-made lock rebuilds with pip, hash-checked, through the same mirror
    again = tmp_path / "again"
    rebuild = run_tf("install", "--lock", str(prefix / "pylock.toml"), "--installer", "pip", "--extra-index-url",
                     url, "--torch-index-url", url, "--allow-insecure-index", "--prefix", str(again), "--json",
                     state=state)
    assert rebuild.returncode == 0, rebuild.stderr
    assert _locked_set(_lock(again)) == _locked_set(lock)
    _assert_no_secret(rebuild, again, state)


def _assert_no_secret(proc: subprocess.CompletedProcess[str], prefix: Path, state: Path) -> None:
    assert "secret" not in proc.stdout and "secret" not in proc.stderr
    assert "secret" not in (prefix / "pylock.toml").read_text()
    assert "secret" not in (prefix / "torchfit-install.log").read_text()
    for log in state.rglob("*.log"):
        assert "secret" not in log.read_text(), log
    # nothing inside the env records the credential (direct_url.json, scripts, caches)
    for path in prefix.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_size < (8 << 20):
            assert b":secret@" not in path.read_bytes(), path


def test_pyenv_path_with_the_real_pyenv(tmp_path: Path, state_home: Path, torch_index: str) -> None:
    """A plan whose Python comes from pyenv: `pyenv install -s 3.11.7` (already installed) runs for real."""
    if not have_pyenv_version("3.11.7"):
        pytest.skip("pyenv with Python 3.11.7 is not installed")
    facts = _facts_without_python(tmp_path, installable=["3.11.7"])
    prefix = tmp_path / "env"
    proc = run_tf("install", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--facts", str(facts),
                  "--torch-index-url", torch_index, "--prefix", str(prefix), "--json", state=state_home)
    assert proc.returncode == 0, proc.stderr
    assert "pyenv install -s 3.11.7" in proc.stderr
    out = json.loads(proc.stdout)
    assert out["plan"]["python_source"] == "pyenv" and out["runtime"]["python"] == "3.11.7"
    assert "pyenv install -s 3.11.7" in (prefix / "torchfit-install.log").read_text()


def have_pyenv_version(version: str) -> bool:
    import shutil

    pyenv = shutil.which("pyenv")
    if not pyenv:
        return False
    out = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, timeout=60)
    return version in out.stdout.split()


def _facts_without_python(tmp_path: Path, installable: list[str]) -> Path:
    """This host's facts with no interpreter present, no uv-managed Pythons, and pyenv offering
    `installable` (the pyenv path: uv's come first where the facts have them, issue 35)."""
    out = run_tf("detect", "--json", state=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    data["pythons"] = []
    data["uv_pythons"] = None
    data["pyenv"] = {"path": (data.get("pyenv") or {}).get("path") or "/root/.pyenv", "version": "2.6",
                     "installable": installable}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(data))
    return path


def _fake_torch_wheel(folder: Path, version: str) -> Path:
    """A torch wheel that is not torch: a planted file says so, version.py says `version`."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": f"__version__ = {version!r}\n",
        "torch/version.py": f"__version__ = {version!r}\ncuda = None\nhip = None\n",
        "torch/PLANTED_BY_ANOTHER_INDEX": "dependency confusion\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            data = text.encode()
            zf.writestr(name, data)
            record.append(f"{name},{record_digest(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


@pytest.mark.parametrize("installer", ["uv", pytest.param("pip", marks=pytest.mark.slow)])
def test_a_torch_offered_by_another_source_is_never_installed(tmp_path: Path, torch_index: str, state_home: Path,
                                                              installer: str) -> None:
    """Dependency confusion: an extra index and a find-links directory offer a higher torch (99.0)
    and a different file under the plan's own version (2.13.0+cpu). The env gets the torch index's
    file: the version, the sha256 in the lock, and no planted file."""
    from tests.installer.conftest import CPU_WHEEL, make_simple_index
    from tests.support.wheels import sha256_file

    if installer == "uv" and not __import__("tests.installer.conftest", fromlist=["have_uv"]).have_uv():
        pytest.skip("uv is not installed")
    fakes = [_fake_torch_wheel(tmp_path / "fakes", v) for v in ("99.0", "2.13.0+cpu")]
    evil_index = make_simple_index(tmp_path / "evil", fakes).as_uri()
    prefix = tmp_path / "env"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--extra-index-url", evil_index,
                  "--find-links", str(tmp_path / "fakes"), "--installer", installer, "--prefix", str(prefix),
                  "--json", state=state_home)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["runtime"]["torch"] == "2.13.0+cpu"
    torch = next(p for p in _lock(prefix)["packages"] if p["name"] == "torch")
    assert [w["hashes"]["sha256"] for w in torch["wheels"]] == [sha256_file(CPU_WHEEL)]
    assert not list(prefix.glob("lib/python3*/site-packages/torch/PLANTED_BY_ANOTHER_INDEX"))
    assert (next(prefix.glob("lib/python3*/site-packages/torch")) / "version.py").read_text().count("2.13.0+cpu")
