"""`torchfit adopt` (issue 27, item 2) on a real base env: a venv holding a torch whose version
carries NVIDIA's prerelease/local label (`2.8.0a0+5228986.nv25.08`), a real wheel built here
whose small torch/ package answers what verify's inspection reads (version, CUDA, arch list,
NCCL, cuDNN: a CPU build, so that this GPU-less host's judgement passes), installed by uv.

Adopted with a pip constraints file (PIP_CONSTRAINT), then real `torchfit add` runs (uv, tiny
wheels in a find-links directory): the constraint holds; a package pinning the release
(`torch==2.8.0`) is refused as a label-only difference, then accepted with
--accept-base-label and the ABI caveat said once; one pinning another release is refused;
the base torch's files are byte-identical throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.installer.conftest import env_dists, needs_uv, run_tf
from tests.support.cli import bad_input
from tests.support.envs import tree_digest
from tests.support.mounts import (
    SYSTEM_PYTHON,
    as_nobody,
    mounted,
    need_root,
    readable_torchfit,
    shared_dir,
)
from tests.support.wheels import make_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BASE = "2.8.0a0+5228986.nv25.08"

# What verify's inspection worker (workers/inspect_worker.py, torchfit_runtime.torch_info and
# runtime_libs) reads from torch, answered as a CPU build does.
TORCH_FILES = {
    "torch/__init__.py": f"__version__ = {BASE!r}\nfrom . import version, cuda, backends\n".encode(),
    "torch/version.py": b"cuda = None\nhip = None\ngit_version = '5228986'\n",
    "torch/cuda/__init__.py": (b"from . import nccl\n"
                               b"def get_arch_list():\n    return []\n"
                               b"def is_available():\n    return False\n"
                               b"def device_count():\n    return 0\n"
                               b"def init():\n    raise RuntimeError('Torch not compiled with CUDA enabled')\n"),
    "torch/cuda/nccl.py": b"def version():\n    raise AttributeError('no _nccl_version: a CPU build')\n",
    "torch/backends/__init__.py": b"from . import cudnn\n",
    "torch/backends/cudnn.py": b"def version():\n    return None\n",
}


def _uv() -> str:
    from torchfit.lock.uvbin import find_uv
    from torchfit.runner import Runner

    uv = find_uv(Runner())
    assert uv
    return uv


@pytest.fixture
def base_env(tmp_path: Path) -> Path:
    """A venv with the labelled torch installed by uv (no torchfit involved), as an image has it."""
    wheels = tmp_path / "base-wheels"
    make_wheel(wheels, "torch", BASE, files=TORCH_FILES)
    prefix = tmp_path / "base"
    subprocess.run([_uv(), "venv", "--python", sys.executable, str(prefix)], check=True, capture_output=True)
    subprocess.run([_uv(), "pip", "install", "--python", str(prefix / "bin" / "python"), "--no-index",
                    "--find-links", str(wheels), f"torch=={BASE}"], check=True, capture_output=True)
    return prefix


@pytest.fixture
def links(tmp_path: Path) -> Path:
    d = tmp_path / "links"
    make_wheel(d, "pure-pkg", "1.0")
    make_wheel(d, "pure-pkg", "2.0")
    make_wheel(d, "pins-release", "1.0", ["torch==2.8.0"])
    make_wheel(d, "pins-other", "1.0", ["torch==2.9.0"])
    make_wheel(d, "wants-torch", "1.0", ["torch>=2.7"])
    return d


def _site(prefix: Path) -> Path:
    return next((prefix / "lib").glob("python3.*")) / "site-packages"


@needs_uv
@pytest.mark.slow
def test_adopt_a_labelled_base_then_add_around_it(base_env: Path, links: Path, tmp_path: Path) -> None:
    constraints = tmp_path / "constraint.txt"
    constraints.write_text(f"# as NVIDIA's images write it\ntorch=={BASE}\npure-pkg<2\n")
    state = tmp_path / "state"
    env = {"PIP_CONSTRAINT": str(constraints)}
    torch_before = tree_digest(_site(base_env) / "torch")

    proc = run_tf("adopt", "--env", str(base_env), "--json", state=state, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    from tests.cli.ui.test_jsonout import validate

    assert validate(out) == "adopt"  # its published schema, docs/schemas/adopt.schema.json
    assert out["family"] == {"torch": BASE} and out["label"] == "a0+5228986.nv25.08", out
    assert out["constraints"] == [f"torch=={BASE}", "pure-pkg<2"] and out["torch"]["cuda"] is None
    tool = tomllib.loads((base_env / "pylock.toml").read_text())["tool"]["torchfit"]
    assert tool["base"]["family"] == {"torch": BASE} and tool["expected"]["torch"] == BASE
    assert tool["base"]["constraint_files"] == [str(constraints)]

    # the image's constraint holds: pure-pkg 2.0 exists, 1.0 is what fits pure-pkg<2
    proc = run_tf("add", "pure-pkg", "wants-torch", "--env", str(base_env), "--find-links", str(links), "--json",
                  state=state, timeout=300)
    assert proc.returncode == 0, proc.stderr
    added = {d["name"]: d["version"] for d in json.loads(proc.stdout)["added"]}
    assert added == {"pure-pkg": "1.0", "wants-torch": "1.0"}, added
    assert env_dists(base_env)["torch"] == BASE

    # torch==2.8.0: the release the base is a labelled build of: named as such, refused
    lock_before = (base_env / "pylock.toml").read_bytes()
    proc = run_tf("add", "pins-release", "--env", str(base_env), "--find-links", str(links), state=state,
                  timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "pins-release 1.0 requires torch==2.8.0" in proc.stderr, proc.stderr
    assert "prerelease/local label" in proc.stderr and "--accept-base-label" in proc.stderr
    assert (base_env / "pylock.toml").read_bytes() == lock_before and "pins-release" not in env_dists(base_env)

    # another release: refused, and no label to accept
    proc = run_tf("add", "pins-other", "--env", str(base_env), "--find-links", str(links), "--accept-base-label",
                  state=state, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "pins-other 1.0 requires torch==2.9.0" in proc.stderr and "never replaced" in proc.stderr

    # with the flag: accepted, the caveat once, the base's torch untouched
    proc = run_tf("add", "pins-release", "--env", str(base_env), "--find-links", str(links), "--accept-base-label",
                  state=state, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("may not match its ABI") == 1, proc.stderr
    assert env_dists(base_env)["pins-release"] == "1.0" and env_dists(base_env)["torch"] == BASE
    assert tree_digest(_site(base_env) / "torch") == torch_before
    tool = tomllib.loads((base_env / "pylock.toml").read_text())["tool"]["torchfit"]
    assert tool["added"][-1]["accepted-base-label"] == ["pins-release 1.0: torch==2.8.0"]
    assert tool["base"]["family"] == {"torch": BASE}
    # a later add keeps what was accepted (its pin is in the project) without the flag again
    proc = run_tf("add", "pure-pkg", "--env", str(base_env), "--find-links", str(links), state=state, timeout=300)
    assert proc.returncode == 0 and "nothing to do" in proc.stderr, proc.stderr
    # the lock is not one to build an env from: its torch is the installed one
    proc = run_tf("install", "--lock", str(base_env / "pylock.toml"), "--prefix", str(tmp_path / "copy"),
                  state=state, timeout=300)
    assert proc.returncode == 2 and "the lock of an adopted env" in proc.stderr, proc.stderr


@needs_uv
@pytest.mark.slow
def test_a_constraint_the_base_does_not_meet_is_refused(base_env: Path, tmp_path: Path) -> None:
    constraints = tmp_path / "constraint.txt"
    constraints.write_text("torch==2.9.0\n")
    proc = run_tf("adopt", "--env", str(base_env), state=tmp_path / "state",
                  env={"PIP_CONSTRAINT": str(constraints)}, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "say torch==2.9.0" in proc.stderr and "[adopt-refused]" in proc.stderr
    assert not (base_env / "pylock.toml").exists()


def test_adopt_bad_input_is_one_line(tmp_path: Path) -> None:
    from tests.installer.conftest import one_line_error

    line = one_line_error(run_tf("adopt", "--env", str(tmp_path / "nope"), state=tmp_path, timeout=60))
    assert "no such directory" in line
    (tmp_path / "c.txt").write_text("torch==\n")
    (tmp_path / "e" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, tmp_path / "e" / "bin" / "python")
    line = one_line_error(run_tf("adopt", "--env", str(tmp_path / "e"), state=tmp_path, timeout=60,
                                 env={"PIP_CONSTRAINT": str(tmp_path / "c.txt")}))
    assert "c.txt:1: not a requirement" in line


@needs_uv
@pytest.mark.slow
def test_add_a_requirements_file_around_an_adopted_base(base_env: Path, links: Path, tmp_path: Path) -> None:
    """Issue 27, item 2: `add -r FILE` fits a whole project around the adopted torch. The file
    names pkg-a, which needs pkg-b, which pins the release (torch==2.8.0) two levels down: the
    label-only difference is named and refused, then accepted with --accept-base-label; the
    project's own `torch==2.8.0` line follows the same rule; the base's torch never moves."""
    make_wheel(links, "pkg-a", "1.0", ["pkg-b>=1"])
    make_wheel(links, "pkg-b", "1.0", ["torch==2.8.0"])
    make_wheel(links, "pkg-b", "2.0", ["torch==2.8.0"])
    state = tmp_path / "state"
    torch_before = tree_digest(_site(base_env) / "torch")
    proc = run_tf("adopt", "--env", str(base_env), state=state, timeout=300)
    assert proc.returncode == 0, proc.stderr
    project = tmp_path / "proj"
    project.mkdir()
    (project / "constraints.txt").write_text("pkg-b<2\n")
    (project / "requirements.txt").write_text("-c constraints.txt\npkg-a  # needs pkg-b, which pins torch==2.8.0\n")
    req = str(project / "requirements.txt")
    lock_before = (base_env / "pylock.toml").read_bytes()

    proc = run_tf("add", "-r", req, "--env", str(base_env), "--find-links", str(links), state=state, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "pkg-b 1.0 requires torch==2.8.0" in proc.stderr, proc.stderr
    assert "prerelease/local label" in proc.stderr and "--accept-base-label" in proc.stderr
    assert (base_env / "pylock.toml").read_bytes() == lock_before and "pkg-a" not in env_dists(base_env)

    # the project's own torch line, the release of the labelled base: the same rule, named as asked for
    (project / "more.txt").write_text("-r requirements.txt\ntorch==2.8.0\n")
    more = str(project / "more.txt")
    proc = run_tf("add", "-r", more, "--env", str(base_env), "--find-links", str(links), state=state, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "torch==2.8.0 is asked for" in proc.stderr and "prerelease/local label" in proc.stderr, proc.stderr
    assert (base_env / "pylock.toml").read_bytes() == lock_before

    proc = run_tf("add", "-r", more, "--env", str(base_env), "--find-links", str(links), "--accept-base-label",
                  "--json", state=state, timeout=300)
    assert proc.returncode == 0, proc.stderr
    added = {d["name"]: d["version"] for d in json.loads(proc.stdout)["added"]}
    assert added == {"pkg-a": "1.0", "pkg-b": "1.0"}, added  # pkg-b<2: the file's -c constraint held
    assert proc.stderr.count("may not match its ABI") == 1, proc.stderr
    assert env_dists(base_env)["torch"] == BASE and tree_digest(_site(base_env) / "torch") == torch_before
    tool = tomllib.loads((base_env / "pylock.toml").read_text())["tool"]["torchfit"]
    assert tool["plan"]["project"] == ["pkg-a"] and tool["base"]["family"] == {"torch": BASE}
    assert "pkg-b 1.0: torch==2.8.0" in tool["added"][-1]["accepted-base-label"]


@needs_uv
@pytest.mark.slow
def test_a_base_whose_own_packages_are_not_whole_still_takes_an_add(base_env: Path, links: Path,
                                                                     tmp_path: Path) -> None:
    """Images ship with `pip check` failures of their own (a package whose requirement the image
    left out). add's closure check answers for what add installed, not for the base: a pure
    package is added (tests/installer/test_add.py: a new wheel that wants what the env lacks is
    still refused)."""
    state = tmp_path / "state"
    broken = tmp_path / "broken"
    make_wheel(broken, "image-extra", "1.0", ["left-out-dep>=1"])
    subprocess.run([_uv(), "pip", "install", "--python", str(base_env / "bin" / "python"), "--no-index", "--no-deps",
                    "--find-links", str(broken), "image-extra"], check=True, capture_output=True)
    assert run_tf("adopt", "--env", str(base_env), state=state, timeout=300).returncode == 0
    proc = run_tf("add", "pure-pkg==1.0", "--env", str(base_env), "--find-links", str(links), "--json", state=state,
                  timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [d["name"] for d in json.loads(proc.stdout)["added"]] == ["pure-pkg"]


# --- issue 34: an env as an image or a careless user leaves it ------------------------------------


def hand_env(prefix: Path, version: str, *, python: str = sys.executable, prelude: bytes = b"") -> Path:
    """A venv whose torch was put there by hand (no installer would take these versions): the
    same small torch package, its __version__ and its dist-info's Version both `version`;
    `prelude`: code its import runs first."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(prefix)], check=True, capture_output=True, timeout=120)
    site = _site(prefix)
    for rel, data in TORCH_FILES.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data.replace(repr(BASE).encode(), repr(version).encode()))
    init = site / "torch" / "__init__.py"
    init.write_bytes(prelude + init.read_bytes())
    info = site / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("")
    return prefix


