"""`torchfit add` on a real CPU project env (torch 2.13.0 from the local wheel, uv, a package
pinning torch==2.13.0 and a pure-Python one): tiny wheels with real METADATA in a find-links
directory; one pinning torch==2.12.0 is refused (torch's files and pylock.toml byte-identical
after), compatible ones are installed and locked with sha256 and `verify --lock` passes, a
locked dependency moves only when it must; and the bad input that never touches anything
(one line, exit 2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import (
    CPU_ARGS,
    env_dists,
    needs_uv,
    one_line_error,
    run_tf,
)
from tests.support.envs import tree_digest as _tree_digest
from tests.support.wheels import Trickle, make_wheel, serve_dir, sha256_file, write_index

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.filterwarnings("ignore")


def _site(prefix: Path) -> Path:
    return next((prefix / "lib").glob("python3.*")) / "site-packages"


def _packages(prefix: Path) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in tomllib.loads((prefix / "pylock.toml").read_text())["packages"]}


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A find-links directory of tiny wheels, their METADATA as real packages write it."""
    d = tmp_path_factory.mktemp("links")
    make_wheel(d, "pins-old-torch", "1.0", ["torch==2.12.0"])
    make_wheel(d, "deep-pin", "1.0", ["pins-old-torch>=1"])  # needs torch 2.12.0 one level down
    make_wheel(d, "needs-torch", "1.0", ["torch==2.13.0", "numpy; python_version < '3'"])
    make_wheel(d, "pure-pkg", "1.0")
    make_wheel(d, "plugin-pkg", "1.0", ["needs-torch", "torch>=2.13"])
    make_wheel(d, "extra-pure", "1.0")
    make_wheel(d, "helper-dep", "1.0")
    make_wheel(d, "uses-helper", "1.0", ["helper-dep"])
    return d


@pytest.fixture(scope="module")
def add_env(tmp_path_factory: pytest.TempPathFactory, torch_index: str, links: Path, state_home: Path) -> Path:
    """A project env built by `torchfit install` (uv): CPU torch 2.13.0, a package pinning
    torch==2.13.0 and a pure-Python one; this module's own (it grows)."""
    prefix = tmp_path_factory.mktemp("add") / "env"
    proc = run_tf("install", CPU_ARGS[0], "needs-torch", "pure-pkg", *CPU_ARGS[1:], "--find-links", str(links), "--torch-index-url",
                  torch_index, "--prefix", str(prefix), state=state_home)
    assert proc.returncode == 0, proc.stderr
    assert tomllib.loads((prefix / "pylock.toml").read_text())["tool"]["torchfit"]["plan"]["project"] == [
        "needs-torch", "pure-pkg"]
    return prefix


@needs_uv
@pytest.mark.slow
def test_a_package_pinning_another_torch_is_refused_and_nothing_changes(add_env: Path, links: Path,
                                                                      state_home: Path) -> None:
    lock_before = (add_env / "pylock.toml").read_bytes()
    torch_before = _tree_digest(_site(add_env) / "torch")
    dists_before = env_dists(add_env)
    proc = run_tf("add", "pins-old-torch", "--env", str(add_env), "--find-links", str(links), state=state_home)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert "pins-old-torch 1.0 requires torch==2.12.0" in err, err
    assert "locked to torch 2.13.0+cpu" in err and "[add-needs-other-torch]" in err
    assert f"torchfit install --force --prefix {add_env} " in err
    assert err.rstrip().endswith(" torch needs-torch pure-pkg pins-old-torch"), err  # the project so far, grown
    assert "--variant cpu" in err and "Traceback" not in err
    # a requirement one level down: the package that pins torch is named, read from its METADATA
    proc = run_tf("add", "deep-pin", "--env", str(add_env), "--find-links", str(links), "--json", state=state_home)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["reference"] == "add-needs-other-torch"
    assert out["culprits"] == [{"package": "pins-old-torch", "version": "1.0", "requires": "torch==2.12.0"}]
    assert out["locked"] == {"torch": "2.13.0+cpu"} and out["command"].endswith(" deep-pin")
    # asking for another torch directly is the same refusal
    proc = run_tf("add", "torch==2.12.0", "--env", str(add_env), "--json", state=state_home)
    assert proc.returncode == 1 and json.loads(proc.stdout)["reference"] == "add-needs-other-torch", proc.stderr
    assert json.loads(proc.stdout)["command"].endswith(" needs-torch pure-pkg torch==2.12.0")
    # the matching torchvision (0.28.0, data/matrix.toml) is not on this env's torch index: uv says so
    proc = run_tf("add", "torchvision", "--env", str(add_env), state=state_home)
    assert proc.returncode == 1 and "torchvision" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    # the locked build itself: nothing to do, nothing written
    proc = run_tf("add", "torch", "--env", str(add_env), state=state_home)
    assert proc.returncode == 0 and "nothing new" in proc.stderr, proc.stderr
    # nothing changed: the lock byte for byte, torch's files, the env's distributions
    assert (add_env / "pylock.toml").read_bytes() == lock_before
    assert _tree_digest(_site(add_env) / "torch") == torch_before
    assert env_dists(add_env) == dists_before
    assert not [p for p in add_env.iterdir() if p.name.startswith(".pylock.toml.")]


