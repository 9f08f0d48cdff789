"""torchfit.owned.remove_tree, the one rm -rf: it never leaves the tree torchfit made, neither
through a symlink nor across a mount point (a real bind mount and a real tmpfs, as root); and
only a marked directory of a dead run is stale (#12 of issue 13)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.mounts import bind, tmpfs
from torchfit.owned import (
    TreeNotRemoved,
    make_marked_dir,
    mounts_under,
    parse_mount_points,
    remove_marked,
    remove_tree,
)


def _tree(root: Path) -> None:
    (root / "lib" / "deep" / "deeper").mkdir(parents=True)
    (root / "lib" / "deep" / "deeper" / "f.so").write_bytes(b"\x7fELF")
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to("/usr/bin/python3")


def test_attack3_remove_tree_never_crosses_a_bind_mount(tmp_path: Path) -> None:
    """82c371b's shutil.rmtree descended into the bind mount and deleted the mounted files."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "results.csv").write_text("weeks of work")
    env = tmp_path / "env"
    _tree(env)
    with bind(data, env / "lib" / "deep" / "mnt"):
        assert mounts_under(str(env)) == [str(env / "lib" / "deep" / "mnt")]
        with pytest.raises(TreeNotRemoved, match=r"mount point is inside it at .*mnt"):
            remove_tree(str(env))
        assert (data / "results.csv").read_text() == "weeks of work"
        assert (env / "lib" / "deep" / "deeper" / "f.so").exists()  # refused up front: nothing half-removed
    remove_tree(str(env))
    assert not env.exists() and (data / "results.csv").exists()


def test_attack3_remove_marked_with_a_tmpfs_inside_leaves_it(tmp_path: Path) -> None:
    marked = tmp_path / ".env.torchfit-1-abc"
    make_marked_dir(str(marked), str(tmp_path / "env"))
    with tmpfs(marked / "scratch", "1m") as fs:
        (fs / "kept").write_text("x")
        with pytest.raises(TreeNotRemoved):
            remove_marked(str(marked))
        assert (fs / "kept").read_text() == "x"


def test_attack3_remove_tree_does_not_follow_symlinks_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    env = tmp_path / "env"
    _tree(env)
    (env / "lib" / "link-to-outside").symlink_to(outside)
    (env / "linkfile").symlink_to(outside / "keep")
    remove_tree(str(env))
    assert not env.exists()
    assert (outside / "keep").read_text() == "keep"
    assert os.path.exists("/usr/bin/python3")


_escaped = st.text(st.sampled_from(list("ab/ \t\n\\é")), min_size=1, max_size=20)


@given(names=st.lists(_escaped, min_size=1, max_size=5))
def test_attack3_mountinfo_escapes_round_trip(names: list[str]) -> None:
    """The kernel writes space, tab, newline and backslash in mount points as octal escapes."""
    def esc(p: str) -> str:
        return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in p)

    points = ["/x/" + n for n in names]
    text = "".join(f"{i + 20} 1 0:{i} / {esc(p)} rw,relatime shared:1 - tmpfs tmpfs rw\n" for i, p in enumerate(points))
    assert parse_mount_points(text) == points


def test_only_a_marked_directory_of_a_dead_run_is_stale(tmp_path: Path) -> None:
    """Defect #12 of the 2026-11 attack (issue 13)."""
    from torchfit.installer.prefix import scan_temps
    from torchfit.owned import make_marked_dir

    prefix = str(tmp_path / "env")
    dead = subprocess.Popen(["true"])
    dead.wait()
    mine = tmp_path / ".env.torchfit-1-aaaaaa"
    make_marked_dir(str(mine), prefix)  # this (live) process
    gone = tmp_path / ".env.torchfit-2-bbbbbb"
    record = make_marked_dir(str(gone), prefix)
    record["pid"] = dead.pid
    (gone / ".torchfit-owner").write_text(json.dumps(record))
    link = tmp_path / ".env.torchfit-3-cccccc"
    link.symlink_to(gone)
    scan = scan_temps(prefix)
    assert scan.stale == [str(gone)] and scan.running == [str(mine)] and scan.unproven == [str(link)]
