"""The nightly recipe of docs/nightly.md, run as a user runs it (issue 35): the script taken from
the page, real torchfit commands on PATH, a real `file://` mirror named by the site configuration
(a PEP 503 tree whose torch wheel is a link to the local CPU wheel), a lock made by a real
`torchfit install`, the env installed from it and verified (gloo). Green on the unchanged mirror;
red, naming torch, once its wheel is gone from the mirror (uv's cache still holds it, so only
`pack --check` can see it). And `pack --check` alone against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.ui.test_jsonout import validate
from tests.installer.conftest import (
    cpu_wheel,
    make_simple_index,
    needs_uv,
    run_tf,
    state_home,
    tf_env,
)
from tests.support.servers import RangeFiles, http_server

__all__ = ["cpu_wheel", "state_home"]  # the installer's fixtures, used here
ROOT = Path(__file__).resolve().parents[2]


def recipe() -> str:
    """The script of docs/nightly.md: its one ```bash block."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "nightly.md").read_text(), re.S)
    assert len(blocks) == 1 and blocks[0].startswith("#!/bin/bash\n"), blocks
    return blocks[0]


def run_recipe(script: Path, hosts: Path, out: Path, env: dict[str, str]) -> tuple[int, dict, str]:
    proc = subprocess.run(["bash", str(script), str(hosts), str(out)], env=env, capture_output=True, text=True,
                          timeout=1200, cwd=str(hosts.parent))
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"not one JSON object (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.returncode, data, proc.stderr


@pytest.mark.slow
@needs_uv
def test_the_recipe_is_green_on_an_unchanged_mirror_and_red_naming_the_package(tmp_path: Path, cpu_wheel: Path,
                                                                            state_home: Path) -> None:
    simple = make_simple_index(tmp_path / "mirror" / "cpu", [cpu_wheel], relative=True)
    served_wheel = tmp_path / "mirror" / "cpu" / "files" / cpu_wheel.name
    config = tmp_path / "site.toml"  # the site's mirror, named once: the script names none
    config.write_text(f'torch-index-url = "{simple.as_uri().replace("/cpu/", "/{variant}/")}"\n')
    env = tf_env(state_home, TORCHFIT_CONFIG=str(config), TORCHFIT_NIGHTLY_REQUEST="torch==2.13.0 --python 3.11",
                 PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert shutil.which("torchfit", path=env["PATH"]), "torchfit is not on the venv's PATH"
    hosts = tmp_path / "stacks" / "nightly"
    hosts.mkdir(parents=True)
    detect = run_tf("detect", "--json", state=state_home)
    assert detect.returncode == 0, detect.stderr
    (hosts / "cpu-node.json").write_text(detect.stdout)
    built = run_tf("install", "torch==2.13.0", "--python", "3.11", "--facts", str(hosts / "cpu-node.json"),
                   "--prefix", str(tmp_path / "built"), "--json", state=state_home, TORCHFIT_CONFIG=str(config))
    assert built.returncode == 0, built.stderr[-3000:]
    shutil.copy(tmp_path / "built" / "pylock.toml", hosts / "cpu-node.pylock.toml")
    assert simple.as_uri() in (hosts / "cpu-node.pylock.toml").read_text()  # torch came from the site's mirror
    script = tmp_path / "stacks" / "torchfit-nightly.sh"
    script.write_text(recipe())

    code, night, err = run_recipe(script, hosts, tmp_path / "night-1", env)
    assert code == 0, json.dumps(night, indent=2) + err[-3000:]
    host = night["hosts"]["cpu-node"]
    assert night["ok"] is True and night["failed"] == [] and host["ok"] is True
    assert host["resolve"] == {"ok": True, "torch": "2.13.0", "variant": "cpu", "error": None}
    assert host["drift"] == [] and host["served"]["ok"] is True and host["served"]["files"] >= 2
    assert host["install"]["ok"] is True and host["verify"] == {"ok": True, "verdict": "PASS", "failed": []}
    validate(json.loads((tmp_path / "night-1" / "cpu-node.served.json").read_text()))

    served_wheel.unlink()  # someone cleans the mirror; uv's cache still holds the wheel
    code, night, err = run_recipe(script, hosts, tmp_path / "night-2", env)
    assert code == 1, json.dumps(night, indent=2) + err[-3000:]
    assert night["ok"] is False and night["hosts"]["cpu-node"]["ok"] is False
    assert [p["package"] for p in night["hosts"]["cpu-node"]["served"]["problems"]] == ["torch"]
    assert night["failed"][0].startswith(f"cpu-node: the mirror no longer serves torch 2.13.0+cpu as locked "
                                         f"({cpu_wheel.name}: "), night["failed"]
    assert "no such file" in night["failed"][0]
    assert night["hosts"]["cpu-node"]["install"]["ok"] is True  # what the install alone would not have said

    # an OUT_DIR that is not empty: usage, exit 2, nothing of it touched
    proc = subprocess.run(["bash", str(script), str(hosts), str(tmp_path / "night-2")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "is not empty" in proc.stderr and proc.stdout == ""


HEAD = """lock-version = "1.0"
created-by = "torchfit"
requires-python = "==3.11.*"
"""
PACKAGE = """
[[packages]]
name = "{name}"
version = "1.0"

[[packages.wheels]]
name = "{name}-1.0-py3-none-any.whl"
url = "{url}/{name}-1.0-py3-none-any.whl"
hashes = {{ sha256 = "{sha256}" }}
"""
TOOL = """
[tool.torchfit]
schema = 1
torch-index-url = "https://download.pytorch.org/whl/cpu"

[tool.torchfit.nccl]
mechanism = "none"

[tool.torchfit.plan]
ok = true
python = "3.11"
torch = "2.13.0"
variant = "cpu"
"""


def test_pack_check_reads_an_http_mirror_and_names_a_changed_or_missing_file(tmp_path: Path) -> None:
    import hashlib

    body = b"PK\x05\x06" + b"\0" * 18  # the bytes do not matter: only their sha256
    digest = hashlib.sha256(body).hexdigest()
    # alpha as locked, beta's bytes changed on the mirror, gamma gone from it
    files = {"alpha-1.0-py3-none-any.whl": body, "beta-1.0-py3-none-any.whl": body + b"!"}
    lock = tmp_path / "pylock.toml"
    with http_server(RangeFiles(files)) as server:
        lock.write_text(HEAD + "".join(PACKAGE.format(name=n, url=server.url, sha256=digest)
                                       for n in ("alpha", "beta", "gamma")) + TOOL)
        proc = run_tf("pack", "--lock", str(lock), "--check", "--allow-insecure-index", "--json",
                      state=tmp_path, timeout=120)
        text = run_tf("pack", "--lock", str(lock), "--check", "--allow-insecure-index", state=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    validate(data)
    assert data["ok"] is False and data["files"] == 3 and data["locked"]["packages"] == {
        "alpha": "1.0", "beta": "1.0", "gamma": "1.0"}
    why = {p["package"]: p["why"] for p in data["problems"]}
    assert set(why) == {"beta", "gamma"}, why
    assert why["beta"].startswith("sha256 ") and "is not the lock's" in why["beta"]
    assert "404" in why["gamma"]
    # the text: a line per file, the packages named
    assert text.returncode == 1 and "2 of the 3 files of" in text.stdout and text.stdout.rstrip().endswith(
        "not served as locked: beta, gamma"), text.stdout
    # plain http without --allow-insecure-index: refused before any request, one line
    proc = run_tf("pack", "--lock", str(lock), "--check", state=tmp_path, timeout=60)
    assert proc.returncode == 2 and "plain http://" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    # --check writes nothing: -o beside it is refused
    proc = run_tf("pack", "--lock", str(lock), "--check", "-o", str(tmp_path / "p"), state=tmp_path, timeout=60)
    assert proc.returncode == 2 and "not -o" in proc.stderr and not (tmp_path / "p").exists()
    proc = run_tf("pack", "--lock", str(lock), state=tmp_path, timeout=60)  # neither: a pack needs its directory
    assert proc.returncode == 2 and "give -o DIR" in proc.stderr and "Traceback" not in proc.stderr
