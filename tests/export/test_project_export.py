"""`torchfit export` carries the project (issue 18): each format rendered for a plan with a
project and for a lock with project packages, the torch family still routed to its index;
the uv format fed to the real uv against two PEP 503 indexes served on 127.0.0.1 (a "torch"
index and a "PyPI" holding a decoy torch without a label), which takes the family from the
torch index and the project from PyPI; and `torchfit export` resolving a project end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_facts
from tests.export.conftest import need_uv
from tests.support.cli import run_cli
from tests.support.wheels import make_wheel, serve_dir, write_index
from torchfit._backports import tomllib
from torchfit.compat.facts import facts_to_json
from torchfit.compat.plan import plan_from_json
from torchfit.export import render
from torchfit.export.stack import stack_from_lock, stack_from_plan
from torchfit.lock.model import Artifact, Lock, LockedDist
from torchfit.lock.pylock import file_name, parse_lock, render_lock
from torchfit.lock.tool import ToolTable
from torchfit.runner import Runner

ROOT = Path(__file__).resolve().parents[2]
TORCH_URL = "https://download.pytorch.org/whl/cpu"
PYPI = "https://pypi.example.org/simple"
PROJECT = ("needs-torch", "pure-pkg>=1")


def _plan(**extra: Any) -> Any:
    data = {"python": "3.11", "python_version": "3.11.7", "torch": "2.13.0", "variant": "cpu",
            "index_url": TORCH_URL, "packages": ["torch"]}
    data.update(extra)
    return plan_from_json(data)


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("# ") and ln != "#"]


def test_a_plan_with_a_project_in_each_format() -> None:
    plan = _plan(project=list(PROJECT), constraints=["helper-dep<2"],
                 resolved={"torch": "2.13.0+cpu", "needs-torch": "1.0", "pure-pkg": "1.0", "helper-dep": "1.0"})
    stack = stack_from_plan(plan, arches=["x86_64"], glibc="2.28")
    assert stack.project == PROJECT and stack.resolved == (("helper-dep", "1.0"), ("needs-torch", "1.0"),
                                                           ("pure-pkg", "1.0"))
    req = render("requirements", stack, pypi_url=PYPI)
    assert _lines(req) == [f"--index-url {TORCH_URL}", f"--extra-index-url {PYPI}", "torch==2.13.0+cpu",
                           "needs-torch", "pure-pkg>=1",
                           "helper-dep==1.0", "needs-torch==1.0", "pure-pkg==1.0"]
    assert "# the project, as asked\nneeds-torch\npure-pkg>=1\n" in req
    doc = tomllib.loads(render("uv", stack, pypi_url=PYPI))
    assert doc["project"]["dependencies"] == ["torch==2.13.0+cpu", *PROJECT]
    assert doc["tool"]["uv"]["constraint-dependencies"] == ["helper-dep<2", "helper-dep==1.0", "needs-torch==1.0",
                                                            "pure-pkg==1.0"]
    assert doc["tool"]["uv"]["sources"] == {"torch": {"index": "pytorch-cpu"}}
    explicit = [i for i in doc["tool"]["uv"]["index"] if i.get("explicit")]
    assert explicit == [{"name": "pytorch-cpu", "url": TORCH_URL, "explicit": True}]
    # a project without a resolved set: the requirements as asked, the constraints named
    bare = stack_from_plan(_plan(project=list(PROJECT), constraints=["helper-dep<2"]))
    req = render("requirements", bare, pypi_url=PYPI)
    assert _lines(req)[2:] == ["torch==2.13.0+cpu", *PROJECT] and "#   helper-dep<2" in req
    # no project: the file is today's, the variant index alone
    assert _lines(render("requirements", stack_from_plan(_plan()))) == [f"--index-url {TORCH_URL}",
                                                                        "torch==2.13.0+cpu"]


def _dist(name: str, version: str, sha: str, index: str | None = None) -> LockedDist:
    url = f"https://files.example.org/{name.replace('-', '_')}-{version.replace('+', '%2B')}-py3-none-any.whl"
    return LockedDist(name, version, (Artifact("wheel", sha * 64, url, None, file_name(url)),), index=index)


def _project_lock() -> Lock:
    """A lock as `torchfit install` + `torchfit add` leave it: the project in [tool.torchfit.plan]."""
    local = LockedDist("local-pkg", "1.0", (Artifact("wheel", "e" * 64, "file:///srv/wheels/local_pkg-1.0-py3-none-any.whl",
                                                     None, "local_pkg-1.0-py3-none-any.whl"),))
    packages = (_dist("torch", "2.13.0+cpu", "a", TORCH_URL), _dist("sympy", "1.14.0", "b"),
                _dist("needs-torch", "1.0", "c"), _dist("pure-pkg", "1.0", "d"), local)
    plan = {"python": "3.11", "python_version": "3.11.7", "torch": "2.13.0", "variant": "cpu",
            "index_url": TORCH_URL, "packages": ["torch"], "project": list(PROJECT)}
    tool = ToolTable.from_toml({"schema": 1, "torch-index-url": TORCH_URL, "plan": plan}, "test")
    text = render_lock(Lock(packages=packages, tool=tool, requires_python="==3.11.*"))
    return parse_lock(text, "pylock.toml")  # what a reader of the file gets


def test_a_lock_with_project_packages_in_each_format() -> None:
    stack = stack_from_lock(_project_lock(), "pylock.toml")
    assert stack.project == PROJECT
    req = render("requirements", stack, pypi_url=PYPI)
    # a file from a find-links directory (uv's lock names no index for it): that directory
    assert _lines(req)[:3] == [f"--index-url {TORCH_URL}", f"--extra-index-url {PYPI}",
                               "--find-links /srv/wheels"]
    for name, version, sha in (("needs-torch", "1.0", "c"), ("pure-pkg", "1.0", "d"), ("torch", "2.13.0+cpu", "a")):
        assert f"{name}=={version} \\\n    --hash=sha256:{sha * 64}" in req
    doc = tomllib.loads(render("uv", stack, pypi_url=PYPI))
    assert doc["project"]["dependencies"] == ["torch==2.13.0+cpu", *PROJECT]
    assert doc["tool"]["uv"]["constraint-dependencies"] == ["local-pkg==1.0", "needs-torch==1.0", "pure-pkg==1.0",
                                                            "sympy==1.14.0"]
    assert doc["tool"]["uv"]["sources"] == {"torch": {"index": "pytorch-cpu"}}
    lock = tomllib.loads(render("pylock", stack))
    by_name = {p["name"]: p for p in lock["packages"]}
    assert by_name["torch"]["index"] == TORCH_URL and by_name["needs-torch"]["version"] == "1.0"
    assert by_name["pure-pkg"]["wheels"][0]["hashes"]["sha256"] == "d" * 64
    assert lock["tool"]["torchfit"]["plan"]["project"] == list(PROJECT)


# --- the real uv, two indexes on 127.0.0.1 ---------------------------------------------------


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """http://127.0.0.1:PORT/{torch,pypi}/simple: the CPU torch on one, a decoy torch and the project on the other."""
    root = tmp_path_factory.mktemp("served")
    wheels = tmp_path_factory.mktemp("wheels")
    write_index(root / "pypi", [
        make_wheel(wheels / "p", "torch", "2.13.0"),  # PyPI's own build: must never be taken
        make_wheel(wheels / "p", "needs-torch", "1.0", ["torch==2.13.0"]),
        make_wheel(wheels / "p", "pure-pkg", "1.0", ["helper-dep"]),
        make_wheel(wheels / "p", "helper-dep", "1.0"),
        make_wheel(wheels / "p", "helper-dep", "2.0"),
        make_wheel(wheels / "p", "accel-pkg", "1.0"),  # PyPI's build of a companion: another CUDA
    ])
    # the torch index's build of it (the same version: only the routing tells them apart)
    accel = make_wheel(wheels / "t2", "accel-pkg", "1.0", ["pure-pkg"])
    write_index(root / "torch", [make_wheel(wheels / "t", "torch", "2.13.0+cpu"), accel])
    with serve_dir(root) as url:
        yield {"torch": f"{url}/torch/simple", "pypi": f"{url}/pypi/simple"}


