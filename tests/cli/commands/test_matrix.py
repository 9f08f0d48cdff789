"""`torchfit matrix show`: the matrix as a table (and as JSON), filtered."""

from __future__ import annotations

import json

from tests.support.cli import run_cli, run_main
from tests.support.indexes import SMALL_MATRIX


def test_show_table_has_every_column(capsys) -> None:
    code, out, _ = run_main(capsys, "matrix", "show", "--matrix", str(SMALL_MATRIX))
    assert code == 0
    for col in ("torch", "variant", "CUDA/ROCm", "cuDNN", "NCCL", "Python", "glibc", "platforms"):
        assert col in out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "cu128*" in line)  # * = the PyPI default
    row, details = lines[at], " ".join(lines[at + 1:at + 3])
    for cell in ("2.8.0", "12.8", "9.10.2.21", "2.27.3", "3.9-3.13", "2.28"):
        assert cell in row, row
    for cell in ("arch 7.0 7.5 8.0 8.6 9.0 10.0 12.0", "torchvision 0.23.0", "torchaudio 2.8.0"):
        assert cell in details, details


def test_show_filters_the_real_matrix() -> None:
    out = run_cli("matrix", "show", "--torch", "2.1", "--variant", "cu121")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if "cu121" in line]
    assert [r.split()[0] for r in rows] == ["2.1.2", "2.1.1", "2.1.0"]
    assert all("2.17" in r for r in rows)  # the real floor of 2.1 (built on CentOS 7)


def test_show_fits_80_columns() -> None:
    """Issue 13 point 7: every line of the whole matrix fits an 80-column terminal."""
    out = run_cli("matrix", "show", env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    long = [line for line in out.stdout.splitlines() if len(line) > 80]
    assert long == [], long[:3]
    assert "…" not in out.stdout  # nothing truncated


def test_show_json(capsys) -> None:
    code, out, _ = run_main(capsys, "matrix", "show", "--json", "--torch", "2.13.0", "--variant", "cu130")
    data = json.loads(out)
    assert code == 0 and len(data) == 1
    row = data[0]
    assert row["cudnn"] == "9.20.0.48" and row["nccl"] == "2.29.7" and row["pypi_default"] is True
    assert row["platforms"] == ["x86_64", "aarch64"] and row["index_url"].endswith("/whl/cu130")


def test_show_bad_filter(capsys) -> None:
    code, _, err = run_main(capsys, "matrix", "show", "--variant", "cu999")
    assert code == 2 and "no such variant" in err


def test_show_unknown_lists_each_unknown_fact_with_what_it_blocks(capsys) -> None:
    code, out, _ = run_main(capsys, "matrix", "show", "--unknown", "--json", "--torch", ">=2.6")
    rows = json.loads(out)
    assert code == 0 and rows
    facts = {(r["fact"], r["variant"], tuple(r["torch"])) for r in rows}
    # The glibc floor of 2.6 rocm6.1 is still unknown, with its reason written in the matrix.
    glibc = next(r for r in rows if r["fact"] == "glibc" and r["variant"] == "rocm6.1")
    assert "BLOG-2.6" in glibc["reason"] and "2.28" in glibc["blocks"]
    # Every ROCm gfx list from 2.6 on is sourced now (issue 11), except 2.15's rocm10.0,
    # added from the build matrix at the cut with its list not yet read (issue 20): it is
    # listed, with its reason.
    rocm = [f for f in facts if f[0] == "arch" and f[1].startswith("rocm")]
    assert rocm == [("arch", "rocm10.0", ("2.15.0",))]
    assert "PR #194919" in next(r for r in rows if r["variant"] == "rocm10.0")["reason"]
    for r in rows:
        assert r["blocks"] and r["reason"] and r["line"] > 0
        if r["fact"] in ("arch", "arch_aarch64"):
            vendor = "AMD" if r["variant"].startswith("rocm") else "NVIDIA"
            assert f"refused for every {vendor} GPU" in r["blocks"]


def test_show_unknown_table_on_a_small_matrix(capsys, tmp_path) -> None:
    text = SMALL_MATRIX.read_text().replace('nccl = "2.27.3"', 'nccl = "unknown"\nunknown = { nccl = "not read yet" }', 1)
    path = tmp_path / "m.toml"
    path.write_text(text)
    code, out, _ = run_main(capsys, "matrix", "show", "--unknown", "--matrix", str(path))
    assert code == 0
    row = next(line for line in out.splitlines() if "nccl" in line and "torch" in line)
    assert "not read yet" in row and "blocks nothing" in row