@needs_uv
@pytest.mark.slow
def test_compatible_packages_are_installed_locked_and_verified(add_env: Path, links: Path, state_home: Path,
                                                               tmp_path: Path) -> None:
    before = _packages(add_env)
    torch_before = _tree_digest(_site(add_env) / "torch")
    proc = run_tf("add", "plugin-pkg", "extra-pure>=1", "--env", str(add_env), "--find-links", str(links), "--json",
                  state=state_home)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {(d["name"], d["version"]) for d in out["added"]} == {("plugin-pkg", "1.0"), ("extra-pure", "1.0")}
    assert out["changed"] == [] and out["kept_locked_versions"] is True
    # the env has them; torch is the same files
    dists = env_dists(add_env)
    assert dists["plugin-pkg"] == "1.0" and dists["extra-pure"] == "1.0" and dists["torch"] == "2.13.0+cpu"
    assert _tree_digest(_site(add_env) / "torch") == torch_before
    # the lock lists them with the sha256 of the very wheels, keeps every earlier entry as it was
    after = _packages(add_env)
    for name in ("plugin-pkg", "extra-pure"):
        (wheel,) = after[name]["wheels"]
        assert wheel["hashes"]["sha256"] == sha256_file(links / wheel["name"])
    assert {n: p for n, p in after.items() if n in before} == before
    tool = tomllib.loads((add_env / "pylock.toml").read_text())["tool"]["torchfit"]
    assert tool["plan"]["project"] == ["needs-torch", "pure-pkg", "plugin-pkg", "extra-pure>=1"]
    assert tool["plan"]["resolved"]["extra-pure"] == "1.0" and tool["plan"]["resolved"]["torch"] == "2.13.0+cpu"
    assert tool["added"][-1]["requirements"] == ["plugin-pkg", "extra-pure>=1"]
    # asked again: nothing to do, the lock byte for byte as it is
    lock_now = (add_env / "pylock.toml").read_bytes()
    proc = run_tf("add", "extra-pure>=1", "--env", str(add_env), "--find-links", str(links), state=state_home)
    assert proc.returncode == 0 and "nothing to do" in proc.stderr, proc.stderr
    assert (add_env / "pylock.toml").read_bytes() == lock_now
    # verify --lock: the closure check (and the rest, on gloo) passes on the grown env
    from tests.verify.conftest import Verify

    r = Verify(tmp_path).run("--env", str(add_env), "--lock", str(add_env / "pylock.toml"), "--json",
                             "--no-bandwidth", "--nproc", "1", timeout=300)
    assert r.code == 0, r
    assert r.check("lock-deps")["status"] == "pass" and r.check("lock")["status"] == "pass"


@needs_uv
@pytest.mark.slow
def test_add_offline_from_the_locked_file_tree_and_a_find_links_directory(add_env: Path, links: Path,
                                                                          state_home: Path, tmp_path: Path) -> None:
    """Issue 24, class 6: `--offline` kept uv's `--no-index`, which drops the explicit torch index
    too, so every offline add failed; the torch family now comes from the lock's file:// index."""
    make_wheel(links, "offline-pkg", "1.0", ["torch>=2.13"])
    # The air-gap workflow of docs/mirrors.md: the lock's other wheels downloaded into a directory.
    wheels = tmp_path / "wheels"
    locked = [f"{n}=={p['version']}" for n, p in _packages(add_env).items()
              if n not in ("torch", "torchvision", "torchaudio")
              and not any(str(links) in w.get("url", "") for w in p.get("wheels", []))]
    got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                          "-d", str(wheels), *locked], capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr
    # no find-links of this machine's own (its /opt/wheels holds torch): torch must come from the
    # lock's file:// torch index, which uv's --no-index used to drop
    proc = run_tf("add", "offline-pkg", "--env", str(add_env), "--find-links", str(links), "--find-links",
                  str(wheels), "--offline", "--json", state=state_home, PIP_FIND_LINKS="", PIP_CONFIG_FILE="/dev/null")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(d["name"], d["version"]) for d in out["added"]] == [("offline-pkg", "1.0")], out
    assert env_dists(add_env)["torch"] == "2.13.0+cpu"


@needs_uv
@pytest.mark.slow
def test_a_locked_dependency_moves_only_when_it_must(add_env: Path, links: Path, state_home: Path) -> None:
    proc = run_tf("add", "uses-helper", "--env", str(add_env), "--find-links", str(links), state=state_home)
    assert proc.returncode == 0, proc.stderr
    assert _packages(add_env)["helper-dep"]["version"] == "1.0"
    # a newer helper appears, and a package that needs it: the locked 1.0 cannot be kept
    make_wheel(links, "helper-dep", "2.0")
    make_wheel(links, "needs-helper2", "1.0", ["helper-dep>=2"])
    proc = run_tf("add", "needs-helper2", "--env", str(add_env), "--find-links", str(links), "--json",
                  state=state_home)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["changed"] == [{"name": "helper-dep", "from": "1.0", "to": "2.0"}]
    assert out["kept_locked_versions"] is False
    assert env_dists(add_env)["helper-dep"] == "2.0" and _packages(add_env)["helper-dep"]["version"] == "2.0"
    # the earlier project requirements still hold in a later resolution
    project = tomllib.loads((add_env / "pylock.toml").read_text())["tool"]["torchfit"]["plan"]["project"]
    assert project[-2:] == ["uses-helper", "needs-helper2"]