def _uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env["UV_NO_CONFIG"] = "1"
    return env


def _compiled(path: Path) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in tomllib.loads(path.read_text())["packages"]}


def test_the_uv_export_of_a_project_takes_torch_from_its_index(tmp_path: Path, indexes: dict[str, str]) -> None:
    uv = need_uv()
    plan = _plan(index_url=indexes["torch"], project=list(PROJECT), constraints=["helper-dep<2"])
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text(render("uv", stack_from_plan(plan), pypi_url=indexes["pypi"]))
    out = tmp_path / "pylock.compiled.toml"
    run = subprocess.run([uv, "pip", "compile", str(project / "pyproject.toml"), "--format", "pylock.toml",
                          "-o", str(out), "--no-header", "--quiet", "--python-version", "3.11",
                          "--python-platform", "x86_64-manylinux_2_28", "--default-index", indexes["pypi"]],
                         capture_output=True, text=True, timeout=300, env=_uv_env())
    assert run.returncode == 0, run.stderr
    got = _compiled(out)
    assert got["torch"]["version"] == "2.13.0+cpu"
    assert got["torch"]["wheels"][0]["url"].startswith(indexes["torch"].rsplit("/simple", 1)[0] + "/files/")
    for name in ("needs-torch", "pure-pkg", "helper-dep"):
        assert got[name]["wheels"][0]["url"].startswith(indexes["pypi"].rsplit("/simple", 1)[0] + "/files/")
    # the project workflow (uv lock in the directory) reads the file's own indexes
    run = subprocess.run([uv, "lock", "--directory", str(project)], capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in _uv_env().items() if k != "UV_NO_CONFIG"})
    assert run.returncode == 0, run.stderr
    lock = tomllib.loads((project / "uv.lock").read_text())
    torch = next(p for p in lock["package"] if p["name"] == "torch")
    assert torch["version"] == "2.13.0+cpu" and torch["source"] == {"registry": indexes["torch"]}
    versions = {p["name"]: p["version"] for p in lock["package"]}
    assert versions["needs-torch"] == "1.0" and versions["pure-pkg"] == "1.0"
    assert versions["helper-dep"] == "1.0"  # the project's constraint (helper-dep<2) held


