"""Real podman for the container tests (issues 27 and 35): a private store under pytest's tmp,
bases made with `debootstrap --variant=minbase` and `podman import` (no registry).

podman on these machines needs the `runc` runtime and explicit ulimits: both set in a
containers.conf `podman_env` writes (CONTAINERS_CONF); its storage root and runroot live under
the given directory (CONTAINERS_STORAGE_CONF), emptied and removed at the end. CI installs
podman, runc and debootstrap; TORCHFIT_REQUIRE_PODMAN=1 turns a missing one into a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

MIRROR = "http://deb.debian.org/debian"  # the mirror apt uses here (/etc/apt/sources.list.d/debian.sources)


def need_podman(tools: Sequence[str] = ("podman", "runc", "debootstrap")) -> None:
    """Skip (or fail, with TORCHFIT_REQUIRE_PODMAN=1) unless the tools are there and we are root."""
    missing = [t for t in tools if shutil.which(t) is None]
    why = (f"{', '.join(missing)} not installed (apt-get install podman runc debootstrap)" if missing
           else "debootstrap and podman's private storage need root" if os.getuid() != 0 else None)
    if why is None:
        return
    if os.environ.get("TORCHFIT_REQUIRE_PODMAN") == "1":
        pytest.fail(f"TORCHFIT_REQUIRE_PODMAN=1 but {why}")
    pytest.skip(why)


def podman_env(home: Path) -> Iterator[dict[str, str]]:
    """The environment of a podman with its own storage under `home`, reset at the end (a
    generator for a fixture)."""
    need_podman()
    conf = home / "containers.conf"
    # runc (Debian's crun is not what these machines run), and explicit ulimits: podman's default
    # raises nofile/nproc beyond what the sandbox grants, and the container fails to start.
    conf.write_text('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n'
                    '[engine]\nruntime = "runc"\n')
    storage = home / "storage.conf"
    storage.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{home}/root"\nrunroot = "{home}/run"\n')
    env = dict(os.environ, CONTAINERS_CONF=str(conf), CONTAINERS_STORAGE_CONF=str(storage))
    yield env
    # Every image of this private store, then the store itself (`system reset` would also touch the
    # host's network configuration).
    subprocess.run(["podman", "rmi", "--all", "--force"], env=env, capture_output=True, timeout=300)
    # The overlay driver bind-mounts its own directory (root/overlay) and keeps it mounted after the
    # last image is gone: unmount what is still mounted under the store, deepest first, so nothing
    # is left behind (a mount under pytest's tmp also makes its cleanup fail with EBUSY).
    _unmount_under(home, lazy=False)
    shutil.rmtree(home, ignore_errors=True)


def run_podman(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True, timeout=timeout)


def debootstrap_root(root: Path, include: Sequence[str] = ()) -> Path:
    """A Debian bookworm root (debootstrap minbase, plus `include`) at `root`."""
    argv = ["debootstrap", "--variant=minbase", *([f"--include={','.join(include)}"] if include else []),
            "bookworm", str(root), MIRROR]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    finally:
        _unmount_under(root)  # a debootstrap that failed leaves root/proc (and root/sys) mounted
    log = root / "debootstrap" / "debootstrap.log"
    tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-1000:] + tail
    return root


def _unmount_under(root: Path, *, lazy: bool = True) -> None:
    """Unmount what is mounted under `root`, deepest first."""
    with open("/proc/self/mounts", encoding="utf-8") as fh:
        points = [line.split()[1].replace("\\040", " ") for line in fh]
    for point in sorted((m for m in points if m.startswith(str(root) + "/")), key=len, reverse=True):
        subprocess.run(["umount", *(["-l"] if lazy else []), point], capture_output=True, timeout=60)


def tar_root(root: Path, tar: Path) -> Path:
    """`root` as a tar for `podman import`; the root removed."""
    subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True, timeout=600)
    shutil.rmtree(root)
    return tar
