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
    moddir = tmp_path / "modules"  # a new module tree: -o makes its directories (issue 35)
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


# --- values escaped for Lua (issue 34, L1 and L2): loaded by the real Lmod, never run as code ------


def _lock_at(env: Path, name: str = "pylock.toml", nccl: str | None = None) -> Path:
    """The containerfile tests' lock (CPU torch 2.13.0) at `env`/`name`, its NCCL wheel pin at `nccl`."""
    from tests.export.conftest import container_lock

    env.mkdir(parents=True)
    text = container_lock(env, mechanism="wheel" if nccl else "none").read_text()
    if nccl:
        text = text.replace('mechanism = "wheel"\n', f'mechanism = "wheel"\npackage = "nvidia-nccl-cu12"\n'
                                                     f'version = "{nccl}"\n')
    (env / "pylock.toml").unlink()
    (env / name).write_text(text)
    return env / name


def _load_and_show(lmod: Path, moddir: Path) -> subprocess.CompletedProcess[str]:
    """`module load` then `module show` of torch/2.13.0-cpu; prints what the module set, repr'd."""
    show = ("import os; print(repr(os.environ.get('VIRTUAL_ENV')), repr(os.environ.get('TORCHFIT_NCCL')), "
            "repr(os.environ.get('INJECTED')))")
    return _module_shell(lmod, moddir, f'module load torch/2.13.0-cpu && python3 -c "{show}" && '
                         "module show torch/2.13.0-cpu 2>&1")


def test_a_cr_or_newline_in_the_lock_path_stays_in_the_first_comment(lmod: Path, tmp_path: Path) -> None:
    """L1: the env's directory name holds a CR, the lock's file name a newline, each followed by Lua:
    Lmod loads the module, the injected `setenv` never runs, VIRTUAL_ENV is the directory exactly."""
    env = tmp_path / 'e\rsetenv("INJECTED","cr")--'
    lock = _lock_at(env, 'pylock\nsetenv("INJECTED","newline")\n--.toml')
    moddir = tmp_path / "modules"
    (moddir / "torch").mkdir(parents=True)
    _export(lock, moddir / "torch" / "2.13.0-cpu.lua", tmp_path / "state")
    res = _load_and_show(lmod, moddir)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[0] == f"{str(env)!r} 'none (no NCCL in this build)' None", res.stdout
    # `module show` lists each function the file ran: the injected text appears inside the values
    # it shows (followed by its `--`), never as a setenv of its own.
    ran = re.split(r"[\r\n]", res.stdout)
    assert 'setenv("INJECTED","cr")' not in ran and 'setenv("INJECTED","newline")' not in ran, res.stdout


def test_values_ending_in_a_bracket_keep_the_lua_syntax(lmod: Path, tmp_path: Path) -> None:
    """L2: an env at envs/env[1] and an NCCL version `2.27.3]` in the lock: the module loads and
    sets both as they are (a Lua long string `[[...]]` ended one character early)."""
    env = tmp_path / "envs" / "env[1]"
    lock = _lock_at(env, nccl="2.27.3]")
    moddir = tmp_path / "modules"
    (moddir / "torch").mkdir(parents=True)
    _export(lock, moddir / "torch" / "2.13.0-cpu.lua", tmp_path / "state")
    res = _load_and_show(lmod, moddir)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[0] == f"{str(env)!r} 'nvidia-nccl-cu12==2.27.3]' None", res.stdout
    assert 'whatis("NCCL: nvidia-nccl-cu12==2.27.3]")' in res.stdout, res.stdout


def test_a_symlink_at_the_modulefile_path_is_refused_never_followed(tmp_path: Path) -> None:
    """The module tree is the site's: a symlink at -o (to a file outside) is refused naming it, the
    file it points to unchanged (files.write_into); a modulefile there before is rewritten."""
    from tests.installer.conftest import one_line_error

    lock = _lock_at(tmp_path / "env")
    victim = tmp_path / "victim"
    victim.write_text("the site's own file\n")
    (tmp_path / "torch.lua").symlink_to(victim)
    line = one_line_error(run_tf("export", "--format", "lmod", "--lock", str(lock), "-o", str(tmp_path / "torch.lua"),
                                 state=tmp_path / "state"))
    assert f"{tmp_path / 'torch.lua'}: a symbolic link is there" in line, line
    assert victim.read_text() == "the site's own file\n"
    (tmp_path / "torch.lua").unlink()
    (tmp_path / "torch.lua").write_text("-- an older module\n")
    _export(lock, tmp_path / "torch.lua", tmp_path / "state")
    assert (tmp_path / "torch.lua").read_text().startswith("-- torch/2.13.0-cpu: written by")
