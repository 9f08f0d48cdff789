"""`torchfit resolve` end to end, as a real subprocess: JSON contract, exit codes, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_facts
from tests.support.cli import run_cli
from torchfit.compat.facts import facts_to_json

pytestmark = pytest.mark.filterwarnings("ignore")


def _facts_file(tmp_path: Path, fname: str = "node.json", **kw: object) -> Path:
    path = tmp_path / fname
    path.write_text(json.dumps(facts_to_json(make_facts(**kw))))  # type: ignore[arg-type]
    return path


def test_resolve_json_from_facts_file(tmp_path: Path) -> None:
    node = _facts_file(tmp_path, driver="580.159.04", gpus=["NVIDIA H200=sm_90"] * 2, glibc="2.39")
    out = run_cli("resolve", "--facts", str(node), "--json", "torchvision")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    for key in ("ok", "python", "torch", "variant", "cuda", "cudnn", "nccl", "torchvision",
                "torchaudio", "index_url", "python_source", "reasons", "warnings"):
        assert key in plan
    assert plan["ok"] is True and plan["cuda"].startswith("13.")
    assert plan["index_url"] == f"https://download.pytorch.org/whl/{plan['variant']}"
    assert out.stderr == ""


def test_two_facts_files_one_stack(tmp_path: Path) -> None:
    a = _facts_file(tmp_path, "v100.json", gpus=["Tesla V100=sm_70"], name="v100")
    b = _facts_file(tmp_path, "h100.json", gpus=["H100=sm_90"], name="h100")
    out = run_cli("resolve", "--facts", str(a), "--facts", str(b), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["variant"] not in ("cu128", "cu130", "cu132")


def test_no_compatible_set_is_exit_1_with_conflicts(tmp_path: Path) -> None:
    node = _facts_file(tmp_path, driver="470.82.01", gpus=["sm_90"], glibc="2.17")
    out = run_cli("resolve", "--facts", str(node), "--json", "torch>=2.7")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert data["ok"] is False and data["conflicts"] and data["hints"]
    assert data["conflicts"][0].startswith("node.json: driver 470.82.01")  # host facts first
    human = run_cli("resolve", "--facts", str(node), "torch>=2.7")
    assert human.returncode == 1 and "no compatible set" in human.stderr
    assert "Traceback" not in human.stderr


def test_explain_lists_refusals_by_fact(tmp_path: Path) -> None:
    node = _facts_file(tmp_path, driver="570.124.06", gpus=["sm_90"], glibc="2.39")
    out = run_cli("resolve", "--facts", str(node), "--explain")
    assert out.returncode == 0, out.stderr
    assert "needs driver >= 580" in out.stdout
    assert "has 570.124.06" in out.stdout


def test_assume_on_a_gpu_less_host() -> None:
    out = run_cli("resolve", "--json", "--assume", "gpu=sm_120", "--assume", "driver=570.124.06",
                  "--assume", "glibc=2.35", "--assume", "python=3.12")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["variant"] in ("cu128", "cu129") and plan["python"] == "3.12"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--assume", "driver=banana"], "driver version 'banana'"),
        (["--assume", "colour=red"], "unknown key"),
        (["--facts", "/nonexistent/node.json"], "cannot read"),
        (["--python", "three"], "--python"),
        (["--variant", "cu999"], "no such variant"),
        (["numpy>>1"], "is not a PEP 508 requirement"),
        (["--bogus-flag"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str) -> None:
    out = run_cli("resolve", *args)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_malformed_facts_file_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpus": [{"name": "x", "compute_capability": "nine"}]')
    out = run_cli("resolve", "--facts", str(bad))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    verbose = run_cli("resolve", "--facts", str(bad), "-v")
    assert verbose.returncode == 2 and "Traceback" in verbose.stderr


def test_corrupt_matrix_exit_2_names_line(tmp_path: Path) -> None:
    bad = tmp_path / "matrix.toml"
    bad.write_text('schema = 1\n[sources]\nX = "x"\n[[series]]\ntorch = "2.0.0"\n')
    out = run_cli("resolve", "--matrix", str(bad), "--assume", "gpu=none")
    assert out.returncode == 2
    assert f"{bad}:4:" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_detect_json_round_trips_into_resolve(tmp_path: Path) -> None:
    det = run_cli("detect", "--json")
    assert det.returncode == 0, det.stderr
    node = tmp_path / "here.json"
    node.write_text(det.stdout)
    data = json.loads(det.stdout)
    for key in ("driver_version", "gpus", "topology", "glibc", "os", "wsl", "arch", "pythons", "pyenv", "reasons"):
        assert key in data
    res = run_cli("resolve", "--facts", str(node), "--json")
    assert res.returncode in (0, 1), res.stderr
    assert json.loads(res.stdout)["ok"] in (True, False)


def test_python_dash_m_and_help_agree() -> None:
    out = run_cli("resolve", "--help")
    assert out.returncode == 0
    for flag in ("--python", "--cuda", "--variant", "--strict-driver", "--facts", "--assume", "--explain", "--json"):
        assert flag in out.stdout


def _python_mismatch(tmp_path: Path, pythons: list[str], uv: list[str] | None, pyenv: list[str] | None,
                     python: str) -> list[str]:
    """resolve torch==2.13.0 --python PYTHON on a GPU-less host with `pythons` present: stderr's lines."""
    from dataclasses import replace

    from torchfit.compat.facts import UvPythons

    facts = make_facts(driver=None, gpus=[], pythons=pythons, pyenv=pyenv)
    if uv is not None:
        facts = replace(facts, uv_pythons=UvPythons("/usr/bin/uv", tuple(uv), "python-build-standalone"))
    node = tmp_path / "node.json"
    node.write_text(json.dumps(facts_to_json(facts)))
    out = run_cli("resolve", "--facts", str(node), "torch==2.13.0", "--python", python)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    return out.stderr.splitlines()


