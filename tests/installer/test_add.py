"""`torchfit add` on a real CPU project env (torch 2.13.0 from the local wheel, uv, a package
pinning torch==2.13.0 and a pure-Python one): tiny wheels with real METADATA in a find-links
directory; one pinning torch==2.12.0 is refused (torch's files and pylock.toml byte-identical
after), compatible ones are installed and locked with sha256 and `verify --lock` passes, a
locked dependency moves only when it must; and the bad input that never touches anything
(one line, exit 2)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
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
from tests.support.wheels import make_wheel, sha256_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.filterwarnings("ignore")


def _tree_digest(root: Path) -> str:
    """One sha256 over every file under `root` (relative path and bytes), e.g. the env's torch/."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes() if not path.is_symlink() else os.readlink(path).encode())
    return h.hexdigest()


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

    from torchfit.installer.add import AddJob
    from torchfit.lock.model import Artifact, Lock, LockedDist
    from torchfit.lock.uv import uv_project
    from torchfit.progress import Progress

    torch = LockedDist("torch", "2.8.0+cu126", (Artifact("wheel", "a" * 64, "https://x/torch.whl"),))
    lock = Lock(packages=(torch,), tool={"plan": {"variant": "cu126", "routed": ["some-routed"]}})
    job = AddJob(prefix="/env", lock=lock, requirements=[], sources=None, installer="uv",  # type: ignore[arg-type]
                 observer=Progress(), timeout=60)
    routed = job._routed({"torch": torch}, [Requirement("xformers"), Requirement("pure-pkg")])
    assert routed == ["some-routed", "xformers"]
    doc = tomllib.loads(uv_project(["torch==2.8.0+cu126", "xformers", "pure-pkg"], "https://idx/cu126", routed))
    assert set(doc["tool"]["uv"]["sources"]) == {"torch", "xformers"}
    # a CPU env: PyPI's xformers is no CPU build either, but the torch index has none: not routed
    cpu = LockedDist("torch", "2.13.0+cpu", (Artifact("wheel", "a" * 64, "https://x/torch.whl"),))
    job.lock = Lock(packages=(cpu,), tool={"plan": {"variant": "cpu"}})
    assert job._routed({"torch": cpu}, [Requirement("xformers")]) == []


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
