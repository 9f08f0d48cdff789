"""The fault injector is a test hook in tests/support/faults, not in the product."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.faults import torchfit_faults as tf
from tests.verify.conftest import FAULTS, ROOT
from torchfit.workers import WORKERS_DIR


def fresh_runtime() -> ModuleType:
    """A private copy of torchfit_runtime, so wrapping it touches nothing else."""
    spec = importlib.util.spec_from_file_location("rt_copy", os.path.join(WORKERS_DIR, "torchfit_runtime.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fault_spec() -> None:
    assert tf.parse_faults("crash:1, hang:inspect:kernels,bogus:2,teardown:0") == [
        ("crash", "1", None),
        ("hang", "inspect", "kernels"),
        ("teardown", "0", None),
    ]


@given(st.text(max_size=200))
def test_fault_spec_never_raises(text: str) -> None:
    tf.parse_faults(text)


def test_crash_fires_at_its_stage_only(tmp_path: Path) -> None:
    rt = fresh_runtime()
    tf.wrap(rt, "crash:1,crash:inspect:import-torch")
    rank0 = rt.Reporter(str(tmp_path / "r0.jsonl"), rank=0)
    rank1 = rt.Reporter(str(tmp_path / "r1.jsonl"), rank=1)
    insp = rt.Reporter(str(tmp_path / "i.jsonl"), who="inspect")
    rank0.stage("allreduce")  # another rank: nothing
    rank1.stage("import")  # another stage: nothing
    rank1.stage("allreduce", step="collective")  # a step inside: the stage already fired
    with pytest.raises(RuntimeError, match=r"injected fault TORCHFIT_VERIFY_FAULT=.* \(crash at allreduce\)"):
        rank1.stage("allreduce")  # a rank's default stage
    with pytest.raises(RuntimeError, match=r"\(crash at import-torch\)"):
        insp.stage("import-torch")
    # The heartbeat was written before the fault: a stall or crash names the stage.
    assert '"stage": "allreduce"' in (tmp_path / "r1.jsonl").read_text().splitlines()[-1]


def _run_with_runtime(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = f"import sys; sys.path.insert(0, {WORKERS_DIR!r}); import torchfit_runtime as rt\n{code}"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


@pytest.mark.parametrize("on_path", [True, False])
def test_sitecustomize_reaches_a_worker_only_when_on_pythonpath(tmp_path: Path, on_path: bool) -> None:
    env = {"TORCHFIT_VERIFY_FAULT": "exit:inspect:cuda-init", "PYTHONPATH": str(FAULTS) if on_path else ""}
    out = tmp_path / "i.jsonl"
    res = _run_with_runtime(f"r = rt.Reporter({str(out)!r}, who='inspect'); r.stage('cuda-init'); print('survived')", env)
    assert (res.returncode, "survived" in res.stdout) == ((3, False) if on_path else (0, True)), res.stderr


def test_teardown_aborts_a_clean_exit_only(tmp_path: Path) -> None:
    env = {"TORCHFIT_VERIFY_FAULT": "teardown:0", "PYTHONPATH": str(FAULTS)}
    out = tmp_path / "r.jsonl"
    clean = _run_with_runtime(f"import os; rt.Reporter({str(out)!r}, rank=0).line('done'); os._exit(0)", env)
    failed = _run_with_runtime(f"import os; rt.Reporter({str(out)!r}, rank=0); os._exit(1)", env)
    assert clean.returncode == -6 and failed.returncode == 1


def test_the_product_never_reads_the_hook() -> None:
    hits = [str(p) for p in (ROOT / "src").rglob("*.py") if "TORCHFIT_VERIFY_FAULT" in p.read_text()]
    assert hits == []