# --- bad input: one line, exit 2, nothing touched --------------------------------------------


def _foreign_env(root: Path, lock_text: str | None) -> Path:
    env = root / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    if lock_text is not None:
        (env / "pylock.toml").write_text(lock_text)
    return env


def test_bad_input_is_one_line(tmp_path: Path, state_home: Path) -> None:
    assert "PEP 508" in one_line_error(run_tf("add", "pkg==>1", "--env", str(tmp_path), state=state_home))
    assert "no such directory" in one_line_error(run_tf("add", "x", "--env", str(tmp_path / "nope"),
                                                        state=state_home))
    plain = _foreign_env(tmp_path / "plain", None)
    assert "not an env torchfit built" in one_line_error(run_tf("add", "x", "--env", str(plain), state=state_home))
    foreign = _foreign_env(tmp_path / "foreign", 'lock-version = "1.0"\n[[packages]]\nname = "x"\nversion = "1"\n')
    before = (foreign / "pylock.toml").read_bytes()
    assert "[tool.torchfit]" in one_line_error(run_tf("add", "x", "--env", str(foreign), state=state_home))
    assert (foreign / "pylock.toml").read_bytes() == before
    assert "--env" in one_line_error(run_tf("add", "x", state=state_home))
    assert "--find-links" in one_line_error(run_tf("add", "x", "--env", str(foreign), "--find-links", "ftp://x/y",
                                                   state=state_home))


def test_a_companion_whose_binary_is_the_torch_index_s_is_routed_there() -> None:
    """xformers for a cu126 env: PyPI's wheel is another CUDA build (companions.toml), so uv
    may take it only from the lock's torch index, as install routes it; the lock's own
    routed packages stay routed."""
    from packaging.requirements import Requirement

    from torchfit.installer.add import routed_for
    from torchfit.lock.model import Artifact, Lock, LockedDist
    from torchfit.lock.tool import ToolTable
    from torchfit.lock.uv import uv_project
    from torchfit.progress import Progress

    torch = LockedDist("torch", "2.8.0+cu126", (Artifact("wheel", "a" * 64, "https://x/torch.whl"),))
    lock = Lock(packages=(torch,), tool=ToolTable(plan={"variant": "cu126", "routed": ["some-routed"]}))
    routed = routed_for(lock, {"torch": torch}, [Requirement("xformers"), Requirement("pure-pkg")], Progress())
    assert routed == ["some-routed", "xformers"]
    doc = tomllib.loads(uv_project(["torch==2.8.0+cu126", "xformers", "pure-pkg"], "https://idx/cu126", routed))
    assert set(doc["tool"]["uv"]["sources"]) == {"torch", "xformers"}
    # a CPU env: PyPI's xformers is no CPU build either, but the torch index has none: not routed
    cpu = LockedDist("torch", "2.13.0+cpu", (Artifact("wheel", "a" * 64, "https://x/torch.whl"),))
    lock = Lock(packages=(cpu,), tool=ToolTable(plan={"variant": "cpu"}))
    assert routed_for(lock, {"torch": cpu}, [Requirement("xformers")], Progress()) == []


