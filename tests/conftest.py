"""Shared test helpers: factories over fixtures, paths, the CLI runner."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.envs import build_cpu_torch_env, locked
from torchfit.compat.facts import Gpu, HostFacts, Pyenv, PythonInstall

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
FIXTURES = DATA  # one store: captures and stories alike live in tests/data


def make_facts(
    driver: str | None = "580.159.04",
    gpus: list[str] | None = None,
    glibc: str | tuple[int, int] | None = "2.39",
    pythons: list[str] | None = None,
    pyenv: list[str] | None = None,
    arch: str = "x86_64",
    os_name: str | None = "ubuntu:24.04",
    name: str = "this host",
) -> HostFacts:
    """`make_facts(driver="550.54.15", glibc=(2, 17), gpus=["sm_90"])`: a host as a value.

    GPUs are given as an arch (sm_90, 9.0), a gfx target (gfx942) or
    "NAME=sm_XX" to set the name.
    """
    gpu_list = []
    for i, spec in enumerate(gpus or []):
        name_part, _, arch_part = spec.rpartition("=")
        if arch_part.startswith("gfx"):
            gpu_list.append(Gpu(i, name_part or f"AMD {arch_part}", vendor="amd", gfx=arch_part))
        else:
            from torchfit.compat.versions import Arch

            a = Arch.parse(arch_part)
            gpu_list.append(Gpu(i, name_part or f"GPU {a.sm}", compute_capability=str(a)))
    if isinstance(glibc, tuple):
        glibc = ".".join(map(str, glibc))
    return HostFacts(
        driver_version=driver,
        gpus=tuple(gpu_list),
        glibc=glibc,
        os=os_name,
        wsl=False,
        arch=arch,
        pythons=tuple(PythonInstall(v, f"/usr/bin/python{v[:4]}", "path") for v in (pythons or ["3.12.3"])),
        pyenv=Pyenv("/root/.pyenv", "2.4.0", tuple(pyenv)) if pyenv is not None else None,
        name=name,
    )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, in the controller: hand each worker the controller's $COLUMNS (or its
    absence). A worker starts with COLUMNS=80 set, and torchfit wraps its messages to $COLUMNS
    when set (cli/ui/console.py): every CLI subprocess a test ran would wrap where a plain
    `pytest` run's does not."""
    node.workerinput["torchfit_columns"] = os.environ.get("COLUMNS")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of the real Slurm cluster on one pytest-xdist worker (`--dist loadgroup`): each
    worker starts its own cluster (tests/fleet/conftest.py, five slurmd), and four of them on a
    2-core machine made a step's tasks miss their time (tests/fleet/test_gather.py failed in 2 of
    3 full fast-tier runs with Slurm's "STEP 9.0 ON n1 CANCELLED")."""
    for item in items:
        if item.get_closest_marker("slurm") is not None:
            item.add_marker(pytest.mark.xdist_group("slurm"))


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "torchfit_columns" in workerinput:
        columns = workerinput["torchfit_columns"]
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns


def run_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's base temp dir, the same for every pytest-xdist worker: a worker's own basetemp
    is a popen-gwN folder inside it (xdist's workermanage passes --basetemp that way)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def session_uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One uv cache for the whole run, removed when it ends. Without it every test's uv used
    $XDG_CACHE_HOME/uv (its own, below) and unpacked the 716 MB torch wheel again; with the
    user's ~/.cache/uv each served URL of it added another copy there. Tests that need a
    cold or a full cache set UV_CACHE_DIR themselves.

    The xdist workers of one run share it (uv locks its cache for concurrent use): a count of
    the workers using it, kept under a file lock, lets the last one out remove it."""
    base = run_base(tmp_path_factory)
    path = base / "uv-cache"
    users = base / "uv-cache.users"
    with locked(base / "uv-cache.lock"):
        path.mkdir(exist_ok=True)
        count = int(users.read_text()) if users.exists() else 0
        users.write_text(str(count + 1))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UV_CACHE_DIR", str(path))
        yield path
    with locked(base / "uv-cache.lock"):
        left = int(users.read_text()) - 1
        users.write_text(str(left))
        if left == 0:
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def private_start_up_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own $XDG_CACHE_HOME: no test reads another's (or the user's) cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture(scope="session")
def matrix():  # type: ignore[no-untyped-def]
    from torchfit.compat.matrix import load_matrix

    return load_matrix()


@pytest.fixture(scope="session")
def cpu_torch_env() -> Path:
    """A venv prefix with the real CPU torch 2.13.0 wheel (Python 3.11), built once per
    cache (tests/support/envs.py); doctor, verify and the e2e tests share it."""
    return build_cpu_torch_env()
