"""export/uv.py, `--format uv`: a pyproject.toml whose explicit index serves the torch family; real uv
resolves it (`uv pip install --dry-run`) and locks it (`uv lock`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.export.conftest import LocalIndex, export, need_uv, uv_env
from torchfit._backports import tomllib


def test_uv_config_is_accepted_by_uv(capsys, tmp_path: Path, facts_file: Path, local_index: LocalIndex,
                                     uv_venv: Path) -> None:
    uv = need_uv()
    project = tmp_path / "proj"
    project.mkdir()
    text = export(capsys, facts_file, local_index, "uv", project / "pyproject.toml")
    doc = tomllib.loads(text)
    (index,) = [i for i in doc["tool"]["uv"]["index"] if i.get("explicit")]
    assert index == {"name": "pytorch-cpu", "url": local_index.variant, "explicit": True}
    assert doc["tool"]["uv"]["sources"] == {"torch": {"index": "pytorch-cpu"}}
    assert doc["project"]["dependencies"] == ["torch==2.13.0+cpu"]
    assert doc["project"]["requires-python"] == "==3.11.*"
    env = uv_env(uv_venv)
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