def _immutable(path: Path, on: bool) -> bool:
    """chattr +i/-i: no entry of `path` itself can be created or renamed (its subdirectories stay writable)."""
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    return subprocess.run([chattr, "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


@needs_uv
@pytest.mark.slow
def test_a_lock_that_cannot_be_rewritten_rolls_the_env_back(add_env: Path, links: Path, state_home: Path) -> None:
    """The packages are installed, then the new lock cannot be written beside the old one (the
    env directory made immutable: a real EPERM): what was added is removed, what was changed
    gets its locked files back, the lock is byte-identical; the env matches its lock again."""
    proc = run_tf("add", "uses-helper", "--env", str(add_env), "--find-links", str(links), state=state_home)
    assert proc.returncode == 0, proc.stderr  # a locked helper-dep (a no-op after the test above)
    make_wheel(links, "helper-dep", "3.0")
    make_wheel(links, "needs-helper3", "1.0", ["helper-dep>=3"])
    lock_before = (add_env / "pylock.toml").read_bytes()
    dists_before = env_dists(add_env)
    if not _immutable(add_env, True):
        pytest.skip("chattr +i is not possible here (needs root and a filesystem with the attribute)")
    try:
        proc = run_tf("add", "needs-helper3", "--env", str(add_env), "--find-links", str(links), state=state_home)
    finally:
        _immutable(add_env, False)
    assert proc.returncode == 1, proc.stderr
    assert "cannot rewrite" in proc.stderr and "rolled back: removed needs-helper3; restored helper-dep" in proc.stderr
    assert (add_env / "pylock.toml").read_bytes() == lock_before
    assert env_dists(add_env) == dists_before


@needs_uv
@pytest.mark.slow
def test_pip_installs_what_uv_resolved(tmp_path: Path, torch_index: str, links: Path, state_home: Path) -> None:
    """--installer pip (an env with pip: install --seed): uv resolves with the family pinned,
    pip installs the same files hash-checked (--require-hashes --no-deps)."""
    prefix = tmp_path / "env"
    proc = run_tf("install", *CPU_ARGS, "--seed", "--torch-index-url", torch_index, "--prefix", str(prefix),
                  state=state_home)
    assert proc.returncode == 0, proc.stderr
    torch_before = _tree_digest(_site(prefix) / "torch")
    proc = run_tf("add", "needs-torch", "--installer", "pip", "--env", str(prefix), "--find-links", str(links),
                  "--json", state=state_home)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["installer"].startswith("pip ") and [d["name"] for d in out["added"]] == ["needs-torch"]
    assert env_dists(prefix)["needs-torch"] == "1.0"
    (wheel,) = _packages(prefix)["needs-torch"]["wheels"]
    assert wheel["hashes"]["sha256"] == sha256_file(links / wheel["name"])
    assert _tree_digest(_site(prefix) / "torch") == torch_before


@needs_uv
@pytest.mark.slow
def test_sigterm_while_uv_resolves_changes_nothing(add_env: Path, links: Path, tmp_path: Path) -> None:
    """An index that never answers holds uv's resolution; SIGTERM then: exit 130, uv gone, the env
    and its lock as they were, no temporary lock beside it."""
    import signal

    from tests.installer.conftest import pid_alive, start_tf, wait_for_child
    from tests.support.servers import serve

    lock_before = (add_env / "pylock.toml").read_bytes()
    dists_before = env_dists(add_env)
    with serve() as url:
        proc = start_tf("add", "extra-pure", "--env", str(add_env), "--find-links", str(links),
                        "--extra-index-url", f"{url}/simple", "--allow-insecure-index", state=tmp_path)
        child, _ = wait_for_child(proc, lambda argv: bool(argv) and os.path.basename(argv[0]) == "uv"
                                  and argv[1:3] == ["pip", "compile"])
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert not pid_alive(child)
    assert (add_env / "pylock.toml").read_bytes() == lock_before
    assert env_dists(add_env) == dists_before
    assert not [p for p in add_env.iterdir() if p.name.startswith(".pylock.toml.")]
    assert not (add_env.parent / (add_env.name + ".lock")).exists()  # PREFIX.lock released


def test_a_torch_url_is_refused_not_a_no_op(add_env: Path, state_home: Path) -> None:
    """Issue 25: `add 'torch @ URL'` was "the env has torch already", exit 0: a URL is another
    build, never the locked one; one line, exit 2, nothing touched."""
    lock_before = (add_env / "pylock.toml").read_bytes()
    proc = run_tf("add", "torch @ https://user:s3cret@example.invalid/torch-2.13.0-cp311-none-any.whl", "--env",
                  str(add_env), state=state_home)
    line = one_line_error(proc)
    assert "never swaps the torch family" in line and "locked torch 2.13.0+cpu" in line, line
    assert "s3cret" not in proc.stderr
    assert (add_env / "pylock.toml").read_bytes() == lock_before


@needs_uv
@pytest.mark.slow
def test_another_file_under_the_locked_version_is_named_as_such(add_env: Path, links: Path, tmp_path: Path,
                                                               state_home: Path) -> None:
    """Issue 25: "has torch 2.12.0+cpu instead of the locked 2.12.0+cpu": the torch index serves
    another file under the locked version; the refusal says so (the two sha256), not a version swap."""
    from tests.installer.conftest import make_simple_index

    other = make_wheel(tmp_path / "w", "torch", "2.13.0+cpu", tag="cp311-cp311-manylinux_2_28_x86_64")
    index = make_simple_index(tmp_path / "idx", [other], relative=True).as_uri()
    lock_before = (add_env / "pylock.toml").read_bytes()
    proc = run_tf("add", "extra-pure", "--env", str(add_env), "--torch-index-url", index, "--find-links",
                  str(links), state=state_home)
    assert proc.returncode == 1, proc.stderr
    assert "serves torch 2.13.0+cpu as another file than the locked one" in proc.stderr, proc.stderr
    assert f"sha256 {sha256_file(other)[:12]}..." in proc.stderr
    assert "instead of the locked" not in proc.stderr
    assert (add_env / "pylock.toml").read_bytes() == lock_before


@pytest.fixture
def swap_env(tmp_path: Path, torch_index: str, state_home: Path) -> Path:
    prefix = tmp_path / "env"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix), state=state_home)
    assert proc.returncode == 0, proc.stderr
    return prefix