@pytest.mark.parametrize("version", ["unknown", "2.8.0-custom build", "2.8.0+"])
def test_a_torch_whose_version_is_not_pep440_is_refused_in_one_line(tmp_path: Path, version: str) -> None:
    """Issue 34 A1: such a torch was an internal InvalidVersion after the whole inspection."""
    prefix = hand_env(tmp_path / "env", version)
    proc = run_tf("adopt", "--env", str(prefix), state=tmp_path / "state", timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert f"torch's version {version!r} is not a PEP 440 version" in first and "[adopt-refused]" in first, first
    assert not (prefix / "pylock.toml").exists()


@needs_uv
def test_a_base_at_an_unnormalised_version_takes_an_add(links: Path, tmp_path: Path) -> None:
    """Issue 34 A2: `2.8.0+cu128-custom` is valid PEP 440 (normalised `2.8.0+cu128.custom`); its
    stand-in wheel was named with the version as written, which uv reads as no torch at all, so
    every package was refused as "needs another torch"."""
    prefix = hand_env(tmp_path / "env", "2.8.0+cu128-custom")
    state = tmp_path / "state"
    assert run_tf("adopt", "--env", str(prefix), state=state, timeout=120).returncode == 0
    proc = run_tf("add", "wants-torch", "--env", str(prefix), "--find-links", str(links), "--json", state=state,
                  timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [d["name"] for d in json.loads(proc.stdout)["added"]] == ["wants-torch"]
    assert env_dists(prefix)["torch"] == "2.8.0+cu128-custom"


def test_an_import_that_stalls_is_said_as_a_stall(tmp_path: Path) -> None:
    """Issue 34 A3: an import of torch that hangs past --timeout was "no torch to adopt"."""
    # an import that stalls, as a wedged driver or a hung NFS mount makes it
    prefix = hand_env(tmp_path / "env", BASE, prelude=b"import time\ntime.sleep(120)\n")
    proc = run_tf("adopt", "--env", str(prefix), "--timeout", "3", state=tmp_path / "state", timeout=120)
    assert proc.returncode == 1, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert "no torch to adopt" not in first, first
    assert "could not be read: the inspection stalled at stage 'import-torch' for 3 s" in first, first


def test_an_env_this_user_cannot_write_is_refused_before_the_inspection(tmp_path: Path) -> None:
    """Issue 34 A4: adopt of another user's env (root's, mode 0755) ran the whole inspection,
    then failed writing its lock: an internal PermissionError. Now one line, exit 2, before any
    inspection: its torch's import leaves a mark, and there is none."""
    need_root()
    with shared_dir(0o755) as base:
        pythonpath = readable_torchfit(base)
        marks = base / "marks"
        marks.mkdir(mode=0o1777)
        marks.chmod(0o1777)
        prelude = f"open({str(marks / 'imported')!r}, 'w').close()\n".encode()
        prefix = hand_env(base / "env", BASE, python=SYSTEM_PYTHON, prelude=prelude)
        subprocess.run(["chmod", "-R", "a+rX", str(prefix)], check=True)
        proc = as_nobody(pythonpath, "adopt", "--env", str(prefix), "--timeout", "30", home=base, timeout=60)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "adopt writes its lock there" in lines[0] and "may not write in it" in lines[0], lines[0]
        assert not (prefix / "pylock.toml").exists() and not (marks / "imported").exists()


@needs_uv
def test_a_base_package_whose_version_is_not_pep440_is_named_by_add(links: Path, tmp_path: Path) -> None:
    """Beside A1: a distribution of the base (not torch) at version `unknown` was pinned as
    `weird==unknown` in uv's constraints, and uv refused the file; it is left unpinned (never
    replaced all the same), so what stops uv is said as it is: that distribution's dist-info."""
    prefix = hand_env(tmp_path / "env", "2.8.0")
    weird = _site(prefix) / "weird-unknown.dist-info"
    weird.mkdir()
    (weird / "METADATA").write_text("Metadata-Version: 2.1\nName: weird\nVersion: unknown\n\n")
    state = tmp_path / "state"
    # an image constraint on it cannot be judged: refused, naming both (was InvalidVersion)
    constraints = tmp_path / "constraint.txt"
    constraints.write_text("weird<2\n")
    proc = run_tf("adopt", "--env", str(prefix), state=state, env={"PIP_CONSTRAINT": str(constraints)}, timeout=120)
    assert proc.returncode == 1 and "internal error" not in proc.stderr, proc.stderr
    assert "say weird<2, and" in proc.stderr and "weird 'unknown' is not a PEP 440 version" in proc.stderr
    assert run_tf("adopt", "--env", str(prefix), state=state, timeout=120).returncode == 0
    proc = run_tf("add", "wants-torch", "--env", str(prefix), "--find-links", str(links), state=state, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "weird-unknown.dist-info" in proc.stderr and "constraints.txt" not in proc.stderr, proc.stderr
    assert "wants-torch" not in env_dists(prefix)


def test_an_env_on_a_read_only_mount_is_refused_before_the_inspection(tmp_path: Path) -> None:
    """Issue 34 A4, for root too: an image's env mounted read-only (EROFS stops root as well)."""
    prefix = hand_env(tmp_path / "env", BASE, prelude=f"open({str(tmp_path / 'imported')!r}, 'w').close()\n".encode())
    (tmp_path / "ro").mkdir()
    with mounted(["--bind", "-o", "ro", str(prefix)], tmp_path / "ro") as ro:
        if os.access(ro, os.W_OK):
            pytest.skip("the bind mount is not read-only here")
        line = bad_input(run_tf("adopt", "--env", str(ro), state=tmp_path / "state", timeout=120))
    assert "adopt writes its lock there" in line and "it is on a read-only filesystem" in line, line
    assert not (tmp_path / "imported").exists()
