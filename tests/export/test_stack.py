"""export/stack.py, what every format renders: a lock written by `torchfit install` names its variant and
index in [tool.torchfit], an index URL's credentials never reach a file, the install mirror
variable sets the torch index."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_main
from torchfit._backports import tomllib


def test_credentials_never_reach_an_exported_file(capsys, tmp_path: Path, facts_file: Path) -> None:
    out = tmp_path / "r.txt"
    code, _, err = run_main(capsys, "export", "--format", "requirements", "--facts", str(facts_file),
                            "--variant", "cpu", "--torch-index-url", "https://bob:hunter2@mirror.example.com/whl/{variant}",
                            "-o", str(out))
    assert code == 0, err
    text = out.read_text()
    assert "hunter2" not in text and "bob" not in text
    assert "--index-url https://mirror.example.com/whl/cpu" in text and "Credentials were removed" in text
    code, uvtext, _ = run_main(capsys, "export", "--format", "uv", "--facts", str(facts_file), "--variant", "cpu",
                               "--torch-index-url", "https://bob:hunter2@mirror.example.com/whl/{variant}")
    assert "hunter2" not in uvtext


INSTALL_LOCK = """\
# PEP 751 lock written by `torchfit install`.
lock-version = "1.0"
created-by = "torchfit"
requires-python = "==3.12.*"

[[packages]]
name = "filelock"
version = "3.16.1"
wheels = [{{ name = "filelock-3.16.1-py3-none-any.whl", url = "https://files.pythonhosted.org/f/filelock-3.16.1-py3-none-any.whl", hashes = {{ sha256 = "{a}" }} }}]

[[packages]]
name = "torch"
version = "2.8.0+cu128"
wheels = [{{ name = "torch-2.8.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl", url = "https://download.pytorch.org/whl/cu128/torch-2.8.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{b}" }} }}]

[tool.torchfit]
schema = 1
torch-index-url = "https://user:***@mirror.example.com/whl/cu128"

[tool.torchfit.plan]
ok = true
python = "3.12"
torch = "2.8.0"
variant = "cu128"
index_url = "https://download.pytorch.org/whl/cu128"
""".format(a="a" * 64, b="b" * 64)


@pytest.mark.parametrize("fmt", ["requirements", "uv", "pylock"])
def test_a_lock_written_by_torchfit_install(capsys, tmp_path: Path, fmt: str) -> None:
    """The install lock has no packages.index: the variant and index come from [tool.torchfit]."""
    lock = tmp_path / "pylock.toml"
    lock.write_text(INSTALL_LOCK)
    code, out, err = run_main(capsys, "export", "--format", fmt, "--lock", str(lock))
    assert code == 0, err
    assert "***" not in out and "user" not in out
    if fmt == "requirements":
        lines = [line for line in out.splitlines() if not line.startswith("#")]
        assert lines[:2] == ["--index-url https://mirror.example.com/whl/cu128",
                             "--extra-index-url https://pypi.org/simple"]
        assert f"torch==2.8.0+cu128 \\\n    --hash=sha256:{'b' * 64}" in out
    elif fmt == "uv":
        doc = tomllib.loads(out)
        assert doc["project"]["dependencies"] == ["torch==2.8.0+cu128"]
        assert doc["tool"]["uv"]["constraint-dependencies"] == ["filelock==3.16.1"]
    else:
        doc = tomllib.loads(out)
        torch = next(p for p in doc["packages"] if p["name"] == "torch")
        assert doc["tool"]["torchfit"]["plan"]["variant"] == "cu128" and torch["wheels"][0]["hashes"]["sha256"] == "b" * 64


def test_the_install_mirror_variable_is_honoured(capsys, monkeypatch: pytest.MonkeyPatch, facts_file: Path) -> None:
    monkeypatch.setenv("TORCHFIT_TORCH_INDEX_URL", "https://mirror.corp/pytorch/whl/{variant}")
    code, out, err = run_main(capsys, "export", "--format", "requirements", "--facts", str(facts_file),
                              "--variant", "cpu")
    assert code == 0, err
    assert "--index-url https://mirror.corp/pytorch/whl/cpu" in out
