"""installer/job.py (install's work around the steps) and export/pack.pick_group (the group of a
fleet's pack that install takes): the words each says, on values, with no install run. The
whole install, through real processes, is tests/installer/test_e2e.py's and test_flow.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchfit.errors import BadInput, LockMismatch
from torchfit.export import pack
from torchfit.installer.job import format_plan_line, refuse_builds, warn_unshared
from torchfit.lock.model import Artifact, Lock, LockedDist, NcclPin
from torchfit.progress import Progress


class Said(Progress):
    """An observer that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        self.lines.append(f"info: {message}")

    def warn(self, message: str) -> None:
        self.lines.append(f"warn: {message}")


def _dist(name: str, *kinds: str) -> LockedDist:
    return LockedDist(name, "1.0", tuple(Artifact(k, "0" * 64, filename=f"{name}-1.0.{k}") for k in kinds))


def test_no_build_names_the_first_package_a_lock_would_build() -> None:
    lock = Lock(packages=(_dist("torch", "wheel"), _dist("both", "wheel", "sdist"), _dist("hangpkg", "sdist")))
    with pytest.raises(BadInput) as err:
        refuse_builds(lock, "site/pylock.toml")
    assert str(err.value) == ("--no-build: site/pylock.toml installs hangpkg 1.0 from a source distribution "
                              "(hangpkg-1.0.sdist), which would be built; lock a wheel of it, or drop --no-build")
    refuse_builds(Lock(packages=(_dist("torch", "wheel"),)), "x")  # wheels only: nothing to refuse


def test_the_plan_line_says_torch_python_and_nccl() -> None:
    from torchfit.compat.plan import Plan

    fields = dict.fromkeys(Plan.__dataclass_fields__)
    plan = Plan(**{**fields, "torch": "2.8.0", "variant": "cu128", "python_version": "3.12.4",
                   "python_source": "pyenv", "warnings": (), "packages": ()})
    line = format_plan_line(plan, NcclPin("torch-pinned", "nvidia-nccl-cu12", "2.27.3", None))
    assert line.startswith("plan: torch 2.8.0 cu128, Python 3.12.4 (pyenv), NCCL "), line


def test_a_umask_that_shuts_out_the_parents_group_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchfit.installer import job

    said = Said()
    monkeypatch.setattr(job, "shared_group", lambda parent: "team")
    monkeypatch.setattr(job, "umask", lambda: 0o077)
    warn_unshared(str(tmp_path / "env"), said)
    assert len(said.lines) == 1 and said.lines[0].startswith("warn: umask 0077: the env will be usable by you only")
    monkeypatch.setattr(job, "umask", lambda: 0o022)  # the group keeps r-x
    warn_unshared(str(tmp_path / "env"), said)
    assert len(said.lines) == 1


GROUPS = {"group-1": ("/p/locks/group-1.toml", "x86[01-02]"), "group-2": ("/p/locks/group-2.toml", "")}


@pytest.mark.parametrize(("fitting", "expected"), [
    ({"/p/locks/group-2.toml"}, "info: pack: installing group group-2, the one whose lock fits this host "
                                "(/p/locks/group-2.toml)"),
    ({"/p/locks/group-1.toml", "/p/locks/group-2.toml"}, "--pack /p: 2 of its groups fit this host "
                                                         "(group-1, group-2); give --group NAME"),
    (set(), "--pack /p: none of its groups fits this host (group-1: glibc 2.17 < 2.28; group-2: glibc 2.17 < 2.28)"),
])
def test_the_pack_group_is_the_one_whose_lock_fits(monkeypatch: pytest.MonkeyPatch, fitting: set[str],
                                                   expected: str) -> None:
    monkeypatch.setattr(pack, "load_lock", lambda path: path)  # the "lock" is its path here

    def fits(lock: object) -> None:
        if lock not in fitting:
            raise LockMismatch("this host contradicts it", ["glibc 2.17 < 2.28"])

    said = Said()
    if len(fitting) == 1:
        assert pack.pick_group("/p", GROUPS, fits, said.info) == "/p/locks/group-2.toml"
        assert said.lines == [expected]
        return
    with pytest.raises(BadInput) as err:
        pack.pick_group("/p", GROUPS, fits, said.info)
    assert str(err.value).startswith(expected) and "(its groups: group-1 (x86[01-02]), group-2)" in str(err.value)
    assert said.lines == []
