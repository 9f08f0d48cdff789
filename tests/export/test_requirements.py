"""export/requirements.py, `--format requirements`: from a plan the variant index alone with torch's
local-label pin, from a lock every file hash-pinned; real pip (--dry-run) accepts the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import make_facts
from tests.export.conftest import LocalIndex, export, need_uv, pip_dry_run
from tests.support.cli import run_main
from torchfit._backports import tomllib
from torchfit.compat.facts import facts_to_json


def test_requirements_is_accepted_by_pip(capsys, tmp_path: Path, facts_file: Path, local_index: LocalIndex) -> None:
    req = tmp_path / "requirements.txt"
    text = export(capsys, facts_file, local_index, "requirements", req)
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    # the variant index alone, torch pinned to its local label
    assert body == [f"--index-url {local_index.variant}", "torch==2.13.0+cpu"]
    assert "pip install -c torch-constraints.txt" in text
    run = pip_dry_run(req)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Would install" in run.stdout and "torch-2.13.0+cpu" in run.stdout
    if local_index.real:
        assert "sympy-" in run.stdout  # torch's dependencies came from the same (sole) index


def test_from_a_lock_every_file_is_hash_pinned(capsys, tmp_path: Path, facts_file: Path,
                                               local_index: LocalIndex) -> None:
    need_uv()
    lock_path = tmp_path / "pylock.toml"
    export(capsys, facts_file, local_index, "pylock", lock_path)
    req = tmp_path / "requirements.txt"
    code, _, err = run_main(capsys, "export", "--format", "requirements", "--lock", str(lock_path),
                             "--allow-insecure-index", "-o", str(req))
    assert code == 0, err
    text = req.read_text()
    assert text.count("--hash=sha256:") == len(tomllib.loads(lock_path.read_text())["packages"])
    assert "torch==2.13.0+cpu \\\n    --hash=sha256:" in text
    run = pip_dry_run(req, "--require-hashes")
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
