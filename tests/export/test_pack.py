"""`torchfit pack` and `install --offline --pack` (issue 26, item 1): a pack of the CPU env's lock
(the local torch 2.13.0 wheel and its dependencies), moved elsewhere, installed inside a network
namespace with no interface but loopback (`unshare -n`), an empty uv cache and no pip
configuration; the env imports torch and `verify --env` passes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import cpu_env, cpu_wheel, run_tf, state_home, tf_env, torch_index
from tests.support.cli import torchfit_argv
from tests.support.servers import RangeFiles, http_server

__all__ = ["cpu_env", "cpu_wheel", "state_home", "torch_index"]  # the installer's fixtures, used here
pytestmark = pytest.mark.slow


def test_a_pack_installs_offline_wherever_it_was_carried(cpu_env: dict[str, Any], tmp_path: Path,
                                                         state_home: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        pytest.skip("unshare -n (a network namespace) is not available here")
    lock = cpu_env["prefix"] / "pylock.toml"
    made = tmp_path / "made"
    proc = run_tf("pack", "--no-torchfit", "--lock", str(lock), "-o", str(made), state=state_home, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    assert (made / "simple" / "torch" / "index.html").is_file() and (made / "README.txt").is_file()
    assert any(p.name.startswith("torch-2.13.0") for p in (made / "files").iterdir())
    # run again: resumed, nothing fetched; another lock's pack there is refused
    again = run_tf("pack", "--no-torchfit", "--lock", str(lock), "-o", str(made), state=state_home)
    assert again.returncode == 0 and "0 fetched" in again.stderr, again.stderr
    other = tmp_path / "other.toml"
    other.write_text(lock.read_text() + "\n# another\n")
    refused = run_tf("pack", "--no-torchfit", "--lock", str(other), "-o", str(made), state=state_home)
    assert refused.returncode == 2 and "a pack of another lock" in refused.stderr, refused.stderr
    # carried elsewhere, no absolute path inside
    carried = tmp_path / "site" / "pack"
    carried.parent.mkdir()
    shutil.move(str(made), str(carried))
    assert str(made) not in (carried / "simple" / "torch" / "index.html").read_text()
    prefix = tmp_path / "site" / "env"
    env = tf_env(state_home, PIP_CONFIG_FILE="/dev/null", PIP_FIND_LINKS="", UV_CACHE_DIR=str(tmp_path / "empty-uv"),
                 XDG_CACHE_HOME=str(tmp_path / "empty-cache"))
    argv = ["unshare", "-n", "--", *torchfit_argv("install", "--offline", "--pack", str(carried),
                                                   "--prefix", str(prefix), "--json")]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["ok"] is True
    ran = subprocess.run([str(prefix / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True, timeout=300)
    assert ran.stdout.strip() == "2.13.0+cpu", ran.stderr
    # the same namespace, its loopback up (a new one has it down): gloo's rendezvous runs on 127.0.0.1
    inner = " ".join(f"'{a}'" for a in torchfit_argv("verify", "--env", str(prefix), "--nproc", "1",
                                                     "--no-bandwidth", "--json"))
    verify = subprocess.run(["unshare", "-n", "--", "sh", "-c", f"ip link set lo up && exec {inner}"],
                            capture_output=True, text=True, env=env, timeout=600)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]


def test_a_file_that_differs_from_the_lock_is_refused(cpu_env: dict[str, Any], tmp_path: Path,
                                                      state_home: Path) -> None:
    text = (cpu_env["prefix"] / "pylock.toml").read_text()
    sha = next(line.split('"')[1] for line in text.splitlines() if "sha256 =" in line and "torch-2.13.0" not in line
               and len(line.split('"')) > 1 and len(line.split('"')[1]) == 64)
    bad = tmp_path / "pylock.toml"
    bad.write_text(text.replace(sha, "0" * 64, 1))
    proc = run_tf("pack", "--no-torchfit", "--lock", str(bad), "-o", str(tmp_path / "p"), state=state_home, timeout=1800)
    assert proc.returncode == 2 and "is not the lock's" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not list((tmp_path / "p").rglob("*.part"))


# --- an interrupted pack, run again, over real HTTP -------------------------------------------

SMALL, BIG = "alpha-1.0-py3-none-any.whl", "bigpkg-1.0-py3-none-any.whl"
LOCK = """\
lock-version = "1.0"
created-by = "torchfit"
{requires_python}
{packages}[tool.torchfit]
schema = 1
{torch_index}
[tool.torchfit.plan]
ok = true
python = "3.11"
torch = "2.13.0"
variant = "cpu"
"""


def _package(whl: str, url: str, data: bytes, *, sized: bool = True) -> str:
    """A lock's [[packages]] entry: the wheel `whl` (its name and version from its file name) at
    `url`, with the sha256 of its bytes `data`, and their size unless not `sized` (uv writes none
    for a file:// wheel)."""
    import hashlib

    name, version = whl.split("-")[:2]
    size = f"size = {len(data)}, " if sized else ""
    return (f'[[packages]]\nname = "{name}"\nversion = "{version}"\nwheels = [{{ name = "{whl}", url = "{url}", '
            f'{size}hashes = {{ sha256 = "{hashlib.sha256(data).hexdigest()}" }} }}]\n\n')


def _lock(*packages: str, torch_index: str = "", requires_python: str | None = "==3.11.*") -> str:
    """A CPU plan's pylock.toml of `packages` (_package), built from the torch index `torch_index`."""
    return LOCK.format(packages="".join(packages),
                       requires_python=f'requires-python = "{requires_python}"\n' if requires_python else "",
                       torch_index=f'torch-index-url = "{torch_index}/simple"\n' if torch_index else "")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_an_interrupted_pack_run_again_fetches_only_what_it_lacked(tmp_path: Path, sig: str) -> None:
    """Interrupted while the second file comes (the first is whole): run again, the first is not
    asked for and the second continues from where it stopped (Range), each byte sent once."""
    import os
    import signal
    import time

    from tests.support.cli import run_clean, start_cli

    small, big = os.urandom(50_000), os.urandom(8 << 20)
    files = RangeFiles({SMALL: small, BIG: big}, block=1 << 16, pause=0.005)  # slowly: 64 KiB each 5 ms
    with http_server(files) as server:
        lock = tmp_path / "pylock.toml"
        lock.write_text(_lock(_package(SMALL, f"{server.url}/{SMALL}", small),
                              _package(BIG, f"{server.url}/{BIG}", big)))
        out = tmp_path / "pack"
        args = ("pack", "--no-torchfit", "--lock", str(lock), "-o", str(out), "--allow-insecure-index")
        env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=os.path.join(
            Path(__file__).resolve().parents[2], "src"))
        first = start_cli(*args, base_env=env)
        deadline = time.monotonic() + 60
        while files.sent[BIG] < (2 << 20) and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.01)
        first.send_signal(getattr(signal, sig))
        first.communicate(timeout=60)
        part = out / "wheels" / (BIG + ".part")
        assert (out / "wheels" / SMALL).is_file() and part.is_file(), sorted(p.name for p in out.rglob("*"))
        kept = part.stat().st_size
        assert 0 < kept < len(big)
        before, sent_before = len(server.seen), dict(files.sent)
        again = run_clean(*args, env=env, timeout=120)
        assert again.returncode == 0, again.stderr
        second = [(path, h.get("Range", "")) for path, h in zip(server.seen[before:], server.headers[before:])]
        assert second == [(f"/{BIG}", f"bytes={kept}-")], second
        assert files.sent[BIG] - sent_before[BIG] == len(big) - kept
        assert files.sent[SMALL] == len(small)
        assert (out / "wheels" / BIG).read_bytes() == big and not part.exists()
        assert "1 fetched, 1 already there" in again.stderr and "resuming" in again.stderr


