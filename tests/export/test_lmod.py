"""`export --format lmod` (issue 26, item 3) with Debian's real Lmod: `module use DIR; module load
torch/VERSION-VARIANT` in a login shell gives the env's python and torch, the NCCL pin's variables
as `torchfit run` sets them; `module unload` gives PATH back. Lmod missing: skipped with the
reason, except in CI (TORCHFIT_REQUIRE_LMOD=1, set by .ci/run, which installs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import cpu_env, cpu_wheel, run_tf, state_home, torch_index

__all__ = ["cpu_env", "cpu_wheel", "state_home", "torch_index"]  # the installer's fixtures, used here

LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")
pytestmark = pytest.mark.slow


@pytest.fixture
def lmod() -> Path:
    if not LMOD_INIT.is_file():
        if os.environ.get("TORCHFIT_REQUIRE_LMOD") == "1":
            pytest.fail(f"TORCHFIT_REQUIRE_LMOD=1 but {LMOD_INIT} is missing (apt-get install lmod)")
        pytest.skip(f"Lmod is not installed ({LMOD_INIT}): apt-get install lmod")
    return LMOD_INIT


def _module_shell(lmod: Path, moddir: Path, script: str) -> subprocess.CompletedProcess[str]:
    """bash as a login shell would run it: Lmod's init, then `script`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE", "_ModuleTable", "LOADEDMODULES"))}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    return subprocess.run(["bash", "-c", f"source {lmod} && module use {moddir} && {script}"],
                          capture_output=True, text=True, timeout=300, env=env)


def _export(lock: Path, out: Path, state: Path) -> None:
    proc = run_tf("export", "--format", "lmod", "--lock", str(lock), "-o", str(out), state=state)
    assert proc.returncode == 0, proc.stderr


def test_the_env_as_an_lmod_module_loads_imports_torch_and_unloads(
        lmod: Path, cpu_env: dict[str, Any], tmp_path: Path, state_home: Path) -> None:
    prefix: Path = cpu_env["prefix"]
    moddir = tmp_path / "modules"
    (moddir / "torch").mkdir(parents=True)
    _export(prefix / "pylock.toml", moddir / "torch" / "2.13.0-cpu.lua", state_home)
    text = (moddir / "torch" / "2.13.0-cpu.lua").read_text()
    assert 'family("torch")' in text and "Lock: " + str(prefix) in text
    res = _module_shell(lmod, moddir, 'echo "before=$PATH"; module load torch/2.13.0-cpu && '
                        'python -c "import sys, torch; print(sys.prefix, torch.__version__)" && '
                        'echo "nccl=$TORCHFIT_NCCL venv=$VIRTUAL_ENV" && module whatis torch/2.13.0-cpu 2>&1 && '
                        'module unload torch && echo "after=$PATH venv=${VIRTUAL_ENV-unset}"')
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"{prefix} 2.13.0+cpu" in out, out  # the env's own interpreter and torch
    assert f"nccl=none (no NCCL in this build) venv={prefix}" in out, out
    assert "Version: 2.13.0 (cpu)" in out + res.stderr and "Packages: torch 2.13.0" in out + res.stderr
    before = re.search(r"before=(\S+)", out).group(1)  # type: ignore[union-attr]
    assert f"after={before} venv=unset" in out, out  # PATH back as it was


def test_an_ld_preload_pin_is_set_by_the_module_and_undone_by_unload(
        lmod: Path, cpu_env: dict[str, Any], tmp_path: Path, state_home: Path) -> None:
    """An env pinned with --nccl-lib (its lock's [tool.torchfit.nccl]): the module preloads that
    libnccl as bin/torchfit-env does, and unload restores the LD_PRELOAD the shell had."""
    env = tmp_path / "pinned-env"
    env.mkdir()
    lock = (cpu_env["prefix"] / "pylock.toml").read_text()
    lib = "/opt/nccl/lib/libnccl.so.2"
    lock = re.sub(r"\[tool\.torchfit\.nccl\][^\[]*", "", lock)
    lock += f'\n[tool.torchfit.nccl]\nmechanism = "ld-preload"\nlibrary = "{lib}"\nversion = "2.28.3"\n'
    (env / "pylock.toml").write_text(lock)
    moddir = tmp_path / "modules"
    (moddir / "torch").mkdir(parents=True)
    _export(env / "pylock.toml", moddir / "torch" / "2.13.0-cpu.lua", state_home)
    res = _module_shell(lmod, moddir, 'export LD_PRELOAD=/lib/other.so; module load torch 2>/dev/null; '
                        'echo "loaded=$LD_PRELOAD lib=$TORCHFIT_NCCL_LIB"; module unload torch 2>/dev/null; '
                        'echo "unloaded=$LD_PRELOAD"')
    assert f"loaded={lib}:/lib/other.so lib={lib}" in res.stdout, res.stdout + res.stderr
    assert "unloaded=/lib/other.so" in res.stdout, res.stdout


def test_lmod_needs_a_lock(tmp_path: Path) -> None:
    proc = run_tf("export", "--format", "lmod", "torch==2.13.0", "--variant", "cpu", state=tmp_path)
    assert proc.returncode == 2 and "--lock PREFIX/pylock.toml" in proc.stderr, proc.stderr
    assert shutil.which("bash")