@needs_uv
@pytest.mark.slow
def test_a_torch_swapped_by_a_bare_uv_pip_install_is_noticed(swap_env: Path, links: Path, tmp_path: Path,
                                                             state_home: Path) -> None:
    """Issue 25: a torch replaced behind torchfit's back (uv pip install, pip install) was not
    noticed: `add` said "the torch family as it was", exit 0. The env's dist-info against the
    lock, before anything: another version, then the same version from another file (its RECORD
    is not the locked wheel's), each refused with exit 1, verify and the rebuild command."""
    from torchfit.lock.uvbin import find_uv
    from torchfit.runner import Runner

    uv = find_uv(Runner())
    assert uv
    swapped = tmp_path / "swap"
    make_wheel(swapped, "torch", "2.13.0+cpu", tag="cp311-cp311-manylinux_2_28_x86_64")  # same version, other build
    make_wheel(swapped, "torch", "2.12.0", tag="cp311-cp311-manylinux_2_28_x86_64")

    def swap(spec: str) -> None:
        subprocess.run([uv, "pip", "install", "--python", str(swap_env / "bin" / "python"), "--reinstall",
                        "--no-deps", "--no-index", "--find-links", str(swapped), spec], check=True,
                       capture_output=True, timeout=300)

    for spec, seen in (("torch==2.13.0+cpu", "torch 2.13.0+cpu is installed from another file than the locked "
                                               "wheel"),
                       ("torch==2.12.0", "torch 2.12.0 is installed where the lock has 2.13.0+cpu")):
        swap(spec)
        lock_before = (swap_env / "pylock.toml").read_bytes()
        proc = run_tf("add", "pure-pkg", "--env", str(swap_env), "--find-links", str(links), "--json",
                      state=state_home)
        assert proc.returncode == 1, proc.stderr
        out = json.loads(proc.stdout)
        assert out["reference"] == "env-drifted" and any(seen in d for d in out["drift"]), out
        assert f"torchfit verify --env {swap_env} --lock {swap_env}/pylock.toml" in out["hint"]
        assert f"torchfit install --force --lock {swap_env}/pylock.toml --prefix {swap_env}" in out["hint"]
        assert "pure-pkg" not in env_dists(swap_env)
        assert (swap_env / "pylock.toml").read_bytes() == lock_before


# --- interrupted: while uv installs, while the lock is renamed --------------------------------------------


def _site_digest(prefix: Path) -> str:
    """Every file of the env's site-packages and bin/ (path and bytes): the env byte for byte."""
    return _tree_digest(_site(prefix)) + _tree_digest(prefix / "bin")