TORCH_WHL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
def test_a_lock_whose_torch_files_are_off_its_mirror_is_said(tmp_path: Path) -> None:
    """The env was built from a mirror whose torch page kept upstream's absolute URLs: the
    lock's torch files are on another host than its torch index. One warning line naming it
    (the mirror is `localhost`, the files `127.0.0.1`: one real server, two host names)."""
    import os

    from tests.support.cli import run_clean

    data = os.urandom(20_000)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"),
               PYTHONPATH=os.path.join(Path(__file__).resolve().parents[2], "src"))
    with http_server(RangeFiles({TORCH_WHL: data})) as server:
        port = server.url.rsplit(":", 1)[1]
        for name, index, warned in (("off", f"http://localhost:{port}", True), ("own", server.url, False)):
            lock = tmp_path / f"{name}.toml"
            lock.write_text(_lock(_package(TORCH_WHL, f"{server.url}/{TORCH_WHL}", data), torch_index=index))
            res = run_clean("pack", "--no-torchfit", "--lock", str(lock), "-o", str(tmp_path / name), "--allow-insecure-index",
                            env=env, timeout=120)
            assert res.returncode == 0, res.stderr
            lines = [ln for ln in res.stderr.splitlines() if "links its files on" in ln]
            if warned:
                assert len(lines) == 1 and "warning:" in lines[0] and "on 127.0.0.1," in lines[0], res.stderr
                assert f"localhost:{port}/simple" in lines[0]
            else:
                assert lines == [], res.stderr