def test_export_resolves_a_project_end_to_end(tmp_path: Path, indexes: dict[str, str]) -> None:
    """`torchfit export` with project requirements: the joint resolution, uv's whole set, each format."""
    need_uv()
    facts = tmp_path / "cpu-box.json"
    facts.write_text(json.dumps(facts_to_json(make_facts(driver=None, gpus=[], glibc="2.35", pythons=["3.11.7"]))))
    env = {"PYTHONPATH": str(ROOT / "src"), "PIP_CONFIG_FILE": os.devnull, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    common = ["--facts", str(facts), "--variant", "cpu", "torch==2.13.0", *PROJECT,
              "--torch-index-url", indexes["torch"], "--index-url", indexes["pypi"], "--allow-insecure-index"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "TORCHFIT_"))}
    proc = run_cli("export", "--format", "uv", *common, env=env, base_env=base, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = tomllib.loads(proc.stdout)
    assert doc["project"]["dependencies"] == ["torch==2.13.0+cpu", *PROJECT]
    assert set(doc["tool"]["uv"]["constraint-dependencies"]) == {"needs-torch==1.0", "pure-pkg==1.0",
                                                                 "helper-dep==2.0"}
    assert doc["tool"]["uv"]["sources"] == {"torch": {"index": "pytorch-cpu"}}
    proc = run_cli("export", "--format", "requirements", *common, env=env, base_env=base, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _lines(proc.stdout) == [f"--index-url {indexes['torch']}", f"--extra-index-url {indexes['pypi']}",
                                   "torch==2.13.0+cpu", *PROJECT, "helper-dep==2.0", "needs-torch==1.0",
                                   "pure-pkg==1.0"]
    proc = run_cli("export", "--format", "pylock", *common, env=env, base_env=base, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lock = tomllib.loads(proc.stdout)
    by_name = {p["name"]: p for p in lock["packages"]}
    assert by_name["torch"]["version"] == "2.13.0+cpu" and by_name["torch"]["index"] == indexes["torch"]
    assert by_name["needs-torch"]["index"] == indexes["pypi"] and len(by_name["pure-pkg"]["wheels"]) == 1
    assert lock["tool"]["torchfit"]["plan"]["project"] == list(PROJECT)


def test_the_pylock_export_of_a_project_keeps_its_constraints(indexes: dict[str, str]) -> None:
    """`--format pylock` from a plan locks with `uv pip compile`, which ignores [tool.uv]
    constraint-dependencies: the project's constraints reach it with -c. A routed package
    (a companion whose binary is the torch index's) comes from the torch index."""
    need_uv()
    from torchfit.export.uvlock import lock_with_uv

    plan = _plan(index_url=indexes["torch"], project=[*PROJECT, "accel-pkg"], constraints=["helper-dep<2"],
                 routed=["accel-pkg"])
    stack = lock_with_uv(stack_from_plan(plan, arches=["x86_64"], glibc="2.28"), Runner(), pypi_url=indexes["pypi"])
    lock = tomllib.loads(render("pylock", stack))
    by_name = {p["name"]: p for p in lock["packages"]}
    assert by_name["helper-dep"]["version"] == "1.0" and by_name["helper-dep"]["index"] == indexes["pypi"]
    assert by_name["torch"]["version"] == "2.13.0+cpu" and by_name["torch"]["index"] == indexes["torch"]
    assert lock["tool"]["torchfit"]["plan"]["project"] == [*PROJECT, "accel-pkg"]
    assert lock["tool"]["torchfit"]["plan"]["constraints"] == ["helper-dep<2"]
    # the routed companion: the torch index's build (its METADATA requires pure-pkg), not PyPI's
    accel = by_name["accel-pkg"]
    assert accel["index"] == indexes["torch"]
    assert accel["wheels"][0]["url"].startswith(indexes["torch"].rsplit("/simple", 1)[0] + "/files/")


def test_a_routed_companion_is_sourced_from_the_torch_index() -> None:
    """xformers' cu126 binary is the torch index's (Plan.routed): the uv export routes it there,
    as a direct dependency (uv honours sources for those only) even when only vllm asked for it."""
    plan = _plan(variant="cu126", index_url="https://download.pytorch.org/whl/cu126", project=["vllm"],
                 routed=["xformers"], resolved={"vllm": "0.10.2", "xformers": "0.0.32.post2"})
    doc = tomllib.loads(render("uv", stack_from_plan(plan)))
    assert doc["project"]["dependencies"] == ["torch==2.13.0+cu126", "vllm", "xformers==0.0.32.post2"]
    assert doc["tool"]["uv"]["sources"] == {"torch": {"index": "pytorch-cu126"}, "xformers": {"index": "pytorch-cu126"}}
    assert "xformers: the binary for this build is on the cu126 index" in render("requirements", stack_from_plan(plan))


def test_the_pylock_export_of_a_project_reads_the_sources_resolve_reads(tmp_path: Path, indexes: dict[str, str]) -> None:
    """Issue 25: a package found only in a --find-links directory was found by resolve and every
    other format, and "not found" by `--format pylock`, whose uv step took the default index alone."""
    need_uv()
    links = tmp_path / "links"
    make_wheel(links, "only-here", "1.0", ["pure-pkg"])
    facts = tmp_path / "cpu-box.json"
    facts.write_text(json.dumps(facts_to_json(make_facts(driver=None, gpus=[], glibc="2.35", pythons=["3.11.7"]))))
    env = {"PYTHONPATH": str(ROOT / "src"), "PIP_CONFIG_FILE": os.devnull, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    base = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "TORCHFIT_"))}
    proc = run_cli("export", "--format", "pylock", "--facts", str(facts), "--variant", "cpu", "torch==2.13.0",
                   "only-here", "--torch-index-url", indexes["torch"], "--index-url", indexes["pypi"],
                   "--find-links", str(links), "--allow-insecure-index", env=env, base_env=base, timeout=300)
    assert proc.returncode == 0, proc.stderr
    by_name = {p["name"]: p for p in tomllib.loads(proc.stdout)["packages"]}
    assert by_name["only-here"]["version"] == "1.0" and by_name["pure-pkg"]["version"] == "1.0"
    assert by_name["torch"]["version"] == "2.13.0+cpu"
