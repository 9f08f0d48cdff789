"""export/container_context.py: a --pack is checked against the build context before anything is
written: inside it, and named so that a build's --mount option can name it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

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


# --- the context is the user's directory: nothing in it followed or replaced (issue 34, X1) --------


def _stand_in_pypi(tmp_path: Path) -> str:
    """A PEP 503 index (file://) holding a stand-in wheel of each of torchfit's own dependencies, at
    a version its requirement allows: what `uv pip compile` locks the image's torchfit from."""
    from packaging.requirements import Requirement

    from tests.support.wheels import make_wheel, write_index
    from torchfit.export.ownwheels import own_requirements

    wheels = []
    for text in own_requirements():
        req = Requirement(text)
        version = next(v for v in ("1.9", "99.0") if req.specifier.contains(v))
        wheels.append(make_wheel(tmp_path / "built", req.name, version))
    return write_index(tmp_path / "pypi", wheels).as_uri()


def _export(tmp_path: Path, lock: Path, ctx: Path) -> subprocess.CompletedProcess[str]:
    return run_tf("export", "--format", "containerfile", "--lock", str(lock), "-o", str(ctx / "Containerfile"),
                  "--pypi-url", _stand_in_pypi(tmp_path), state=tmp_path / "state", timeout=300)


@pytest.mark.parametrize("planted", ["link", "other-lock"])
def test_the_lock_is_never_copied_through_a_link_or_over_another_lock(tmp_path: Path, planted: str) -> None:
    """The context's pylock.toml is a symlink to a file outside, or another lock: refused in one line
    naming it, before the Containerfile is written; the file there unchanged."""
    lock = container_lock(tmp_path)
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    victim = tmp_path / "victim.toml"
    victim.write_text("# the user's other lock\n")
    if planted == "link":
        (ctx / "pylock.toml").symlink_to(victim)
    else:
        shutil.copyfile(victim, ctx / "pylock.toml")
    line = one_line_error(_export(tmp_path, lock, ctx))
    if planted == "link":
        assert f"{ctx / 'pylock.toml'}: a symbolic link is there, which torchfit did not make" in line, line
    else:
        assert f"{ctx / 'pylock.toml'}: a different file is already there; torchfit does not replace it" in line
    assert victim.read_text() == "# the user's other lock\n"
    assert (ctx / "pylock.toml").read_text() == victim.read_text() and not (ctx / "Containerfile").exists()


def test_a_planted_containerfile_part_is_never_followed(tmp_path: Path) -> None:
    """`Containerfile.part`, a symlink to a file outside, left in the context: the export writes
    the Containerfile (its lock copied, the same lock there kept) and never touches that file."""
    lock = container_lock(tmp_path)
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    shutil.copyfile(lock, ctx / "pylock.toml")  # the same lock already there: kept
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    (ctx / "Containerfile.part").symlink_to(victim)
    proc = _export(tmp_path, lock, ctx)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "the user's own file\n"
    assert (ctx / "Containerfile").read_text().startswith("#") and not (ctx / "Containerfile").is_symlink()
    assert "uv==1.9 --hash=sha256:" in (ctx / "torchfit-wheels" / "requirements.txt").read_text()


def test_a_lock_of_local_files_is_refused_naming_a_pack_before_anything_is_written(tmp_path: Path) -> None:
    """The lock a site's file:// mirror gives (every wheel a file:// URL or a path): an image
    build cannot reach its files (it failed 18.7 s into the build with uv's "torch was not found
    in the package registry", issue 35). Refused in one line that names the pack to make, before
    anything is written; with that pack, the same export goes on."""
    remote = container_lock(tmp_path).read_text()
    lock = tmp_path / "site.toml"
    lock.write_text(remote.replace("https://files.pythonhosted.org/f/", (tmp_path / "mirror").as_uri() + "/")
                    .replace("https://download.pytorch.org/whl/cpu/", (tmp_path / "mirror").as_uri() + "/"))
    ctx = tmp_path / "ctx"
    line = one_line_error(_export(tmp_path, lock, ctx))
    assert f"--lock {lock}: its files lie on this machine (filelock-4.3.1-py3-none-any.whl and 1 more)" in line, line
    assert f"torchfit pack --lock {lock} -o {ctx / 'pack'}, then export with --pack {ctx / 'pack'}" in line, line
    assert not ctx.exists() or not any(ctx.iterdir())  # nothing written
    # The lock as PyPI and the PyTorch index serve it: not refused.
    assert _export(tmp_path, container_lock(tmp_path), ctx).returncode == 0
