"""workers/torchfit_runtime.py: the one record protocol, /proc/self/maps, lib_kind; and the
workers' own imports (stdlib, torch and each other only)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import torchfit.verify.watch as vwatch
from tests.verify.conftest import DATA
from torchfit.workers import MARKER, WORKERS_DIR, read_records
from torchfit.workers import torchfit_runtime as rt


def test_mapped_libnccl_from_real_maps() -> None:
    regions = rt.parse_maps((DATA / "proc-maps-nccl-preload.txt").read_text())
    assert rt.mapped("nccl", regions) == ["/tmp/tfx/nccl/nvidia/nccl/lib/libnccl.so.2"]
    assert rt.mapped("cudnn", regions) == []
    assert rt.owner_of(0x7F2AF8400010, regions) == "/tmp/tfx/nccl/nvidia/nccl/lib/libnccl.so.2"


def test_workers_import_nothing_but_stdlib_torch_and_each_other() -> None:
    """They run in the TARGET env, which need not have torchfit (or anything else)."""
    import ast
    import sys as _sys

    if not hasattr(_sys, "stdlib_module_names"):  # Python < 3.10
        pytest.skip("needs sys.stdlib_module_names")
    workers = Path(WORKERS_DIR)
    # importlib_metadata: doctor_worker's guarded fallback for Pythons older than 3.8.
    targets = [*sorted(workers.glob("*_worker.py")), workers / "torchfit_runtime.py"]
    # each other: torchfit_runtime, and a worker another one starts (launch_worker hands torchrun
    # ddp_worker's entry), by their bare names beside them
    allowed = {"torch", "importlib_metadata", *(p.stem for p in targets)} | set(_sys.stdlib_module_names)
    # Everything but __init__.py and records.py (host side) runs in the target interpreter;
    # records.py (the records' shapes) imports nothing of torchfit either (it is checked with them).
    assert sorted(workers.glob("*.py")) == sorted([*targets, workers / "__init__.py", workers / "records.py"])
    for path in [*targets, workers / "records.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_one_record_protocol_on_stdout_and_in_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every worker writes torchfit_runtime records; the host reads them back the same way."""
    assert rt.MARKER == MARKER
    rep = rt.Reporter(None, who="x")
    print("noise from a library")
    rep.stage("import-torch")
    rep.line("fact", key="k", value=[1, 2])
    rep.error(RuntimeError("boom"))
    records = read_records(capsys.readouterr().out)
    assert [r["kind"] for r in records] == ["stage", "fact", "error"]
    assert all(r["who"] == "x" and isinstance(r["t"], float) for r in records)
    assert records[2]["stage"] == "import-torch" and records[2]["message"] == "boom"
    out = tmp_path / "w.jsonl"
    rep = rt.Reporter(str(out), rank=3)
    rep.line("done")
    tail = vwatch.JsonlTail(str(out))
    assert [(r["kind"], r["rank"]) for r in tail.poll()] == [("done", 3)]


def test_lib_kind_is_written_once() -> None:
    from torchfit.doctor import context, shadowing

    # doctor's readers use the worker's function itself, not a copy.
    assert shadowing.lib_kind is rt.lib_kind and context.lib_kind is rt.lib_kind
    assert [
        rt.lib_kind(p)
        for p in (
            "/a/libnccl.so.2",
            "libcudnn.so.9",
            "libcudart.so.13",
            "libcuda.so.1",
            "libc.so.6",
        )
    ] == ["nccl", "cudnn", "cudart", "cuda", None]



@given(st.text(max_size=400))
def test_maps_parser_never_raises(text: str) -> None:
    rt.parse_maps(text)