@pytest.fixture(scope="module")
def trickled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PEP 503 index on 127.0.0.1 (PEP 658 metadata served at once) whose one wheel,
    `slow-pkg` (600 KB that do not compress), comes at 40 KB/s: 15 s of uv install."""
    root = tmp_path_factory.mktemp("trickle")
    wheel = make_wheel(root / "w", "slow-pkg", "1.0")
    import zipfile

    with zipfile.ZipFile(wheel, "a") as zf:  # the RECORD is not checked by uv for extra data members
        zf.writestr("slow_pkg_mod/blob.bin", os.urandom(600_000), compress_type=zipfile.ZIP_STORED)
    write_index(root, [wheel])

    with serve_dir(root, Trickle) as url:
        yield f"{url}/simple"


def _start_add(add_env: Path, links: Path, trickled: str, state: Path, *wrap: str) -> subprocess.Popen[str]:
    from tests.installer.conftest import tf_env

    argv = [*wrap, sys.executable, "-m", "torchfit", "add", "slow-pkg", "--env", str(add_env), "--find-links",
            str(links), "--extra-index-url", trickled, "--allow-insecure-index"]
    return subprocess.Popen(argv, env=tf_env(state), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _state(add_env: Path) -> tuple[bytes, str]:
    return (add_env / "pylock.toml").read_bytes(), _site_digest(add_env)


@needs_uv
@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_signal_while_uv_installs_leaves_the_env_and_lock_as_they_were(
        sig: str, add_env: Path, links: Path, trickled: str, tmp_path: Path) -> None:
    """Issue 25: interruption during add's install step (every earlier try arrived while it still
    resolved). The wheel trickles, so uv is installing when the signal comes. SIGINT/SIGTERM:
    exit 130, uv gone, the env and its lock byte for byte. SIGKILL: torchfit cannot act, but its
    watchdog ends uv, the lock is untouched, and the journal it left makes the next add undo
    whatever got in before anything else."""
    import signal
    import time

    from tests.installer.conftest import pid_alive, wait_for_child

    before = _state(add_env)
    proc = _start_add(add_env, links, trickled, tmp_path)
    child, _ = wait_for_child(proc, lambda argv: bool(argv) and os.path.basename(argv[0]) == "uv"
                              and argv[1:3] == ["pip", "install"])
    time.sleep(1.0)
    assert (add_env / ".torchfit-add-pending.json").exists()
    os.kill(proc.pid, getattr(signal, sig))
    _, err = proc.communicate(timeout=120)
    deadline = time.monotonic() + 10
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(child), "uv outlived torchfit"
    if sig != "SIGKILL":
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        assert not (add_env / ".torchfit-add-pending.json").exists()
    else:
        assert proc.returncode == -signal.SIGKILL
        assert (add_env / ".torchfit-add-pending.json").exists()
        # the next add finds the journal and undoes what it can before its own work
        again = run_tf("add", "slow-pkg==0.1", "--env", str(add_env), "--find-links", str(links), state=tmp_path)
        assert "stopped before it rewrote pylock.toml" in again.stderr, again.stderr
        assert not (add_env / ".torchfit-add-pending.json").exists()
    assert _state(add_env) == before
    assert not [p for p in add_env.iterdir() if p.name.startswith(".pylock.toml.")]
    assert not (add_env.parent / (add_env.name + ".lock")).exists()


@needs_uv
@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("strace"), reason="strace holds the lock's rename")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_signal_while_the_lock_is_rewritten_leaves_one_whole_state(
        sig: str, add_env: Path, links: Path, trickled: str, tmp_path: Path) -> None:
    """Issue 25: interruption during the lock rewrite. strace holds torchfit's rename(2) 4 s
    (a delay injected into the real syscall; uv is not traced), so the signal comes while the
    new lock is written beside the old one and not yet renamed. SIGINT/SIGTERM wait for the
    rename (the commit) and then leave the new state whole: the package installed and locked,
    exit 130. SIGKILL leaves the old lock in place: the next add removes the temporary file and
    undoes the install, so the env matches its lock byte for byte again."""
    import signal
    import time

    lock_before, env_before = _state(add_env)
    proc = _start_add(add_env, links, trickled, tmp_path, "strace", "-qq", "-o", "/dev/null", "-e",
                      "trace=rename,renameat,renameat2", "-e",
                      "inject=rename,renameat,renameat2:delay_enter=4000000")
    deadline = time.monotonic() + 300
    while not [p for p in add_env.iterdir() if p.name.startswith(".pylock.toml.")]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(proc.pid, getattr(signal, sig))  # strace and torchfit: the terminal's Ctrl-C
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err
    if sig != "SIGKILL":
        assert "interrupted after pylock.toml was rewritten" in err, err
        assert "slow-pkg" in _packages(add_env) and env_dists(add_env)["slow-pkg"] == "1.0"
        assert not (add_env / ".torchfit-add-pending.json").exists()
        # back to the module's env: remove it the way it came, through the lock
        subprocess.run([str(add_env / "bin" / "python"), "-c", "pass"], check=True)
        (add_env / "pylock.toml").write_bytes(lock_before)
        from torchfit.lock.uvbin import find_uv
        from torchfit.runner import Runner

        subprocess.run([find_uv(Runner()) or "uv", "pip", "uninstall", "--python", str(add_env / "bin" / "python"),
                        "slow-pkg"], check=True, capture_output=True)
    else:
        assert (add_env / ".torchfit-add-pending.json").exists()
        again = run_tf("add", "slow-pkg==0.1", "--env", str(add_env), "--find-links", str(links), state=tmp_path)
        assert "stopped before it rewrote pylock.toml" in again.stderr, again.stderr
    assert _state(add_env) == (lock_before, env_before)
    assert not [p for p in add_env.iterdir() if p.name.startswith((".pylock.toml.", ".torchfit-add-pending"))]
    assert not (add_env.parent / (add_env.name + ".lock")).exists()


@needs_uv
@pytest.mark.slow
def test_a_python_running_from_the_env_is_named_before_a_package_is_replaced(
        add_env: Path, links: Path, tmp_path: Path, state_home: Path) -> None:
    """Issue 25 (left from round 3): add did not look for processes using the env. A python
    running from it: a new package alone is added with a warning naming it; replacing an
    installed one (helper-dep 1.0 -> 2.0 here) is refused, exit 1, unless --allow-in-use."""
    helper = tmp_path / "links"
    shutil.copytree(links, helper)
    make_wheel(helper, "helper-dep", "2.5")
    make_wheel(helper, "needs-helper25", "1.0", ["helper-dep>=2.5,<3"])
    proc = run_tf("add", "uses-helper", "--env", str(add_env), "--find-links", str(links), state=state_home)
    assert proc.returncode == 0, proc.stderr  # helper-dep locked (a no-op when an earlier test added it)
    runner = subprocess.Popen([str(add_env / "bin" / "python"), "-c", "import time; time.sleep(120)"])
    try:
        lock_before = (add_env / "pylock.toml").read_bytes()
        proc = run_tf("add", "needs-helper25", "--env", str(add_env), "--find-links", str(helper), "--json",
                      state=state_home)
        assert proc.returncode == 1, proc.stderr
        out = json.loads(proc.stdout)
        assert out["reference"] == "env-in-use" and out["processes"][0]["pid"] == runner.pid, out
        assert "would replace helper-dep" in out["error"] and "--allow-in-use" in out["hint"]
        assert (add_env / "pylock.toml").read_bytes() == lock_before
        make_wheel(links, "plain-new", "1.0")  # in the module's links: the env keeps it for later tests
        proc = run_tf("add", "plain-new", "--env", str(add_env), "--find-links", str(links), state=state_home)
        assert proc.returncode == 0, proc.stderr
        assert f"pid {runner.pid}" in proc.stderr and "adding new packages does not disturb them" in proc.stderr
    finally:
        runner.kill()
        runner.wait()


@needs_uv
@pytest.mark.slow
def test_add_a_requirements_file_and_a_pyproject(add_env: Path, links: Path, state_home: Path, tmp_path: Path) -> None:
    """Issue 27, item 2: `add -r FILE --project DIR` fits a whole project around the env's locked
    torch, read as resolve/install read it: the file's requirements and `-c` constraints, the
    pyproject's dependencies and --extra group; a line two levels above another torch's pin is
    refused as a PKG is, nothing changed; the project's `torch` line is the locked build."""
    make_wheel(links, "proj-a", "1.0", ["proj-b"])
    make_wheel(links, "proj-b", "1.0")
    make_wheel(links, "proj-b", "2.0")
    make_wheel(links, "proj-c", "1.0", ["torch>=2.13"])
    make_wheel(links, "proj-opt", "1.0")
    (tmp_path / "c.txt").write_text("proj-b<2\n")
    (tmp_path / "requirements.txt").write_text("-c c.txt\ntorch>=2.13\nproj-a\n")
    (tmp_path / "bad.txt").write_text("proj-a\ndeep-pin  # pins-old-torch -> torch==2.12.0\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mine"\nversion = "0"\ndependencies = ["proj-c"]\n'
                                             '[project.optional-dependencies]\nopt = ["proj-opt"]\n')
    lock_before = (add_env / "pylock.toml").read_bytes()
    torch_before = _tree_digest(_site(add_env) / "torch")
    proc = run_tf("add", "-r", str(tmp_path / "bad.txt"), "--env", str(add_env), "--find-links", str(links),
                  "--json", state=state_home)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["culprits"] == [{"package": "pins-old-torch", "version": "1.0", "requires": "torch==2.12.0"}], out
    assert (add_env / "pylock.toml").read_bytes() == lock_before and "proj-a" not in env_dists(add_env)

    proc = run_tf("add", "-r", str(tmp_path / "requirements.txt"), "--project", str(tmp_path), "--extra", "opt",
                  "--env", str(add_env), "--find-links", str(links), "--json", state=state_home)
    assert proc.returncode == 0, proc.stderr
    assert "torch>=2.13: the env has torch 2.13.0+cpu already" in proc.stderr, proc.stderr
    added = {d["name"]: d["version"] for d in json.loads(proc.stdout)["added"]}
    assert added == {"proj-a": "1.0", "proj-b": "1.0", "proj-c": "1.0", "proj-opt": "1.0"}, added  # proj-b<2 held
    assert env_dists(add_env)["torch"] == "2.13.0+cpu" and _tree_digest(_site(add_env) / "torch") == torch_before
    tool = tomllib.loads((add_env / "pylock.toml").read_text())["tool"]["torchfit"]
    assert tool["plan"]["project"][-3:] == ["proj-a", "proj-c", "proj-opt"]
    assert tool["added"][-1]["requirements"] == ["proj-a", "proj-c", "proj-opt"]


