"""`torchfit install` of a whole project (issue 18): the local CPU torch 2.13.0 wheel, a
package whose METADATA pins torch==2.13.0 and a pure-Python one, real uv, a real env."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.installer.conftest import CPU_ARGS, run_tf
from tests.support.wheels import make_wheel
from torchfit._backports import tomllib

pytestmark = pytest.mark.slow


def test_a_project_is_installed_with_the_torch_it_pins_and_locked(
    tmp_path: Path, torch_index: str, state_home: Path
) -> None:
    links = tmp_path / "links"
    make_wheel(links, "pin213", "1.0", ["torch==2.13.0", "purelib"])
    make_wheel(links, "pin213", "2.0", ["torch==2.99.0"])  # no such torch: the resolver must skip it
    make_wheel(links, "purelib", "1.0")
    (tmp_path / "requirements.txt").write_text(f"-f {links}\npin213\npurelib>=1\n")
    prefix = tmp_path / "env"
    proc = run_tf("install", *CPU_ARGS, "-r", str(tmp_path / "requirements.txt"), "--torch-index-url",
                  torch_index, "--prefix", str(prefix), "--json", state=state_home)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["plan"]["project"] == ["pin213", "purelib>=1"], out["plan"]
    assert out["plan"]["resolved"]["pin213"] == "1.0", out["plan"]  # the plan is uv's whole set
    names = {p["name"]: p["version"] for p in out["packages"]}
    assert names["pin213"] == "1.0" and names["purelib"] == "1.0" and names["torch"].startswith("2.13.0")
    ran = subprocess.run([str(prefix / "bin" / "python"), "-c",
                          "import torch, pin213_mod, purelib_mod; print(torch.__version__, pin213_mod.VERSION)"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and ran.stdout.split() == ["2.13.0+cpu", "1.0"], ran.stderr
    with open(prefix / "pylock.toml", "rb") as fh:
        lock = tomllib.load(fh)
    locked = {p["name"]: p for p in lock["packages"]}
    assert locked["pin213"]["wheels"][0]["hashes"]["sha256"]
    assert lock["tool"]["torchfit"]["plan"]["project"] == ["pin213", "purelib>=1"]


def test_a_pin_two_levels_down_offline_the_plan_is_what_is_installed_and_locked(
    tmp_path: Path, torch_index: str, state_home: Path
) -> None:
    """Issue 24, classes 1, 2 and 6: `trainer` pins nothing, its `engine` pins torch==2.13.0; the
    mirror (a file:// tree holding the real CPU wheel) is all there is (--offline). resolve's
    `resolved` is exactly what install puts in the env and in pylock.toml."""
    links = tmp_path / "links"
    make_wheel(links, "trainer", "1.0", ["engine"])
    make_wheel(links, "engine", "1.0", ["torch==2.13.0", "purelib"])
    make_wheel(links, "engine", "2.0", ["torch==2.15.0"])  # newer, for a torch the mirror lacks
    make_wheel(links, "purelib", "1.0")
    (tmp_path / "requirements.txt").write_text(f"--find-links {links}\ntrainer\n")
    args = ("--variant", "cpu", "--python", "3.11", "-r", str(tmp_path / "requirements.txt"),
            "--torch-index-url", torch_index, "--offline", "--json")
    planned = run_tf("resolve", *args, state=state_home)
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["torch"] == "2.13.0" and plan["resolved"]["engine"] == "1.0", plan
    prefix = tmp_path / "env"
    proc = run_tf("install", *args, "--prefix", str(prefix), state=state_home)
    assert proc.returncode == 0, proc.stderr
    with open(prefix / "pylock.toml", "rb") as fh:
        lock = tomllib.load(fh)
    locked = {p["name"]: p["version"] for p in lock["packages"]}
    assert locked == plan["resolved"], (locked, plan["resolved"])
    assert lock["tool"]["torchfit"]["plan"]["resolved"] == plan["resolved"]
    code = "from importlib import metadata; print(metadata.version('engine'), metadata.version('torch'))"
    ran = subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120)
    assert ran.stdout.split() == ["1.0", "2.13.0+cpu"], ran.stderr


def test_a_pep658_metadata_that_disagrees_with_its_wheel_is_refused_naming_the_file(
    tmp_path: Path, torch_index: str, state_home: Path
) -> None:
    """Issue 25: the index's `.metadata` for liar 1.0 says torch==2.13.0, the wheel's own METADATA
    says torch==2.12.0. The plan believed the index; the wheel is what is installed and hashed
    into the lock, so the wheel is the truth: the install is refused, naming the wheel, and PREFIX
    is not created."""
    from tests.support.wheels import serve_dir, write_index_with_metadata

    wheel = make_wheel(tmp_path / "w", "liar", "1.0", ["torch==2.12.0"])
    write_index_with_metadata(tmp_path / "idx", wheel,
                              b"Metadata-Version: 2.1\nName: liar\nVersion: 1.0\nRequires-Dist: torch==2.13.0\n\n")
    prefix = tmp_path / "env"
    with serve_dir(tmp_path / "idx") as url:
        proc = run_tf("install", "liar", *CPU_ARGS, "--extra-index-url", f"{url}/simple", "--allow-insecure-index",
                      "--torch-index-url", torch_index, "--prefix", str(prefix), "--json", state=state_home)
    assert proc.returncode == 1, proc.stderr
    err = json.loads(proc.stdout)
    assert err["error"].startswith(f"{wheel.name}: its own METADATA disagrees with the metadata the index"), err
    assert "liar 1.0 requires torch==2.12.0, but torch 2.13.0+cpu is installed" in err["error"], err
    assert not prefix.exists()
