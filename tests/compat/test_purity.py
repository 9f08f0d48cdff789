"""compat/ is pure: it never imports subprocess, ctypes, requests, socket or rich."""

from __future__ import annotations

import ast
from pathlib import Path

import torchfit.compat

FORBIDDEN = {"subprocess", "ctypes", "requests", "rich", "socket", "urllib", "http"}


def test_compat_imports_nothing_impure() -> None:
    root = Path(torchfit.compat.__file__).parent
    files = sorted(root.glob("*.py"))
    assert len(files) >= 5
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
