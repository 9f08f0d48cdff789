"""A pack that stands alone (issue 35, item 1): `sh PACK/install.sh PREFIX` on a bare node.

The node is a container of a Debian bookworm root made by `debootstrap --variant=minbase` with no
python3 at all, only the shared libraries the test's Python links (ldd of pyenv's 3.11.7 and its
lib-dynload modules: libssl3, libffi8, libsqlite3-0, zlib1g, libbz2-1.0, liblzma5, libreadline8,
libexpat1, libuuid1, libncursesw6), run by real podman with `--network none`. The pack is made
here from the CPU env's lock with `--with-python`: uv's managed 3.11.7 comes from a site mirror
made here (tests/support/pythons.py: a relocatable install_only tarball served through
UV_PYTHON_INSTALL_MIRROR and UV_PYTHON_DOWNLOADS_JSON_URL), torchfit's own wheels as
`export --format containerfile` builds them. Mounted read-only, the pack alone gives an env whose
`import torch` works and whose `torchfit verify --env` passes (gloo on this CPU host).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import cpu_env, cpu_wheel, run_tf, state_home, torch_index
from tests.support.podman import debootstrap_root, run_podman, tar_root
from tests.support.pythons import build_python_mirror

__all__ = ["cpu_env", "cpu_wheel", "state_home", "torch_index"]  # the installer's fixtures, used here
pytestmark = pytest.mark.slow

BARE = "localhost/torchfit-test-bare:bookworm"
# What the test's Python links beyond libc (ldd of pyenv's 3.11.7 lib-dynload: _ssl/_hashlib,
# _ctypes, _sqlite3, zlib, _bz2, _lzma, readline, pyexpat, _uuid, _curses); NOT python3.
LIBS = ("libssl3", "libffi8", "libsqlite3-0", "zlib1g", "libbz2-1.0", "liblzma5", "libreadline8", "libexpat1",
        "libuuid1", "libncursesw6")
PODMAN_RUN = ("run", "--rm", "--network", "none", "--runtime", "runc", "--ulimit", "nofile=1024:1024",
              "--ulimit", "nproc=4096:4096")


@pytest.fixture(scope="session")
def bare_image(tmp_path_factory: pytest.TempPathFactory, podman: dict[str, str]) -> Iterator[str]:
    """A bookworm minbase with no Python, imported into the session's podman store."""
    work = tmp_path_factory.mktemp("bare")
    root = debootstrap_root(work / "root", LIBS)
    found = [str(p) for d in ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin") for p in (root / d).glob("python*")]
    assert found == [], found
    tar = tar_root(root, work / "bare.tar")
    proc = run_podman(podman, "import", str(tar), BARE)
    assert proc.returncode == 0, proc.stderr
    tar.unlink()
    yield BARE
    run_podman(podman, "rmi", "--force", BARE)


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_pack_alone_takes_a_bare_node_without_python_to_a_verified_env(
        podman: dict[str, str], bare_image: str, cpu_env: dict[str, Any], tmp_path: Path, state_home: Path) -> None:
    mirror = build_python_mirror()
    lock = cpu_env["prefix"] / "pylock.toml"
    pack = tmp_path / "pack"
    uv_env = {"UV_PYTHON_INSTALL_MIRROR": mirror["mirror"], "UV_PYTHON_DOWNLOADS_JSON_URL": mirror["json"],
              "UV_PYTHON_INSTALL_DIR": str(tmp_path / "uv-pythons")}
    made = run_tf("pack", "--lock", str(lock), "-o", str(pack), "--with-python", state=state_home, timeout=1800,
                  **uv_env)
    assert made.returncode == 0, made.stderr[-3000:]
    record = json.loads((pack / "python" / "python.json").read_text())
    assert record["version"] == "3.11.7" and record["UV_PYTHON_INSTALL_MIRROR"] == mirror["mirror"], record
    assert (pack / record["tarball"]).is_file()
    pins = (pack / "torchfit-wheels" / "requirements.txt").read_text().splitlines()[1:]
    assert pins[0].startswith("torchfit==") and all(" --hash=sha256:" in ln for ln in pins), pins
    assert any(ln.startswith("uv==") for ln in pins) and any(ln.startswith("pyelftools==") for ln in pins), pins
    assert "sh DIR/install.sh PREFIX" in (pack / "README.txt").read_text()
    size = _du(pack)
    print(f"pack: {size / 1e6:.1f} MB ({_du(pack / 'python') / 1e6:.1f} MB Python, "
          f"{_du(pack / 'torchfit-wheels') / 1e6:.1f} MB torchfit and its dependencies)")
    # run again: resumed, nothing fetched, the Python's tarball kept
    again = run_tf("pack", "--lock", str(lock), "-o", str(pack), "--with-python", state=state_home, **uv_env)
    assert again.returncode == 0 and "0 fetched" in again.stderr, again.stderr[-2000:]
    assert "carrying uv's Python" not in again.stderr

    script = ("set -e; if command -v python3 || command -v python3.11 || command -v python; then exit 99; fi; "
              "t0=$(date +%s%N); sh /pack/install.sh /env; t1=$(date +%s%N); "
              "/env/bin/python -c 'import torch; print(\"imported torch\", torch.__version__)'; "
              "/env.torchfit/tool/bin/torchfit verify --env /env; t2=$(date +%s%N); "
              "echo \"timing: install.sh $(( (t1 - t0) / 1000000 )) ms, to a passing verify "
              "$(( (t2 - t0) / 1000000 )) ms\"")
    start = time.monotonic()
    ran = run_podman(podman, *PODMAN_RUN, "-v", f"{pack}:/pack:ro", bare_image, "sh", "-c", script, timeout=1800)
    wall = time.monotonic() - start
    out = ran.stdout + ran.stderr
    print(out[-3000:])
    print(f"podman run wall time: {wall:.1f} s")
    assert ran.returncode != 99, "the bare node has a python"
    assert ran.returncode == 0, out[-5000:]
    assert "install.sh: next: /env.torchfit/tool/bin/torchfit verify --env /env" in out
    assert "imported torch 2.13.0+cpu" in ran.stdout
    assert "verify: PASS" in ran.stdout and "torch 2.13.0+cpu" in ran.stdout, ran.stdout[-3000:]
    assert "timing: install.sh" in ran.stdout
