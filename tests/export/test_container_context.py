"""export/container_context.py: a --pack is checked against the build context before anything is
written: inside it, and named so that a build's --mount option can name it."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.export.conftest import container_lock
from tests.installer.conftest import one_line_error, run_tf


def test_a_pack_outside_the_context_or_named_with_a_space_is_refused(tmp_path: Path) -> None:
    lock = container_lock(tmp_path)
    for pack in (tmp_path / "ctx" / "my pack", tmp_path / "elsewhere"):
        pack.mkdir(parents=True)
        (pack / ".torchfit-pack.json").write_text("{}")
        shutil.copyfile(lock, pack / "pylock.toml")
    inside = run_tf("export", "--format", "containerfile", "--pack", str(tmp_path / "ctx" / "my pack"), "-o",
                    str(tmp_path / "ctx" / "Containerfile"), state=tmp_path)
    assert "'my pack': a path a build's --mount option cannot name" in one_line_error(inside)
    outside = run_tf("export", "--format", "containerfile", "--pack", str(tmp_path / "elsewhere"), "-o",
                     str(tmp_path / "ctx" / "Containerfile"), state=tmp_path)
    assert "must be inside the build context" in one_line_error(outside)
    assert sorted(p.name for p in (tmp_path / "ctx").iterdir()) == ["my pack"]  # nothing written
