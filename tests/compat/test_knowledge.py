"""Facts written once in compat/: version codes, release comparison, wheel tags, arch
lists, the CUDA driver rule on a CUDA version, the Plan keeping its Build.

The owners are tested here, and so is the absence of copies: `restated_facts` finds the
literals that belong to compat/ (the manylinux names of the glibc table, the `(2, 17)`
floor, torch's manylinux floors, the variant regex) and to pyenv's root rule (`.pyenv`,
host/pythons.py) anywhere else in src/ (code only: docstrings and comments may name
them), and a planted copy shows that it does."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import ROOT, make_facts
from torchfit.compat import tags, versions
from torchfit.compat.plan import plan_from_json, plan_to_json
from torchfit.compat.request import Request
from torchfit.compat.resolver import resolve
from torchfit.compat.rules import cuda_driver_fit, host_checks
from torchfit.compat.versions import Arch, BuildArch, Dotted


def test_version_codes() -> None:
    # nccl.h NCCL_VERSION and cudnn_version.h CUDNN_VERSION: two encodings by era.
    assert versions.decode_nccl_code(22809) == (2, 28, 9)
    assert versions.decode_nccl_code(2708) == (2, 7, 8)
    assert versions.decode_cudnn_code(91900) == (9, 19, 0)
    assert versions.decode_cudnn_code(8902) == (8, 9, 2)
    assert versions.decode_cuda_code(11040) == (11, 4)
    assert versions.decode_cuda_code(13000) == (13, 0)
    assert versions.version_text(versions.decode_nccl_code(23007)) == "2.30.7"
    for bad in (0, -1, None, True, "22809", 1.5):
        assert versions.decode_xyz_code(bad) is None
        assert versions.decode_cuda_code(bad) is None


@given(st.integers(min_value=1, max_value=10**7))
def test_xyz_code_round_trips_from_2_9(code: int) -> None:
    out = versions.decode_xyz_code(code)
    assert out is not None
    x, y, z = out
    assert (x * 10000 + y * 100 + z if code >= 10000 else x * 1000 + y * 100 + z) == code


def test_same_release() -> None:
    assert versions.same_release("9.10.2.21", "9.10.2", 3)
    assert versions.same_release("12.8", "12.8.1", 2)
    assert not versions.same_release("12.8", "12.8.1", 3)
    assert versions.same_release("2.28.9+cuda13.0", (2, 28, 9), 3)
    assert not versions.same_release("", "1", 1)
    assert not versions.same_release(None, "1", 1)


def test_manylinux_floors() -> None:
    assert tags.glibc_of_tag("manylinux_2_28_x86_64") == (2, 28)
    assert tags.glibc_of_tag("manylinux2014_aarch64") == (2, 17)
    assert tags.glibc_of_tag("manylinux1_x86_64") == (2, 5)
    assert tags.glibc_of_tag("manylinux2010_x86_64") == (2, 12)
    assert tags.glibc_of_tag("linux_x86_64") is None
    assert tags.glibc_of_tag("macosx_11_0_arm64") is None
    linux = tags.parse_linux_tag("manylinux_2_17_aarch64")
    assert linux is not None and linux.arch == "aarch64" and linux.glibc == Dotted.parse("2.17")


def test_arch_lists() -> None:
    assert tags.parse_arch_flags("sm_50 sm_90a compute_90 nonsense") == (
        BuildArch(Arch(5, 0), False), BuildArch(Arch(9, 0, "a"), False), BuildArch(Arch(9, 0), True))
    entries, ptx_only = tags.parse_arch_list(["sm_80", "sm_90", "compute_90", "compute_100", "gfx90a"])
    assert entries == (BuildArch(Arch(8, 0), False), BuildArch(Arch(9, 0), True))
    assert ptx_only == (Arch(10, 0),)


def test_cuda_driver_fit_on_a_cuda_version(matrix) -> None:  # type: ignore[no-untyped-def]
    info = matrix.cuda_info("12.8")
    assert info is not None and info.mvc_driver is not None and info.toolkit_driver is not None
    assert cuda_driver_fit(info, info.toolkit_driver) == "full"
    assert cuda_driver_fit(info, info.mvc_driver) == "mvc"
    assert cuda_driver_fit(info, Dotted.parse("400.1")) == "too-old"
    assert cuda_driver_fit(info, None) == "unknown"
    # A minor the matrix lacks falls back to its family's row.
    assert matrix.cuda_info("12.99") is not None and matrix.cuda_info("99.0") is None


def test_the_plan_keeps_its_build_and_json_brings_it_back(matrix) -> None:  # type: ignore[no-untyped-def]
    host = make_facts(driver="580.65.06", gpus=["NVIDIA H200=sm_90"])
    plan = resolve([host], Request(), matrix)
    assert plan.build is not None and str(plan.build.torch) == plan.torch
    data = plan_to_json(plan)
    assert "build" not in data  # not part of the --json contract
    again = plan_from_json(data, matrix)
    assert again.build == plan.build and again == plan
    assert plan_from_json(data).build is None


def test_host_checks_is_the_resolvers_list(matrix) -> None:  # type: ignore[no-untyped-def]
    host = make_facts(driver="450.80.02", gpus=["NVIDIA H200=sm_90"])
    cuda = next(b for b in matrix.builds if b.kind == "cuda" and b.cuda and b.cuda.startswith("13"))
    checks = dict(host_checks(cuda, host, matrix, strict_driver=False, want_cpu=False))
    assert list(checks) == ["platform", "glibc", "driver", "gpu-arch", "cudnn"]
    assert not checks["driver"].ok and "needs driver" in checks["driver"].text



# --- the facts are not restated outside their owners ---------------------------------------

# (what, where it may appear (a path prefix under src/torchfit), the test on a code literal)
_OWNED_LITERALS: tuple[tuple[str, str, object], ...] = (
    ("a manylinux name of the glibc table", "compat/",
     lambda v: isinstance(v, str) and re.search(r"manylinux(1|2010|2014)(?![0-9])", v) is not None),
    ("the (2, 17) glibc floor", "compat/", lambda v: v == (2, 17)),
    ("a manylinux floor of torch's wheels", "compat/", lambda v: v in ("2_17", "2_28")),
    ("the variant regex", "compat/", lambda v: isinstance(v, str) and "cu\\d{3}" in v),
    ("pyenv's root", "host/pythons.py", lambda v: isinstance(v, str) and ".pyenv" in v),
)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def restated_facts(package: Path) -> list[str]:
    """`path:line: what` for each literal of `_OWNED_LITERALS` in code outside its owner."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and id(node) not in docs:
                value: object = node.value
            elif isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
                value = tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
            else:
                continue
            for what, owner, matches in _OWNED_LITERALS:
                if not rel.startswith(owner) and matches(value):  # type: ignore[operator]
                    found.append((rel, node.lineno, what))
    return [f"{rel}:{line}: {what}" for rel, line, what in sorted(found)]


def test_no_compat_fact_is_restated_in_src() -> None:
    assert restated_facts(ROOT / "src" / "torchfit") == []


def test_restated_facts_finds_a_planted_copy(tmp_path: Path) -> None:
    package = tmp_path / "torchfit"
    shutil.copytree(ROOT / "src" / "torchfit", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "matrixcheck" / "planted.py").write_text(
        '"""Planted by tests/compat/test_knowledge.py: manylinux2014 in a docstring is fine."""\n'
        'LEGACY = {"manylinux2014": (2, 17)}\n'
        'VARIANT = r"^(cu\\d{3}|cpu)$"\n'
        'ROOT = "~/.pyenv"\n'
    )
    assert restated_facts(package) == [
        "matrixcheck/planted.py:2: a manylinux name of the glibc table",
        "matrixcheck/planted.py:2: the (2, 17) glibc floor",
        "matrixcheck/planted.py:3: the variant regex",
        "matrixcheck/planted.py:4: pyenv's root",
    ]
