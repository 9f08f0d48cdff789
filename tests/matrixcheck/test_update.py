"""`torchfit matrix update`: the proposal is a reviewable diff that applies and passes the check."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_main
from tests.support.indexes import SMALL_MATRIX, serve_pypi, serve_pytorch

UPDATE = ("matrix", "update", "--backoff", "0")


def _stale_copy(tmp_path: Path) -> Path:
    """The small matrix with a wrong NCCL and an unknown cuDNN for cu128."""
    text = SMALL_MATRIX.read_text().replace('nccl = "2.27.3"', 'nccl = "2.26.2"').replace(
        'cudnn = "9.10.2.21"', 'cudnn = "unknown"')
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


def test_update_proposes_pins_with_a_source_and_never_writes(rsps, capsys, tmp_path: Path) -> None:
    path = _stale_copy(tmp_path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    serve_pytorch(rsps)
    out_file = tmp_path / "proposal.diff"
    code, out, err = run_main(capsys, *UPDATE, "--matrix", str(path), "--output", str(out_file))
    assert code == 1  # drift: the NCCL pin disagrees
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # never a silent rewrite
    diff = out_file.read_text()
    assert "METADATA pins nvidia-nccl==2.27.3; the matrix says 2.26.2" in err
    assert '-nccl = "2.26.2"' in diff and '+nccl = "2.27.3"' in diff
    assert '-cudnn = "unknown"' in diff and '+cudnn = "9.10.2.21"' in diff
    # the new facts cite a source that the diff also defines
    assert 'nccl = "TORCHFIT-CHECK ' in diff and 'cudnn = "TORCHFIT-CHECK ' in diff
    assert '+"TORCHFIT-CHECK ' in diff
    # the diff applies with patch(1), and the patched matrix passes the same check
    if shutil.which("patch") is None:
        pytest.skip("patch(1) not installed")
    subprocess.run(["patch", "-s", str(path), str(out_file)], check=True, cwd=tmp_path)
    code, out, _ = run_main(capsys, "matrix", "check", "--matrix", str(path), "--backoff", "0")
    assert code == 0, out


def test_update_comments_what_needs_a_human(rsps, capsys, tmp_path: Path) -> None:
    def drop_cp313(page: str) -> str:
        return "\n".join(line for line in page.splitlines()
                         if "-cp313-cp313-manylinux_2_28_aarch64" not in line) + "\n"

    def add_release(page: str) -> str:
        line = ('    <a href="/whl/cpu/torch-3.0.0%2Bcpu-cp314-cp314-manylinux_2_28_x86_64.whl">'
                "torch-3.0.0+cpu-cp314-cp314-manylinux_2_28_x86_64.whl</a><br/>\n")
        return page.replace("  </body>", line + "  </body>")

    import json

    def drop_json(page: str) -> str:
        doc = json.loads(page)
        doc["files"] = [f for f in doc["files"] if "cp313-cp313-manylinux_2_28_aarch64" not in f["filename"]]
        return json.dumps(doc)

    serve_pytorch(rsps, edit={"cpu-torchvision": drop_json, "torch": add_release})
    code, diff, _err = run_main(capsys, *UPDATE, "--matrix", str(SMALL_MATRIX))
    assert code == 1
    assert "+# matrix update " in diff
    assert "torch 2.8.0 cpu: torchvision 0.23.0 has no aarch64 wheel for CPython 3.13" in diff
    assert "the index has torch 3.0.0 (cpu) that the matrix lacks" in diff
    assert "add a [[series]] per new release line" in diff
    assert diff.startswith("--- a/")


def test_update_with_nothing_to_change(rsps, capsys) -> None:
    serve_pypi(rsps)
    code, diff, err = run_main(capsys, *UPDATE, "--matrix", str(SMALL_MATRIX), "--pypi")
    assert code == 0 and diff == ""
    assert "ok: the matrix agrees" in err


def test_update_of_the_real_matrix_stays_valid() -> None:
    """A proposal against data/matrix.toml parses (propose_update re-validates it)."""
    from torchfit.cli.commands.matrix import _matrix_text
    from torchfit.compat.matrix import load_matrix
    from torchfit.matrixcheck.report import DRIFT, CheckReport, Finding
    from torchfit.matrixcheck.update import propose_update

    matrix = load_matrix()
    text, path = _matrix_text(None)
    b = next(b for b in matrix.builds if b.variant == "cu128" and str(b.torch) == "2.8.0")
    report = CheckReport(
        "test", 1,
        (Finding(DRIFT, b.label, "python", "x", line=b.line, series_line=b.series_line, torch="2.8.0"),
         Finding(DRIFT, "torch 2.8.1", "release", "new patch", torch="2.8.1")),
        (), {("2.8.0", "cu128"): {"cudnn": "9.10.2.21", "nccl": "2.27.5"}},
    )
    diff = propose_update(text, matrix, report)
    assert path == "src/torchfit/data/matrix.toml" and diff.startswith("--- a/src/torchfit/data/matrix.toml")
    assert '+nccl = "2.27.5"' in diff and "new patch; add it" in diff