def test_a_fleet_file_with_two_groups_packs_both_groups_files(tmp_path: Path, state_home: Path) -> None:
    """An x86_64 group and an aarch64 group (no GPU: the cpu builds) plus a project needing
    `alpha`: each group resolved and locked by uv, both torch wheels and `alpha` in one pack,
    each group's lock under locks/. Local indexes (file://), real uv. Then, carried elsewhere,
    `install --offline --pack` inside `unshare -n` picks the group that fits this host (x86_64)
    and says which; `--group` names one; a group it does not have is one line, exit 2."""
    import os
    import platform

    from tests.installer.conftest import one_line_error
    from tests.support.cli import run_clean
    from tests.support.fleets import node_facts
    from tests.support.wheels import make_wheel, write_index
    from torchfit.fleet.model import Fleet, Group, fleet_to_json

    if platform.machine() != "x86_64" or shutil.which("python3.11") is None:
        pytest.skip("the x86_64 group's lock is for an x86_64 host with Python 3.11")
    built = tmp_path / "built"
    version = "2.13.0+cpu"
    torch_files = {"torch/__init__.py": f"__version__ = {version!r}\n".encode(),
                   "torch/version.py": f"__version__ = {version!r}\ncuda = None\nhip = None\n".encode()}
    torches = [make_wheel(built, "torch", version, ["alpha"], tag=f"cp311-cp311-manylinux_2_28_{arch}",
                          files=torch_files) for arch in ("x86_64", "aarch64")]
    torch_simple = write_index(tmp_path / "torch-index", torches)
    deps_simple = write_index(tmp_path / "deps", [make_wheel(built, "alpha", "1.0")])
    py311 = [{"version": platform.python_version() if platform.python_version().startswith("3.11.") else "3.11.7",
              "path": shutil.which("python3.11"), "source": "path"}]
    groups = tuple(Group((f"{arch[:3]}01", f"{arch[:3]}02"), "",
                         {**node_facts("", "", 0, "580.65.06", "2.35", arch), "pythons": py311})
                   for arch in ("x86_64", "aarch64"))
    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps(fleet_to_json(Fleet(groups, (), "tests", ""))))
    out = tmp_path / "pack"
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), UV_CACHE_DIR=str(tmp_path / "uv"),
               PIP_CONFIG_FILE="/dev/null", PIP_FIND_LINKS="",
               PYTHONPATH=os.path.join(Path(__file__).resolve().parents[2], "src"))
    res = run_clean("pack", "--no-torchfit", "torch==2.13.0", "--facts", str(fleet), "--torch-index-url", torch_simple.as_uri(),
                    "--index-url", deps_simple.as_uri(), "-o", str(out), env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(p.name for p in (out / "files").iterdir()) == sorted(t.name for t in torches)
    assert [p.name for p in (out / "wheels").iterdir()] == ["alpha-1.0-py3-none-any.whl"]
    assert sorted(p.name for p in (out / "locks").iterdir()) == ["group-1.toml", "group-2.toml", "groups.json"]
    page = (out / "simple" / "torch" / "index.html").read_text()
    assert all(t.name in page for t in torches)

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        pytest.skip("unshare -n (a network namespace) is not available here")
    carried = tmp_path / "site" / "pack"
    carried.parent.mkdir()
    shutil.move(str(out), str(carried))
    offline = tf_env(state_home, PIP_CONFIG_FILE="/dev/null", PIP_FIND_LINKS="",
                     UV_CACHE_DIR=str(tmp_path / "empty-uv"), XDG_CACHE_HOME=str(tmp_path / "empty-cache"))

    def install(prefix: Path, *more: str) -> subprocess.CompletedProcess[str]:
        argv = ["unshare", "-n", "--", *torchfit_argv("install", "--offline", "--pack", str(carried),
                                                       "--prefix", str(prefix), *more)]
        return subprocess.run(argv, capture_output=True, text=True, env=offline, timeout=600)

    picked = install(tmp_path / "site" / "env", "--json")
    assert picked.returncode == 0, picked.stderr[-3000:]
    assert "installing group group-1 (x[8601-8602]), the one whose lock fits this host" in picked.stderr
    lock = (tmp_path / "site" / "env" / "pylock.toml").read_text()
    assert "manylinux_2_28_x86_64" in lock and "aarch64" not in lock
    ran = subprocess.run([str(tmp_path / "site" / "env" / "bin" / "python"), "-c",
                          "import torch, alpha_mod; print(torch.__version__, alpha_mod.VERSION)"],
                         capture_output=True, text=True, timeout=120)
    assert ran.stdout.split() == [version, "1.0"], ran.stderr
    named = install(tmp_path / "site" / "env2", "--group", "x8602")  # one of its nodes names the group
    assert named.returncode == 0 and "group-1" not in named.stderr.split("plan:")[0], named.stderr[-3000:]
    line = one_line_error(install(tmp_path / "site" / "env3", "--group", "gpu07"))
    assert "not a group of the pack (its groups: group-1 (x[8601-8602]), group-2 (aar[01-02]))" in line
    assert not (tmp_path / "site" / "env3").exists()


def test_the_progress_total_counts_a_local_wheel_the_lock_gives_no_size(tmp_path: Path) -> None:
    """uv writes no `size` for a file:// wheel (the local torch of a site's wheel directory): the
    pack's total is that file's own size, so the last line never reads "202.2 MB of 10.5 MB"."""

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    big, small = b"t" * 3_000_000, b"a" * 1_000_000
    (wheels / TORCH_WHL).write_bytes(big)
    (wheels / SMALL).write_bytes(small)
    lock = tmp_path / "pylock.toml"
    lock.write_text(_lock(_package(SMALL, (wheels / SMALL).as_uri(), small),
                          _package(TORCH_WHL, (wheels / TORCH_WHL).as_uri(), big, sized=False), requires_python=None))
    proc = run_tf("pack", "--no-torchfit", "--lock", str(lock), "-o", str(tmp_path / "pack"), state=tmp_path / "state")
    assert proc.returncode == 0, proc.stderr
    assert "pack: 2/2" in proc.stderr and "(4.0 MB of 4.0 MB)" in proc.stderr, proc.stderr


# --- a pack's directory: nothing planted in it is written through or kept (issue 34, P1) ----------


@pytest.mark.parametrize("planted", ["wheels/alpha-1.0-py3-none-any.whl.part", "README.txt", "simple/index.html",
                                     "wheels/alpha-1.0-py3-none-any.whl"])
def test_a_link_planted_in_a_pack_is_refused_never_written_through_or_kept(tmp_path: Path, planted: str) -> None:
    """A pack made, then a symlink to a file outside put where the pack writes (a `.part`, README.txt,
    simple/index.html) or where a wheel is (to a copy of the very wheel: its sha256 is right): the
    pack run again is refused in one line naming it, and the file outside is unchanged."""
    from tests.installer.conftest import one_line_error

    wheels = tmp_path / "src"
    wheels.mkdir()
    data = b"a" * 100_000
    (wheels / SMALL).write_bytes(data)
    (wheels / TORCH_WHL).write_bytes(b"t" * 1000)
    lock = tmp_path / "pylock.toml"
    lock.write_text(_lock(_package(SMALL, (wheels / SMALL).as_uri(), data),
                          _package(TORCH_WHL, (wheels / TORCH_WHL).as_uri(), b"t" * 1000), requires_python=None))
    out = tmp_path / "pack"
    first = run_tf("pack", "--no-torchfit", "--lock", str(lock), "-o", str(out), state=tmp_path / "state")
    assert first.returncode == 0, first.stderr
    victim = tmp_path / "victim"
    victim.write_bytes(data if planted.endswith(".whl") else b"the user's own file\n")
    before = victim.read_bytes()
    (out / "wheels" / SMALL).unlink()
    target = out / planted
    target.unlink(missing_ok=True)
    target.symlink_to(victim)
    again = run_tf("pack", "--no-torchfit", "--lock", str(lock), "-o", str(out), state=tmp_path / "state")
    line = one_line_error(again)
    assert f"{target}: a symbolic link is there, which torchfit did not make" in line, line
    assert victim.read_bytes() == before and target.is_symlink()


@pytest.mark.parametrize("where", ["site dir", "site#1", "site%41"])
def test_install_pack_carried_under_a_space_hash_or_percent(tmp_path: Path, state_home: Path, where: str) -> None:
    """`install --pack` where the pack was carried to a directory whose name holds a space, `#`
    or `%`: the pack's tree and wheels are told to the installer as %-encoded file:// URLs, so
    the install runs (before: "--torch-index-url '...': not a URL", a flag never given, or a
    `#` read as a URL's fragment, a `%41` as an escape)."""
    import os
    import platform

    from tests.support.cli import run_clean
    from tests.support.fleets import node_facts
    from tests.support.wheels import make_wheel, write_index
    from torchfit.fleet.model import Fleet, Group, fleet_to_json

    if platform.machine() != "x86_64" or shutil.which("python3.11") is None:
        pytest.skip("the group's lock is for an x86_64 host with Python 3.11")
    built = tmp_path / "built"
    version = "2.13.0+cpu"
    torch_files = {"torch/__init__.py": f"__version__ = {version!r}\n".encode(),
                   "torch/version.py": f"__version__ = {version!r}\ncuda = None\nhip = None\n".encode()}
    torch = make_wheel(built, "torch", version, ["alpha"], tag="cp311-cp311-manylinux_2_28_x86_64", files=torch_files)
    torch_simple = write_index(tmp_path / "torch-index", [torch])
    deps_simple = write_index(tmp_path / "deps", [make_wheel(built, "alpha", "1.0")])
    py311 = [{"version": platform.python_version() if platform.python_version().startswith("3.11.") else "3.11.7",
              "path": shutil.which("python3.11"), "source": "path"}]
    group = Group(("x8601",), "", {**node_facts("", "", 0, "580.65.06", "2.35", "x86_64"), "pythons": py311})
    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps(fleet_to_json(Fleet((group,), (), "tests", ""))))
    made = tmp_path / "made"
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), UV_CACHE_DIR=str(tmp_path / "uv"),
               PIP_CONFIG_FILE="/dev/null", PIP_FIND_LINKS="",
               PYTHONPATH=os.path.join(Path(__file__).resolve().parents[2], "src"))
    res = run_clean("pack", "--no-torchfit", "torch==2.13.0", "--facts", str(fleet), "--torch-index-url", torch_simple.as_uri(),
                    "--index-url", deps_simple.as_uri(), "-o", str(made), env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    carried = tmp_path / where / "pack"
    carried.parent.mkdir()
    shutil.move(str(made), str(carried))
    offline = tf_env(state_home, PIP_CONFIG_FILE="/dev/null", PIP_FIND_LINKS="",
                     UV_CACHE_DIR=str(tmp_path / "empty-uv"), XDG_CACHE_HOME=str(tmp_path / "empty-cache"))
    prefix = tmp_path / "env"
    got = subprocess.run(torchfit_argv("install", "--offline", "--pack", str(carried), "--prefix", str(prefix)),
                         capture_output=True, text=True, env=offline, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    ran = subprocess.run([str(prefix / "bin" / "python"), "-c",
                          "import torch, alpha_mod; print(torch.__version__, alpha_mod.VERSION)"],
                         capture_output=True, text=True, timeout=120)
    assert ran.stdout.split() == [version, "1.0"], ran.stderr