@needs_uv
@pytest.mark.slow
def test_a_new_file_that_redirects_from_https_to_plain_http_is_refused(add_env: Path, links: Path, tmp_path: Path,
                                                                       state_home: Path) -> None:
    """Issue 25: uv follows an https -> http redirect of a wheel silently; add checks the new
    files' redirects before it installs anything (exit 1, the file and the hop named), and the
    env and its lock stay as they were."""
    from tests.support.tls import make_certs, redirecting_index, trust_bundle

    certs = make_certs(tmp_path / "tls")
    wheel = make_wheel(tmp_path / "files", "redirected-pkg", "1.0")
    lock_before = (add_env / "pylock.toml").read_bytes()
    dists_before = env_dists(add_env)
    bundle = trust_bundle(certs)
    with serve_dir(tmp_path) as plain, serve_dir(tmp_path / "secure", redirecting_index(
            tmp_path / "secure", wheel, plain), tls=(certs["cert"], certs["key"])) as secure:
        proc = run_tf("add", "redirected-pkg", "--env", str(add_env), "--installer", "uv", "--find-links", str(links),
                      "--extra-index-url", f"{secure}/simple", "--json", state=state_home,
                      env={"REQUESTS_CA_BUNDLE": bundle, "SSL_CERT_FILE": bundle})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)
    assert err["reference"] == "index-unavailable", err
    assert err["error"].startswith(f"{secure}/files/{wheel.name}: redirected from https to plain http "
                                   f"({plain}/files/{wheel.name})"), err
    assert (add_env / "pylock.toml").read_bytes() == lock_before and env_dists(add_env) == dists_before


@needs_uv
@pytest.mark.slow
def test_a_pep658_metadata_that_disagrees_with_its_wheel_is_rolled_back_naming_the_file(
        add_env: Path, links: Path, tmp_path: Path, state_home: Path) -> None:
    """Issue 25's closure check, in add too: the index's `.metadata` for liar-add 1.0 says
    torch==2.13.0 (uv resolves by it), the wheel's own METADATA says torch==2.12.0. The wheel is
    what is installed and hashed into the lock, so it is the truth: add names the file, exit 1,
    and the env and its lock are as they were (the installed wheel is rolled back)."""
    from tests.support.wheels import write_index_with_metadata

    wheel = make_wheel(tmp_path / "w", "liar-add", "1.0", ["torch==2.12.0"])
    write_index_with_metadata(tmp_path / "idx", wheel,
                              b"Metadata-Version: 2.1\nName: liar-add\nVersion: 1.0\nRequires-Dist: torch==2.13.0\n\n")
    lock_before = (add_env / "pylock.toml").read_bytes()
    dists_before = env_dists(add_env)
    with serve_dir(tmp_path / "idx") as url:
        proc = run_tf("add", "liar-add", "--env", str(add_env), "--installer", "uv", "--find-links", str(links),
                      "--extra-index-url", f"{url}/simple", "--allow-insecure-index", "--json", state=state_home)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)
    assert err["error"].startswith(f"{wheel.name}: its own METADATA disagrees with the metadata the index"), err
    assert "liar-add 1.0 requires torch==2.12.0, but torch 2.13.0+cpu is installed" in err["error"], err
    assert "rolled back: removed liar-add" in proc.stderr, proc.stderr
    assert (add_env / "pylock.toml").read_bytes() == lock_before and env_dists(add_env) == dists_before


