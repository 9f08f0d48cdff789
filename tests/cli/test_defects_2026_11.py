"""Regression tests for the input/judgement defects of the 2026-11 attack (issue 13).

../shared/reference/defects-2026-11.md lists each defect with a repro; each test is
named after its number (test_dNN_...), runs the real CLI as a subprocess, and fails
on commit 6e0c2fd. GPUs are faked with an `nvidia-smi` script on PATH: one that
prints the NVML mismatch and exits 18, one that hangs, one that lists 8 H100s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.cli import run_cli, start_cli
from tests.support.fake_smi import EIGHT_H100, HANGS, NVML_MISMATCH, install_fake_smi


def fake_smi(tmp_path: Path, script: str) -> dict[str, str]:
    """An environment whose PATH starts with a directory holding `nvidia-smi` = script."""
    d = install_fake_smi(tmp_path / "bin", script)
    env = tf_env()
    env["PATH"] = f"{d}{os.pathsep}{env['PATH']}"
    return env


def tf_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("COLUMNS", None)
    env.pop("TORCHFIT_TORCH_INDEX_URL", None)
    env.update(extra)
    return env


def tf(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
       **kw: object) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, base_env=env or tf_env(), timeout=timeout, cwd=str(kw.pop("cwd", ROOT)), **kw)


def bad_input(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit 2, one line on stderr, no traceback; returns the line."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert lines[0].startswith("torchfit: error:")
    return lines[0]


# --- #2: a broken driver is a GPU host with unknown facts, never "no GPU" -----------------


@pytest.mark.parametrize("script", [NVML_MISMATCH, HANGS], ids=["nvml-mismatch", "hung-smi"])
def test_d02_broken_driver_resolve_refuses_with_cause_and_fix(tmp_path: Path, script: str) -> None:
    env = fake_smi(tmp_path, script)
    start = time.monotonic()
    proc = tf("resolve", "--json", env=env, timeout=90)
    assert time.monotonic() - start < 60
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "gpu-facts-unknown" in proc.stderr
    assert "timed out" in proc.stderr or "Driver/library version mismatch" in proc.stderr
    for fix in ("torchfit doctor", "--assume gpu=", "--variant cpu"):
        assert fix in proc.stderr
    # No CPU plan printed: with --json, stdout holds the one error object (issue 10), no plan.
    out = json.loads(proc.stdout)
    assert out["ok"] is False and out["reference"] == "gpu-facts-unknown" and "variant" not in out


def test_d02_broken_driver_install_refuses_before_building(tmp_path: Path) -> None:
    env = fake_smi(tmp_path, NVML_MISMATCH)
    prefix = tmp_path / "env"
    proc = tf("install", "torch==2.13.0", "--python", "3.11", "--prefix", str(prefix), env=env)
    assert proc.returncode == 1, proc.stderr
    assert "gpu-facts-unknown" in proc.stderr and not prefix.exists()


def test_d02_the_user_may_still_choose(tmp_path: Path) -> None:
    env = fake_smi(tmp_path, NVML_MISMATCH)
    cpu = tf("resolve", "--variant", "cpu", "--json", env=env)
    assert cpu.returncode == 0, cpu.stderr
    assert json.loads(cpu.stdout)["variant"] == "cpu"
    gpu = tf("resolve", "--assume", "gpu=sm_90", "--assume", "driver=580.95.05", "--json", env=env)
    assert gpu.returncode == 0, gpu.stderr
    assert json.loads(gpu.stdout)["variant"].startswith("cu")


def test_d02_one_judgement_for_resolve_and_doctor(tmp_path: Path) -> None:
    """doctor fails the same host resolve refuses, through the same function."""
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.judgements import judge_gpu_host
    from torchfit.host import nvidia_failure
    from torchfit.host.nvidia import NvidiaProbe

    probe = NvidiaProbe((), None, "nvidia-smi failed: Failed to initialize NVML: Driver/library version mismatch")
    judged = judge_gpu_host(HostFacts(nvidia_failure=nvidia_failure(probe)))
    assert judged.kind == "unknown" and "mismatch" in (judged.cause or "")
    missing = NvidiaProbe((), None, "nvidia-smi not found on PATH", missing=True)
    assert judge_gpu_host(HostFacts(nvidia_failure=nvidia_failure(missing))).kind == "none"
    env = fake_smi(tmp_path, NVML_MISMATCH)
    doc = tf("doctor", "--json", "--python", sys.executable, env=env)
    assert doc.returncode == 1
    smi = next(c for c in json.loads(doc.stdout)["checks"] if c["id"] == "nvidia-smi")
    assert smi["status"] == "fail" and "mismatch" in smi["evidence"]


def test_d02_facts_file_keeps_the_unknown(tmp_path: Path) -> None:
    """detect --json of a broken host, resolved elsewhere with --facts: still refused."""
    env = fake_smi(tmp_path, NVML_MISMATCH)
    det = tf("detect", "--json", env=env)
    assert det.returncode == 0
    facts = tmp_path / "node.json"
    facts.write_text(det.stdout)
    assert json.loads(det.stdout)["nvidia_failure"]
    proc = tf("resolve", "--facts", str(facts))
    assert proc.returncode == 1 and "gpu-facts-unknown" in proc.stderr


# --- #14: numeric flags -------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["detect", "--timeout", "nan"], ["detect", "--timeout", "inf"], ["detect", "--timeout", "-1"],
        ["detect", "--timeout", "0"], ["detect", "--timeout", "1e309"],
        ["install", "--timeout", "nan"], ["install", "--timeout", "inf"], ["install", "--wait", "nan"],
        ["verify", "--timeout", "nan"], ["verify", "--sizes", "100000000000000000000"],
        ["verify", "--master-port", "99999"], ["verify", "--rdzv-timeout", "-1"],
        ["verify", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:99999"],
        ["doctor", "--timeout", "nan"], ["matrix", "check", "--timeout", "inf"],
    ],
    ids=lambda a: "-".join(a),
)
def test_d14_numeric_flags_are_finite_and_in_range(args: list[str]) -> None:
    line = bad_input(tf(*args))
    assert "--" in line


# --- #15 / #29: bounded files --------------------------------------------------------------


def test_d15_deep_and_endless_facts_and_locks(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested" in bad_input(tf("resolve", "--facts", str(deep)))
    start = time.monotonic()
    assert "larger than" in bad_input(tf("resolve", "--facts", "/dev/zero"))
    assert "larger than" in bad_input(tf("export", "--format", "requirements", "--lock", "/dev/zero"))
    assert time.monotonic() - start < 30
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert "nested" in bad_input(tf("install", "--lock", str(deep_toml), "--prefix", str(tmp_path / "e")))


def test_d29_huge_facts_refused_fast(tmp_path: Path) -> None:
    gpu = {"index": 0, "name": "NVIDIA H100", "compute_capability": "9.0"}
    facts = tmp_path / "huge.json"
    facts.write_text(json.dumps({"driver_version": "580.65.06", "gpus": [gpu] * 200_000}))
    start = time.monotonic()
    line = bad_input(tf("resolve", "--facts", str(facts)))
    assert time.monotonic() - start < 20 and len(line) < 300


# --- #16: verify --lock with a corrupt file -----------------------------------------------
# (the verify run itself is in tests/verify/test_defects_2026_11.py)


# --- #19: facts validation ------------------------------------------------------------------


def _facts(tmp_path: Path, data: dict[str, object]) -> str:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_d19_unknown_key_in_facts_is_named(tmp_path: Path) -> None:
    line = bad_input(tf("resolve", "--facts", _facts(tmp_path, {"driver": "550.54.14", "gpus": []})))
    assert "'driver'" in line and "driver_version" in line


def test_d19_gpu_by_name_alone_gets_its_capability(tmp_path: Path) -> None:
    path = _facts(tmp_path, {"driver_version": "570.124.06", "glibc": "2.39", "arch": "x86_64",
                             "pythons": [{"version": "3.12.3"}],
                             "gpus": [{"name": "NVIDIA GeForce RTX 4090"}]})
    proc = tf("resolve", "--facts", path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "sm unknown" not in proc.stdout and json.loads(proc.stdout)["variant"].startswith("cu")


def test_d19_pyenv_installable_must_be_versions(tmp_path: Path) -> None:
    path = _facts(tmp_path, {"pyenv": {"path": "/p", "installable": ["abc", "3.12.99999999999999999999"]}})
    assert "pyenv.installable" in bad_input(tf("resolve", "--facts", path))


def test_d19_a_pyenv_object_with_a_typo_is_named_not_dropped(tmp_path: Path) -> None:
    """{"pyenv": {"root": ...}} used to be read as "no pyenv" (and its list never checked)."""
    path = _facts(tmp_path, {"pyenv": {"root": "/r", "installable": ["abc"]}})
    assert "unknown key 'root'" in bad_input(tf("resolve", "--facts", path))
    assert "'path'" in bad_input(tf("resolve", "--facts", _facts(tmp_path, {"pyenv": {}})))


# --- #20: requirement extras, URLs, markers -------------------------------------------------


@pytest.mark.parametrize("req", ["torch @ https://x/y.whl", "torch[opt-einsum]", 'torch; python_version<"3"'])
def test_d20_requirement_parts_are_not_dropped(req: str) -> None:
    line = bad_input(tf("resolve", req, "--assume", "gpu=none"))
    assert "requirement" in line


# --- #21: export finds the uv install uses ------------------------------------------------


def test_d21_export_finds_uv_beside_torchfit(tmp_path: Path) -> None:
    beside = Path(sys.executable).parent / "uv"
    if not os.access(beside, os.X_OK):
        pytest.skip("uv is not installed beside this Python")
    env = tf_env(PATH="/usr/bin:/bin")  # no uv on PATH
    wheel_dir = tmp_path / "empty"
    wheel_dir.mkdir()
    proc = tf("export", "--format", "pylock", "torch==2.13.0", "--assume", "gpu=none", "--python", "3.11",
              "--torch-index-url", wheel_dir.as_uri(), env=env, timeout=180)
    assert "needs uv" not in proc.stderr, proc.stderr


# --- #22: verify --slurm option values ------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["--partition", "gpu\necho pwned"], ["--account", "a b"], ["--time", "abc"], ["--time", "1:2:3:4"]],
    ids=["newline-partition", "space-account", "time-abc", "time-4-parts"],
)
def test_d22_slurm_values_are_checked(args: list[str]) -> None:
    proc = tf("verify", "--slurm", "--print-script", "--nodes", "2", "--gpus-per-node", "8", "--python", sys.executable,
              *args)
    bad_input(proc)
    assert "pwned" not in proc.stdout


def test_d22_good_slurm_values_still_work() -> None:
    proc = tf("verify", "--slurm", "--print-script", "--nodes", "2", "--gpus-per-node", "8", "--python", sys.executable,
              "--partition", "gpu-h200", "--account", "ml_team", "--time", "1-12:00:00")
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --partition=gpu-h200" in proc.stdout and "#SBATCH --time=1-12:00:00" in proc.stdout


# --- #23: output errors -------------------------------------------------------------------


@pytest.mark.parametrize("args", [["resolve", "--assume", "gpu=none"], ["detect", "--json"],
                                  ["matrix", "show", "--json"], ["matrix", "show"]])
def test_d23_full_disk_on_stdout_is_not_a_bug(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = run_cli(*args, stdout=full, base_env=tf_env(), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert "No space left on device" in proc.stderr


@pytest.mark.parametrize("args", [["resolve", "--assume", "gpu=none"], ["matrix", "show"], ["detect"]])
def test_d23_closed_pipe_exits_0(args: list[str]) -> None:
    proc = start_cli(*args, base_env=tf_env(), text=False)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"Exception ignored" not in err


# --- #26 / #27: URLs and lenient values ---------------------------------------------------


def test_d26_invalid_ipv6_url_is_bad_input() -> None:
    assert "IPv6" in bad_input(tf("matrix", "check", "--index-url", "https://[::1/whl"))


@pytest.mark.parametrize(
    "args",
    [
        ["resolve", "--assume", "gpu=gfxZZZ"],
        ["resolve", "--assume", "driver=\uff15\uff18\uff10.\uff11"],  # full-width digits
        ["install", "--torch-index-url", "notaurl", "--prefix", "/tmp/torchfit-d27-never"],
        ["install", "--torch-index-url", "https://m/{varient}", "--prefix", "/tmp/torchfit-d27-never"],
        ["install", "--index-url", "notaurl", "--prefix", "/tmp/torchfit-d27-never"],
    ],
    ids=["gfx-garbage", "fullwidth-driver", "index-notaurl", "bad-placeholder", "pip-index-notaurl"],
)
def test_d27_lenient_values_are_bad_input(args: list[str]) -> None:
    bad_input(tf(*args))
    assert not Path("/tmp/torchfit-d27-never").exists()


def test_d27_endless_driver_version_from_facts(tmp_path: Path) -> None:
    bad_input(tf("resolve", "--facts", _facts(tmp_path, {"driver_version": ".".join(["1"] * 2001)})))


# --- #30: control sequences never reach the terminal --------------------------------------


def test_d30_ansi_in_facts_does_not_reach_the_terminal(tmp_path: Path) -> None:
    path = _facts(tmp_path, {"driver_version": "418.87.01", "glibc": "2.39", "arch": "x86_64",
                             "pythons": [{"version": "3.12.3"}],
                             "gpus": [{"name": "Evil\x1b[2J\x1b]0;pwned\x07GPU\x9b31m", "compute_capability": "9.0"}]})
    for extra in ([], ["--json"]):
        proc = tf("resolve", "--facts", path, *extra, env=tf_env(COLUMNS="80"))
        assert proc.returncode == 1, proc.stderr
        assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr and "\x9b" not in proc.stderr
        assert "EvilGPU" in proc.stderr or "EvilGPU" in proc.stdout


def test_d30_terminal_text_strips_every_control() -> None:
    from torchfit.inputs import terminal_text

    assert terminal_text("a\x1b[31mb\x1b]8;;http://x\x1b\\c\x07d\re\tf\n") == "abcde\tf\n"


# --- #17: say why an old ROCm build was picked --------------------------------------------


def test_d17_mi300x_plan_says_newer_builds_lack_data() -> None:
    """The matrix of 6e0c2fd: ROCm builds after 2.5 with gfx lists "unknown". The plan
    must say that newer builds were refused for missing data, not for incompatibility
    (the data itself is being filled; the explanation must hold for whatever stays unknown)."""
    from dataclasses import replace

    from tests.conftest import make_facts
    from torchfit.compat.matrix import load_matrix
    from torchfit.compat.request import Request
    from torchfit.compat.resolver import resolve

    matrix = load_matrix()
    old = replace(matrix, builds=tuple(
        replace(b, gfx=None) if b.kind == "rocm" and (b.torch.major, b.torch.minor) > (2, 5) else b
        for b in matrix.builds))
    plan = resolve([make_facts(driver=None, gpus=["gfx942"], glibc="2.35", pythons=["3.10.12"])], Request(), old)
    assert plan.torch.startswith("2.5"), plan.torch
    said = " ".join(plan.warnings)
    assert "unknown in the matrix" in said and "not because they were found incompatible" in said


# --- issue 13 point 7: 80 columns ---------------------------------------------------------


def test_ux_conflict_groups_gpus_and_reads_at_80_columns(tmp_path: Path) -> None:
    env = fake_smi(tmp_path, EIGHT_H100)
    env["COLUMNS"] = "80"
    proc = tf("resolve", env=env)
    assert proc.returncode == 1, proc.stderr
    assert "8\u00d7 NVIDIA H100 80GB HBM3 (sm_90)" in proc.stderr
    assert proc.stderr.count("NVIDIA H100") <= 3  # once per line that names the GPUs, not once per GPU
    assert max(len(line) for line in proc.stderr.splitlines()) <= 80


def test_ux_explain_lists_this_hardware_first_and_counts_the_rest() -> None:
    proc = tf("resolve", "--assume", "gpu=sm_61", "--assume", "driver=470.82.01", "--explain",
              env=tf_env(COLUMNS="80"))
    assert proc.returncode == 0, proc.stderr
    listed = [ln for ln in proc.stdout.splitlines() if ln.lstrip().startswith("\u2717")]
    assert listed and not any(" cpu:" in ln or "rocm" in ln for ln in listed)
    assert "for other hardware" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