def test_a_python_mismatch_is_about_python_and_names_the_present_interpreter(tmp_path: Path) -> None:
    """Issue 35, item 4: 27 lines, 25 about GPUs the host has not, and `pyenv install 3.11` beside a
    present 3.11.7. Now the Python line and a hint naming the interpreter that is there."""
    lines = _python_mismatch(tmp_path, ["3.11.7"], None, ["3.11.9"], "3.9")
    text = "\n".join(lines)
    assert len(lines) <= 5, text
    assert "GPU" not in text.replace("no GPU", ""), text
    assert "torch 2.13.0 cpu: has wheels for Python" in text, text
    hints = [ln for ln in lines if ln.strip().startswith("hint:")]
    assert hints and "--python 3.11.7 (present at /usr/bin/python3.11)" in hints[0], text
    assert "pyenv install" not in text, text


def test_a_python_mismatch_hint_offers_uvs_python_before_pyenv(tmp_path: Path) -> None:
    """Where no fitting Python is present, the hint is uv's prebuilt one (what install will use)."""
    lines = _python_mismatch(tmp_path, ["3.8.10"], ["3.12.8", "3.11.9"], ["3.12.4"], "3.8")
    hints = [ln for ln in lines if ln.strip().startswith("hint:")]
    assert hints and "uv installs a prebuilt Python 3.12.8" in hints[0], "\n".join(lines)
    assert "pyenv install" not in "\n".join(lines)


@pytest.mark.parametrize(("uv", "said"), [(["3.12.8"], "`uv python install 3.12.8` will provide it"),
                                          (None, "`pyenv install 3.12.4` will provide it")])
def test_explain_says_which_tool_provides_a_missing_python(tmp_path: Path, uv: list[str] | None, said: str) -> None:
    """Issue 35: where the plan needs a Python the host lacks, --explain names uv's managed Python
    or pyenv's build, whichever install will use."""
    from dataclasses import replace

    from torchfit.compat.facts import UvPythons

    facts = make_facts(driver=None, gpus=[], pythons=["3.8.10"], pyenv=["3.12.4"])
    if uv is not None:
        facts = replace(facts, uv_pythons=UvPythons("/usr/bin/uv", tuple(uv), "a site mirror"))
    node = tmp_path / "node.json"
    node.write_text(json.dumps(facts_to_json(facts)))
    out = run_cli("resolve", "--facts", str(node), "torch==2.13.0", "--explain")
    assert out.returncode == 0, out.stderr
    assert said in out.stdout + out.stderr, out.stdout


# What a plain resolve (the family alone, this host probed, the start-up cache warm) must not
# load: the uv adapter and the PEP 751 reader/writer (lock.uv: ~20 ms, hashlib's OpenSSL and
# urllib with it), packaging.requirements/markers/tags (logging, platform), the index client,
# tempfile. Each was on its path before issue 37 (lock.uv for find_uv's path alone).
_NOT_ON_A_PLAIN_RESOLVE = ("torchfit.lock.uv", "torchfit.lock.pylock", "torchfit.index", "hashlib", "urllib.parse",
                           "packaging.requirements", "packaging.markers", "packaging.tags", "logging", "platform",
                           "tempfile", "requests")


@pytest.mark.parametrize("where", ["probed", "facts"])
def test_a_plain_resolve_loads_nothing_it_does_not_need(tmp_path: Path, where: str) -> None:
    facts = ["--facts", str(_facts_file(tmp_path, gpus=[])), "--assume", "python=3.11"] if where == "facts" else []
    code = (
        "import contextlib, io, json, sys\n"
        "from torchfit.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        f"    main({['resolve', 'torch==2.13.0', '--variant', 'cpu', '--python', '3.11', '--json', *facts]!r})\n"
        "print(json.dumps([json.loads(out.getvalue())['torch'], sorted(sys.modules)]))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for _ in range(2):  # the first run fills the start-up cache (it may write files); the second is measured
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
    torch, loaded = json.loads(out.stdout)
    assert torch == "2.13.0"
    assert [m for m in loaded if m.partition(".")[0] in _NOT_ON_A_PLAIN_RESOLVE
            or any(m == n or m.startswith(n + ".") for n in _NOT_ON_A_PLAIN_RESOLVE)] == []