@needs_uv
@pytest.mark.slow
def test_add_torchvision_from_a_source_without_it_says_so_and_keeps_the_sources(
        add_env: Path, links: Path, torch_index: str, state_home: Path) -> None:
    """Issue 35, item 4: the env's torch source serves no torchvision at all. add said "needs another
    torch" and offered a rebuild without --torch-index-url; now it names the source and what it lacks,
    and the command keeps the source the env was built from (its lock's [tool.torchfit])."""
    lock_before = (add_env / "pylock.toml").read_bytes()
    proc = run_tf("add", "torchvision", "--env", str(add_env), "--find-links", str(links), "--json",
                  state=state_home)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["error"].startswith(f"the torch source {torch_index} serves no torchvision for torch 2.13.0+cpu"), out
    assert "another torch" not in out["error"], out
    assert f"--torch-index-url {torch_index}" in out["command"] and out["command"].endswith(" torchvision"), out
    assert f"--find-links {links}" in out["command"], out
    assert "--torch-index-url" in out["hint"] and out["command"] in out["hint"], out
    assert (add_env / "pylock.toml").read_bytes() == lock_before


@needs_uv
@pytest.mark.slow
def test_add_torchvision_takes_the_build_that_matches_the_locked_torch(
        add_env: Path, links: Path, cpu_wheel: Path, state_home: Path, tmp_path: Path) -> None:
    """(Last in this module: the shared env keeps the torchvision it adds.) Issue 28, item 3: the env has no torchvision; the matrix pairs torch 2.13.0 cpu with
    torchvision 0.28.0, which is added from the torch index (a stand-in wheel beside the real
    torch one here); torch's files stay as they are and the lock grows the companion."""
    from tests.installer.conftest import make_simple_index

    vision = make_wheel(tmp_path / "w", "torchvision", "0.28.0+cpu", ["torch==2.13.0"],
                        tag="cp311-cp311-manylinux_2_28_x86_64")
    newer = make_wheel(tmp_path / "w", "torchvision", "0.29.0+cpu", ["torch==2.14.0"],
                       tag="cp311-cp311-manylinux_2_28_x86_64")
    index = make_simple_index(tmp_path / "idx", [cpu_wheel, vision, newer], relative=True).as_uri()
    torch_before = _tree_digest(_site(add_env) / "torch")
    proc = run_tf("add", "torchvision", "--env", str(add_env), "--torch-index-url", index, "--find-links",
                  str(links), "--json", state=state_home)
    assert proc.returncode == 0, proc.stderr
    assert "torchvision 0.28.0: the build that matches torch 2.13.0+cpu" in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert [(d["name"], d["version"]) for d in out["added"]] == [("torchvision", "0.28.0+cpu")], out
    assert env_dists(add_env)["torchvision"] == "0.28.0+cpu"
    assert _tree_digest(_site(add_env) / "torch") == torch_before
    tool = tomllib.loads((add_env / "pylock.toml").read_text())["tool"]["torchfit"]
    assert tool["plan"]["torchvision"] == "0.28.0" and "torchvision" in tool["plan"]["packages"]
    assert _packages(add_env)["torchvision"]["version"] == "0.28.0+cpu"
    # another torchvision than the matching one is still refused, nothing changed
    lock_now = (add_env / "pylock.toml").read_bytes()
    proc = run_tf("add", "torchvision==0.29.0", "--env", str(add_env), "--torch-index-url", index, "--find-links",
                  str(links), state=state_home)
    assert proc.returncode == 1 and "[add-needs-other-torch]" in proc.stderr, proc.stderr
    assert (add_env / "pylock.toml").read_bytes() == lock_now


def test_add_of_a_url_over_plain_http_is_refused_without_its_credentials(tmp_path: Path) -> None:
    """Issue 25: `name @ http://...` follows the one http rule of every source (index.sources.refuse_insecure)."""
    from tests.support.cli import bad_input, run_clean

    line = bad_input(run_clean("add", "--env", str(tmp_path), "urlpkg @ http://u:S3CRET@127.0.0.1:9/urlpkg-1.0-py3-none-any.whl"))
    assert "plain http://" in line and "--allow-insecure-index" in line and "S3CRET" not in line, line


def test_add_project_bad_input_is_one_line(tmp_path: Path, state_home: Path) -> None:
    """-r/--project are read before the env is looked at, as resolve reads them: one line, exit 2."""
    env = _foreign_env(tmp_path / "plain", None)
    (tmp_path / "editable.txt").write_text("proj-a\n-e ./src\n")
    (tmp_path / "empty.txt").write_text("# nothing yet\n")
    line = one_line_error(run_tf("add", "-r", str(tmp_path / "editable.txt"), "--env", str(env), state=state_home))
    assert "editable.txt:2" in line, line
    line = one_line_error(run_tf("add", "-r", str(tmp_path / "nope.txt"), "--env", str(env), state=state_home))
    assert "nope.txt" in line and "unrecognized" not in line, line
    line = one_line_error(run_tf("add", "--project", str(tmp_path), "--env", str(env), state=state_home))
    assert "no pyproject.toml" in line, line
    line = one_line_error(run_tf("add", "-r", str(tmp_path / "empty.txt"), "--env", str(env), state=state_home))
    assert "-r FILE or --project DIR" in line, line
    # a good file, a plain venv: the env's check, after the file was read
    (tmp_path / "ok.txt").write_text("proj-a\n")
    line = one_line_error(run_tf("add", "-r", str(tmp_path / "ok.txt"), "--env", str(env), state=state_home))
    assert "not an env torchfit built" in line, line
