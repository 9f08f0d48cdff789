"""Facts written once in compat/, and nowhere else.

The owners are tested in their own files (test_versions.py, test_tags.py, test_rules.py,
test_plan.py); here, the absence of copies: `restated_facts` finds the literals that belong
to compat/ (the manylinux names of the glibc table, the `(2, 17)` floor, torch's manylinux
floors, the variant regex) and to pyenv's root rule (`.pyenv`, host/pythons.py) anywhere
else in src/ (code only: docstrings and comments may name them), and a planted copy shows
that it does."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from tests.conftest import ROOT

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
