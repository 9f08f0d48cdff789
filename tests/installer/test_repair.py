"""`torchfit doctor --fix` (installer/repair.py, cli/commands/_doctor_fix.py): issue 28, item 2;
issue 34 D1-D4 (a repair replaces only what it names: the user's files, hand-installed
packages and own lines of bin/torchfit-env stay; a process using the env refuses a reinstall;
a repair that fails or is interrupted exits as install does).

The slow tests damage a real CPU torch 2.13.0 env built by `torchfit install` from the local
wheel (its own env: the session's shared one stays whole), then let doctor find the damage,
show the repair (--dry-run, nothing changed), make it, and pass.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import (
    CPU_ARGS,
    is_uv_install,
    needs_uv,
    one_line_error,
    pid_alive,
    run_tf,
    start_tf,
    wait_for_child,
)
from tests.support.wheels import sha256_file
from torchfit.installer.repair import (
    Installed,
    drop_assignments,
    load_built_env,
    plan_repairs,
    read_installed,
    script_variables,
)
from torchfit.lock.model import Artifact, Lock, LockedDist

pytestmark = needs_uv


@pytest.fixture
def damaged_env(tmp_path: Path, torch_index: str, state_home: Path) -> dict[str, Any]:
    prefix = tmp_path / "env"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix),
                  state=state_home)
    assert proc.returncode == 0, proc.stderr
    site = next((prefix / "lib").glob("python3*/site-packages"))
    return {"prefix": prefix, "site": site, "lock": (prefix / "pylock.toml").read_bytes()}


def doctor(state: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_tf("doctor", *args, state=state, timeout=600, **env)


@pytest.mark.slow
def test_fix_reinstalls_a_deleted_library_from_the_lock(damaged_env: dict[str, Any], state_home: Path) -> None:
    prefix, site = damaged_env["prefix"], damaged_env["site"]
    lib = site / "torch" / "lib" / "libtorch_cpu.so"
    digest = sha256_file(lib)
    lib.unlink()

    # The damaged env's report points at torch-files and at --fix first, not at the shadowing checks.
    r = doctor(state_home, "--env", str(prefix))
    assert r.returncode == 1, r.stderr
    imp = r.stdout[r.stdout.index("torch-import"):r.stdout.index("\n  fail     torch-files")]
    assert "torch-files below" in imp and f"torchfit doctor --fix --env {prefix}" in imp, imp
    assert "shadowing" not in imp and "1 of torch's own files differs" in imp, imp

    dry = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run", "--json")
    assert dry.returncode == 1, dry.stderr
    data = json.loads(dry.stdout)
    assert data["schema"] == "torchfit.doctor/1"
    assert [(f["check"], f["kind"], f["done"]) for f in data["fixes"]] == [("torch-files", "reinstall", False)]
    assert not lib.exists()  # a dry run changes nothing
    text = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run")
    assert "would fix torch-files: reinstall torch 2.13.0+cpu" in text.stdout, text.stdout

    fixed = doctor(state_home, "--env", str(prefix), "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "fixed torch-files: reinstalled torch from the lock" in fixed.stdout
    assert "Nothing failed." in fixed.stdout
    assert sha256_file(lib) == digest
    assert (prefix / "pylock.toml").read_bytes() == damaged_env["lock"]  # the lock is the truth, untouched
    after = doctor(state_home, "--env", str(prefix), "--json")
    assert after.returncode == 0 and json.loads(after.stdout)["summary"]["fail"] == 0, after.stdout


def _remove_torch(site: Path) -> None:
    """`rm -rf site-packages/torch*`: torch, its dist-info and torchgen gone."""
    for path in site.glob("torch*"):
        shutil.rmtree(path)


@pytest.mark.slow
def test_fix_installs_a_lost_torch_and_keeps_what_is_not_in_the_lock(damaged_env: dict[str, Any],
                                                                      state_home: Path) -> None:
    """Issue 34 D1: the rebuild was `install --lock --force`, which deleted PREFIX/notes.txt,
    a Jupyter kernel and a package installed by hand; the dry run did not say so."""
    prefix, site = damaged_env["prefix"], damaged_env["site"]
    (prefix / "notes.txt").write_text("x\n")
    kernel = prefix / "share" / "jupyter" / "kernels" / "mine" / "kernel.json"
    kernel.parent.mkdir(parents=True)
    kernel.write_text('{"argv": ["python"]}\n')
    uv = shutil.which("uv") or os.path.join(os.path.dirname(sys.executable), "uv")
    subprocess.run([uv, "pip", "install", "--python", str(prefix / "bin" / "python"), "--no-config", "--offline",
                    "/opt/pypi/files/six-1.17.0-py2.py3-none-any.whl"], check=True, capture_output=True, timeout=120)
    _remove_torch(site)
    dry = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run")
    assert dry.returncode == 1
    fixed = doctor(state_home, "--env", str(prefix), "--fix")
    assert (prefix / "notes.txt").read_text() == "x\n", "the user's file in PREFIX was deleted"
    assert kernel.is_file() and (site / "six.py").is_file(), "a kernel or a hand-installed package was deleted"
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert f"fixed torch-import: installed torch into {prefix} from the lock" in fixed.stdout, fixed.stdout
    assert (site / "torch" / "lib" / "libtorch_cpu.so").is_file()
    assert (prefix / "pylock.toml").read_bytes() == damaged_env["lock"]
    # The dry run said exactly that: torch installed, nothing replaced or removed, no --force.
    assert f"would fix torch-import: install torch 2.13.0+cpu into {prefix} from its lock" in dry.stdout, dry.stdout
    assert "nothing installed is replaced or removed" in dry.stdout and "--force" not in dry.stdout, dry.stdout


@pytest.mark.slow
def test_fix_removes_only_the_line_that_sets_the_variable(damaged_env: dict[str, Any], state_home: Path) -> None:
    """Issue 34 D2: the env-script repair wrote bin/torchfit-env again from the lock, dropping
    the user's own lines (HF_HOME, WANDB_MODE); now only the named line goes, byte for byte."""
    prefix = damaged_env["prefix"]
    script = prefix / "bin" / "torchfit-env"
    original = script.read_bytes()
    mine = b"export HF_HOME=/scratch/hf\nWANDB_MODE=offline  # no network on the nodes\n# caf\xe9\n"
    script.write_bytes(original + b"export HF_HOME=/scratch/hf\nexport NCCL_P2P_DISABLE=1\n"
                       b"WANDB_MODE=offline  # no network on the nodes\n# caf\xe9\n")
    # NCCL_IB_DISABLE comes from the shell, not from a file torchfit wrote: said, not touched.
    env = {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
    dry = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run", **env)
    assert f"would fix nccl-env-disables: remove the line `export NCCL_P2P_DISABLE=1` from {script} (the rest " \
        "of the file is kept as it is)" in dry.stdout, dry.stdout
    assert "not fixed: nccl-env-disables: NCCL_IB_DISABLE is set outside the files torchfit wrote" in dry.stdout
    assert b"NCCL_P2P_DISABLE" in script.read_bytes()
    fixed = doctor(state_home, "--env", str(prefix), "--fix", **env)
    assert fixed.returncode == 0, fixed.stderr
    assert script.read_bytes() == original + mine
    assert "removed the line setting NCCL_P2P_DISABLE" in fixed.stdout, fixed.stdout


@pytest.mark.slow
def test_fix_refuses_to_reinstall_under_a_process_of_the_env(damaged_env: dict[str, Any], state_home: Path) -> None:
    """Issue 34 D3: a reinstall replaced torch under a running process of the env; now the check
    `add` makes refuses it (env-in-use, exit 1) unless --allow-in-use."""
    prefix, site = damaged_env["prefix"], damaged_env["site"]
    lib = site / "torch" / "lib" / "libtorch_cpu.so"
    lib.unlink()
    user = subprocess.Popen([str(prefix / "bin" / "python"), "-c", "import time; time.sleep(600)"])
    try:
        dry = doctor(state_home, "--env", str(prefix), "--fix", "--dry-run")
        assert f"not fixed: 1 process(es) use {prefix} (pid {user.pid}" in dry.stdout, dry.stdout
        r = doctor(state_home, "--env", str(prefix), "--fix")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "[env-in-use]" in r.stderr and f"pid {user.pid}" in r.stderr, r.stderr
        assert "would replace torch 2.13.0+cpu" in r.stderr and "--allow-in-use" in r.stderr, r.stderr
        assert not lib.exists()
        assert one_line_error(doctor(state_home, "--env", str(prefix), "--allow-in-use")).endswith(
            "give --fix too  [bad-input]")
        forced = doctor(state_home, "--env", str(prefix), "--fix", "--allow-in-use")
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert lib.is_file() and "--allow-in-use: the packages they may import later are replaced now" in forced.stderr
    finally:
        user.kill()
        user.wait()


@pytest.mark.slow
def test_a_failed_or_interrupted_fix_exits_as_install_does(damaged_env: dict[str, Any], tmp_path: Path,
                                                           state_home: Path) -> None:
    """Issue 34 D4: a repair whose install failed (1) or was interrupted (130) was reported as
    [bad-input], exit 2. A cold uv cache makes the install take seconds, long enough to hit."""
    prefix, site = damaged_env["prefix"], damaged_env["site"]
    _remove_torch(site)
    argv = ("doctor", "--env", str(prefix), "--fix")
    proc = start_tf(*argv, state=state_home, UV_CACHE_DIR=str(tmp_path / "uv-cold-1"))
    child, _ = wait_for_child(proc, is_uv_install)
    os.kill(child, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "[install-failed]" in err and "bad-input" not in err, err
    proc = start_tf(*argv, state=state_home, UV_CACHE_DIR=str(tmp_path / "uv-cold-2"))
    child, _ = wait_for_child(proc, is_uv_install)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "bad-input" not in err and not pid_alive(child), err
    assert (prefix / "pylock.toml").read_bytes() == damaged_env["lock"]


def test_fix_refuses_an_env_torchfit_did_not_build(tmp_path: Path, state_home: Path) -> None:
    venv = tmp_path / "plain"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    before = sorted(str(p) for p in venv.rglob("*"))
    line = one_line_error(doctor(state_home, "--env", str(venv), "--fix"))
    assert "--fix repairs only envs torchfit built" in line and "nothing was changed" in line, line
    assert sorted(str(p) for p in venv.rglob("*")) == before
    line = one_line_error(doctor(state_home, "--dry-run"))
    assert "--dry-run shows what --fix would do" in line


def test_list_names_every_check_and_its_repair(state_home: Path) -> None:
    r = doctor(state_home, "--list", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["schema"] == "torchfit.doctor-list/1"
    rows = {c["id"]: c for c in data["checks"]}
    assert rows["torch-files"]["fix"] == "reinstall" and rows["torch-import"]["fix"] == "rebuild"
    assert rows["nccl-env-disables"]["fix"] == "env-script" and rows["dev-shm-size"]["fix"] is None
    assert rows["log-unrecognised"]["needs_log"] is True
    text = doctor(state_home, "--list").stdout
    assert text.splitlines()[0].startswith("nvidia-smi ") and "--fix: reinstall the locked packages" in text


def _lock() -> Lock:
    torch = LockedDist("torch", "2.13.0+cpu", (Artifact("wheel", "0" * 64, "file:///w/torch.whl", None, "torch.whl"),))
    return Lock((torch,), {"plan": {"variant": "cpu"}})


def test_plan_repairs_from_verdicts() -> None:
    lock = _lock()
    plan = plan_repairs("/e", lock, {"torch-import": "fail", "torch-files": "fail"}, {}, "")
    assert [(r.check, r.kind, r.packages) for r in plan.repairs] == [("torch-files", "reinstall", ("torch",))]
    plan = plan_repairs("/e", lock, {"torch-import": "fail", "torch-files": "unknown"}, {}, "",
                        installed=Installed({"six": "1.17.0"}, "3.11"))
    assert [(r.kind, r.packages) for r in plan.repairs] == [("rebuild", ("torch",))]
    # torch imports badly but its files match its RECORD (a shadowing library): nothing torchfit may rebuild
    assert plan_repairs("/e", lock, {"torch-import": "fail", "torch-files": "ok"}, {}, "").repairs == []
    script = "TORCHFIT_ENV='/e'\nexport TORCHFIT_ENV\n  export NCCL_SOCKET_IFNAME=eth9\n"
    assert script_variables(script) == {"TORCHFIT_ENV", "NCCL_SOCKET_IFNAME"}
    plan = plan_repairs("/e", lock, {"nccl-socket-ifname": "fail", "cuda-visible-devices": "ok"},
                        {"NCCL_SOCKET_IFNAME": "eth9", "CUDA_VISIBLE_DEVICES": "7"}, script)
    assert [(r.kind, r.variables) for r in plan.repairs] == [("env-script", ("NCCL_SOCKET_IFNAME",))]
    assert plan.refused == []
    # bin/torchfit-env a symlink (or not the file install wrote): the variable is said, never rewritten
    plan = plan_repairs("/e", lock, {"nccl-socket-ifname": "fail"}, {"NCCL_SOCKET_IFNAME": "eth9"}, script,
                        "/e/bin/torchfit-env is not a regular file of the env (a symlink?)")
    assert plan.repairs == [] and "NCCL_SOCKET_IFNAME set in /e/bin/torchfit-env" in plan.refused[0]


def test_a_rebuild_installs_only_what_is_missing_and_names_the_rest() -> None:
    numpy = LockedDist("numpy", "2.1.0", (Artifact("wheel", "1" * 64, "file:///w/numpy.whl", None, "numpy.whl"),))
    old_py = LockedDist("tomli", "2.0.1", (Artifact("wheel", "2" * 64, "file:///w/tomli.whl", None, "tomli.whl"),),
                        marker="python_version < '3.11'")
    lock = Lock((*_lock().packages, numpy, old_py), {"plan": {"variant": "cpu"}})
    faults = {"torch-import": "fail", "torch-files": "unknown"}
    plan = plan_repairs("/e", lock, faults, {}, "", installed=Installed({"numpy": "1.26.4"}, "3.11"))
    # numpy at another version is the user's (kept, said); tomli's marker excludes Python 3.11
    assert [(r.kind, r.packages) for r in plan.repairs] == [("rebuild", ("torch",))]
    assert "install torch 2.13.0+cpu into /e" in plan.repairs[0].what
    assert plan.refused == ["torch-import: numpy 1.26.4 (the lock has 2.1.0) installed in /e: kept (not the lock's; "
                            "`torchfit add` or `pip install` put it there)"]
    gone = plan_repairs("/e", lock, faults, {}, "", installed=Installed({}, None, "/e/bin/python is gone"))
    assert gone.repairs == [] and "/e/bin/python is gone: there is no env" in gone.refused[0]


def test_read_installed_reads_the_dist_info_names(tmp_path: Path) -> None:
    assert read_installed(str(tmp_path)).refused == f"{tmp_path}/bin/python is gone"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for d in ("torch-2.13.0+cpu.dist-info", "typing_extensions-4.16.0.dist-info", "six.py", "x.dist-info",
              "Legacy_Pkg-1.0-py3.11.egg-info"):
        (site / d).mkdir()
    env = read_installed(str(tmp_path))
    assert env == Installed({"torch": "2.13.0+cpu", "typing-extensions": "4.16.0", "legacy-pkg": "1.0"}, "3.11")


@pytest.mark.parametrize(("line", "why"), [
    ("export NCCL_P2P_DISABLE=1; export HF_HOME=/x\n", "export NCCL_P2P_DISABLE=1; export HF_HOME=/x"),
    ("NCCL_P2P_DISABLE=1 && rm -rf /tmp/x\n", "NCCL_P2P_DISABLE=1 && rm -rf /tmp/x"),
    ("NCCL_P2P_DISABLE='1\nHF_HOME=/x'\n", "NCCL_P2P_DISABLE='1"),
    ("NCCL_P2P_DISABLE=1 \\\n", "NCCL_P2P_DISABLE=1 \\"),
    ("  export NCCL_P2P_DISABLE=\"$(cat /x)\"  # mine\n", None),
])
def test_drop_assignments_removes_a_whole_line_or_nothing(line: str, why: str | None) -> None:
    head = "# torchfit-env: x\nexport HF_HOME=/data\f/hf\n"
    tail = "WANDB_MODE=offline\n# caf\udce9"
    text, refused = drop_assignments(head + line + tail, ["NCCL_P2P_DISABLE"])
    assert refused == why
    assert text == (head + line + tail if why else head + tail)
    plan = plan_repairs("/e", _lock(), {"nccl-env-disables": "fail"}, {}, head + line + tail)
    assert [r.kind for r in plan.repairs] == ([] if why else ["env-script"])
    assert why or plan.repairs[0].what.startswith(f"remove the line `{line.strip()}` from /e/bin/torchfit-env")
    assert ("sets NCCL_P2P_DISABLE in a line that does more" in plan.refused[0]) if why else plan.refused == []


def test_a_symlinked_env_script_is_not_the_file_torchfit_wrote(tmp_path: Path) -> None:
    from torchfit.installer.repair import read_env_script

    (tmp_path / "bin").mkdir()
    outside = tmp_path / "outside.sh"
    outside.write_text("# torchfit-env: x\nexport NCCL_P2P_DISABLE=1\n")
    (tmp_path / "bin" / "torchfit-env").symlink_to(outside)
    text, why = read_env_script(str(tmp_path))
    assert text == "" and why is not None and "symlink" in why
    (tmp_path / "bin" / "torchfit-env").unlink()
    (tmp_path / "bin" / "torchfit-env").write_text("export NCCL_P2P_DISABLE=1\n")
    assert "does not start as the file torchfit writes" in (read_env_script(str(tmp_path))[1] or "")


def test_load_built_env_needs_the_lock_and_the_env_script(tmp_path: Path) -> None:
    from torchfit.errors import BadInput

    (tmp_path / "bin").mkdir()
    with pytest.raises(BadInput, match="only envs torchfit built"):
        load_built_env(str(tmp_path))
    with pytest.raises(BadInput, match="no such directory"):
        load_built_env(str(tmp_path / "nope"))
    assert os.path.isdir(tmp_path)


def _torchfit_elsewhere(tmp_path: Path, uv_script: str | None) -> tuple[str, dict[str, str]]:
    """torchfit run by an interpreter whose bin/ holds no uv (or `uv_script`, a fake), with the
    `uv` wheel's module hidden (a `uv` package first on the path that cannot be imported) and PATH
    stripped to /usr/bin:/bin: the places lock.uv.find_uv looks. A real subprocess: the python is
    a link to this one, outside its venv, the venv's packages given by PYTHONPATH."""
    import site
    import textwrap

    bindir = tmp_path / "tf" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python").symlink_to(os.path.realpath(sys.executable))
    if uv_script is not None:
        (bindir / "uv").write_text(textwrap.dedent(uv_script))
        (bindir / "uv").chmod(0o755)
    hide = tmp_path / "hide" / "uv"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('the uv wheel is hidden from this test')\n")
    path = "/usr/bin:/bin"
    if shutil.which("uv", path=path):
        pytest.skip("uv is installed in /usr/bin or /bin")
    sites = [p for p in site.getsitepackages() if os.path.isdir(p)]
    return str(bindir / "python"), {"PATH": path, "PYTHONPATH": os.pathsep.join(
        [str(hide.parent), os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "src"), *sites])}


def _tree(prefix: Path) -> dict[str, str]:
    """Every file of PREFIX (but compiled bytecode) -> its sha256: what the env holds."""
    return {str(p.relative_to(prefix)): sha256_file(p) for p in sorted(prefix.rglob("*"))
            if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts}


@pytest.mark.slow
def test_fix_without_uv_is_one_line_naming_what_is_missing(damaged_env: dict[str, Any], tmp_path: Path,
                                                           state_home: Path) -> None:
    """Issue 34: `doctor --fix` where uv is neither beside torchfit's interpreter, nor importable
    (the `uv` wheel), nor on PATH: exit 2, one line naming what is missing and where it was looked
    for; nothing of the env changed. The dry run says it too."""
    from tests.support.cli import run_cli

    prefix, site_dir = damaged_env["prefix"], damaged_env["site"]
    _remove_torch(site_dir)
    before = _tree(prefix)
    python, env = _torchfit_elsewhere(tmp_path, None)
    base = {**os.environ, "XDG_STATE_HOME": str(state_home)}
    proc = run_cli("doctor", "--env", str(prefix), "--fix", python=python, base_env=base, env=env, timeout=600)
    line = one_line_error(proc)
    assert line.startswith("torchfit: error: --fix installs with uv, which torchfit cannot find: not beside "
                           f"{python}, not importable (the uv package), not on PATH (/usr/bin:/bin)"), line
    assert line.endswith("nothing was changed  [bad-input]") and "pip install uv" in line, line
    assert _tree(prefix) == before
    dry = run_cli("doctor", "--env", str(prefix), "--fix", "--dry-run", python=python, base_env=base, env=env,
                  timeout=600)
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert "not fixed: torch-import: --fix installs with uv, which torchfit cannot find" in dry.stdout, dry.stdout


@pytest.mark.slow
def test_a_fix_whose_uv_hangs_is_stopped_at_the_stall_limit(damaged_env: dict[str, Any], tmp_path: Path,
                                                             state_home: Path) -> None:
    """Issue 34: `doctor --fix`'s rebuild runs uv under the stall limit as install does
    (TORCHFIT_STALL_TIMEOUT): a uv whose `pip install` hangs (a fake beside torchfit's interpreter
    that records its pid and sleeps; every other uv command is the real uv's) is killed after the
    limit and reported in one line, exit 1; what it had begun to install is taken back (the env is
    as it was) and nothing is left running."""
    from tests.support.cli import run_cli

    prefix, site_dir = damaged_env["prefix"], damaged_env["site"]
    _remove_torch(site_dir)
    before = _tree(prefix)
    real = os.path.join(os.path.dirname(sys.executable), "uv")
    pids = tmp_path / "uv-pids"
    # half an install, then nothing: torch's package and dist-info begun, an entry point written
    python, env = _torchfit_elsewhere(tmp_path, f"""\
        #!/bin/sh
        if [ "$1" = pip ] && [ "$2" = install ]; then
            echo $$ >> {pids}
            mkdir -p {site_dir}/torch/lib {site_dir}/torch-2.13.0+cpu.dist-info
            echo partial > {site_dir}/torch/__init__.py
            echo '#!/bin/sh' > {prefix}/bin/torch-entry-point
            exec sleep 600
        fi
        exec {real} "$@"
        """)
    base = {**os.environ, "XDG_STATE_HOME": str(state_home)}
    start = time.monotonic()
    proc = run_cli("doctor", "--env", str(prefix), "--fix", python=python, base_env=base,
                   env={**env, "TORCHFIT_STALL_TIMEOUT": "3"}, timeout=300)
    took = time.monotonic() - start
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("torchfit: error:")]
    assert len(errors) == 1 and "made no progress for 3 s" in errors[0] and "Traceback" not in proc.stderr, \
        proc.stderr
    assert took < 120, took
    assert pids.is_file() and not any(pid_alive(int(p)) for p in pids.read_text().split()), "uv was left running"
    assert _tree(prefix) == before and not (site_dir / "torch").exists(), "the half-done install was left"
    assert not (site_dir / "torch-2.13.0+cpu.dist-info").exists()
    assert f"the failed install's 5 new path(s) in {prefix} were removed: the env is as it was" in proc.stderr, \
        proc.stderr


def test_remove_added_takes_back_only_what_appeared_and_follows_no_link(tmp_path: Path) -> None:
    """A failed rebuild's take-back (installer.repair.remove_added): what appeared under bin/ and
    site-packages since the snapshot goes, deepest first; what was there stays (a directory that
    gained a file keeps its old files); a link planted meanwhile is removed, never what it points to;
    nothing outside bin/ and site-packages is touched."""
    from torchfit.installer.repair import install_paths, remove_added

    prefix = tmp_path / "env"
    site_dir = prefix / "lib" / "python3.11" / "site-packages"
    (site_dir / "old").mkdir(parents=True)
    (site_dir / "old" / "keep.py").write_text("x\n")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").write_text("")
    outside = tmp_path / "victim"
    outside.mkdir()
    (outside / "precious").write_text("mine\n")
    before = install_paths(str(prefix))
    (site_dir / "torch" / "lib").mkdir(parents=True)
    (site_dir / "torch" / "__init__.py").write_text("")
    (site_dir / "old" / "new.py").write_text("")
    (site_dir / "link").symlink_to(outside)
    (prefix / "bin" / "torchrun").write_text("")
    (prefix / "notes.txt").write_text("the user's\n")
    assert remove_added(str(prefix), before) == (6, [])
    assert install_paths(str(prefix)) == before
    assert (outside / "precious").read_text() == "mine\n" and (prefix / "notes.txt").is_file()
