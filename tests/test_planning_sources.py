"""Issue 33, class 9 and 7: the user's own sources decide where a companion is looked for and
what a torch wheel is; a project's own wheel pages (PyG's) are offered before any build.

As in tests/test_planning.py: tiny wheels with real METADATA on local sources (PEP 503 trees,
flat directories, a page served on 127.0.0.1), real uv, `resolve --offline` where the sources
are all file://.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.cli import run_cli
from tests.support.wheels import make_wheel, serve_dir, write_index, write_sdist
from tests.test_planning import CP311, DRIVER_570, PROJECTS, resolve, torch_tree

# An H100 host on driver 560: torch 2.8.0's cu126 build runs fully (the matrix), cu128 does not.
DRIVER_560 = ("--assume", "gpu=sm_90", "--assume", "driver=560.35.05", "--assume", "python=3.11",
              "--assume", "glibc=2.36", "--assume", "arch=x86_64")


# -- class 9a: a companion the torch mirror does not hold is looked for in the user's other sources --


def test_a_companion_the_torch_mirror_lacks_comes_from_the_sites_index_even_pinned(tmp_path: Path) -> None:
    # companions.toml: xformers 0.0.32.post2's cu126 binary is download.pytorch.org's (PyPI's is cu128),
    # so it is routed to the torch index. This site's torch mirror holds the family only; the site's
    # own index (--index-url) has xformers.
    mirror = torch_tree(tmp_path / "mirror", "cu126", ["2.8.0"])
    site = write_index(tmp_path / "site", [make_wheel(tmp_path / "site-wheels", "xformers", "0.0.32.post2",
                                                       ["torch==2.8.0"], tag=CP311)])
    for req in ("xformers", "xformers==0.0.32.post2"):
        out = resolve(*DRIVER_560, req, "--index-url", site.as_uri(), "--torch-index-url", mirror.as_uri())
        assert (out["torch"], out["variant"]) == ("2.8.0", "cu126"), out
        assert out["resolved"]["xformers"] == "0.0.32.post2", out
        assert out["routed"] == [], out  # install must look for it where it was found
        text = " ".join(out["warnings"])
        assert "xformers" in text and "not on the torch index" in text, out["warnings"]


# -- class 9b: an unlabelled torch wheel is the variant its METADATA says ------------------------------

TORCH_280 = PROJECTS / "torch" / "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata"
# A P100 (sm_60) on driver 560: torch 2.8.0's cu126 build has sm_60 (data/matrix.toml), its cu128 does not.
P100 = ("--assume", "gpu=sm_60", "--assume", "driver=560.35.05", "--assume", "python=3.11",
        "--assume", "glibc=2.36", "--assume", "arch=x86_64")


def pypi_torch_280(directory: Path, deps: Path) -> Path:
    """PyPI's torch 2.8.0 for cp311 x86_64, unlabelled: a tiny wheel whose METADATA has the recorded
    Requires-Dist lines (the CUDA 12.8 runtime pins among them); each dependency, at the version it
    pins (any other: 99.0), as a tiny wheel in `deps`, so uv could take it."""
    text = TORCH_280.read_text("utf-8")
    requires = [line for line in re.findall(r"^Requires-Dist: (.+)$", text, re.M) if "extra ==" not in line]
    for line in requires:
        req = Requirement(line)
        pinned = next((s.version for s in req.specifier if s.operator == "=="), "99.0")
        make_wheel(deps, req.name, pinned)
    return make_wheel(directory, "torch", "2.8.0", requires, ">=3.9.0", tag=CP311)


@pytest.mark.parametrize("kind", ["flat", "tree"])
def test_an_unlabelled_torch_wheel_is_the_cuda_its_metadata_pins_not_any_variant(tmp_path: Path, kind: str) -> None:
    # `pip download` output: PyPI's torch 2.8.0 (cu128: it pins nvidia-cuda-runtime-cu12==12.8.90) beside
    # a labelled 2.7.1+cu126 (or a file:// PEP 503 tree of both). A P100 runs cu126, not cu128 (no sm_60
    # in its arch list).
    wheels = tmp_path / "wheels"
    links = tmp_path / "links"
    both = [pypi_torch_280(wheels, links), make_wheel(wheels, "torch", "2.7.1+cu126", tag=CP311)]
    flat = str(wheels) if kind == "flat" else write_index(tmp_path / "tree", both).as_uri()
    make_wheel(links, "purelib", "1.0")
    out = resolve(*P100, "--torch-index-url", flat)  # the family alone: the directory is read
    assert (out["torch"], out["variant"]) == ("2.7.1", "cu126"), out
    out = resolve(*P100, "purelib", "--find-links", str(links), "--torch-index-url", flat)
    assert (out["torch"], out["variant"], out["resolved"]["torch"]) == ("2.7.1", "cu126", "2.7.1+cu126"), out
    # and on a host that runs cu128, the unlabelled wheel is the cu128 build of 2.8.0
    out = resolve(*DRIVER_570, "purelib", "--find-links", str(links), "--torch-index-url", flat)
    assert (out["torch"], out["variant"], out["resolved"]["torch"]) == ("2.8.0", "cu128", "2.8.0"), out


# -- class 7: a project's own wheel pages (PyG's) are used before any build ---------------------------


def failing_sdist(directory: Path, name: str, version: str, marker: Path) -> Path:
    """NAME-VERSION.tar.gz as PyPI has torch-scatter's (an sdist only): its build backend records
    that it ran in `marker`, then fails as torch-scatter's setup.py does where torch is not installed."""
    dist = name.replace("-", "_")
    backend = (f"def _fail(*a, **k):\n    open({str(marker)!r}, 'a').write('built\\n')\n"
               "    raise ModuleNotFoundError(\"No module named 'torch'\")\n"
               "get_requires_for_build_wheel = prepare_metadata_for_build_wheel = build_wheel = _fail\n")
    files = {"pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
                               f'[project]\nname = "{name}"\ndynamic = ["version", "dependencies"]\n', "backend.py": backend}
    return write_sdist(directory, f"{dist}-{version}", files)


def test_torch_scatter_comes_from_pygs_page_for_the_chosen_torch_not_from_a_build(tmp_path: Path) -> None:
    # PyPI has torch-scatter 2.1.2 as an sdist only; its wheels are on data.pyg.org, one page per torch
    # build (companions.toml: torch-{torch}+{variant}.html). TORCHFIT_PYG_URL stands a 127.0.0.1 server
    # in for https://data.pyg.org/whl; its pages link wheels built for that torch only (+pt28cu128).
    index = torch_tree(tmp_path, "cu128", ["2.7.1", "2.8.0"])
    (tmp_path / "empty").mkdir()
    marker = tmp_path / "built"
    links = tmp_path / "links"
    failing_sdist(links, "torch-scatter", "2.1.2", marker)
    pyg = tmp_path / "pyg" / "whl"
    for torch, tag in (("2.8.0", "pt28cu128"), ("2.7.1", "pt27cu128")):
        wheel = make_wheel(pyg / "files", "torch-scatter", f"2.1.2+{tag}", tag="cp311-cp311-linux_x86_64")
        (pyg / f"torch-{torch}+cu128.html").write_text(
            f'<html><body><a href="files/{wheel.name.replace("+", "%2B")}">{wheel.name}</a></body></html>\n')
    with serve_dir(tmp_path / "pyg") as url:
        proc = run_cli("resolve", "--json", *DRIVER_570, "torch-scatter", "--find-links", str(links),
                       "--index-url", (tmp_path / "empty").as_uri(), "--torch-index-url", index.as_uri(),
                       "--allow-insecure-index", timeout=180, env={"TORCHFIT_PYG_URL": f"{url}/whl"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert (out["torch"], out["variant"]) == ("2.8.0", "cu128"), out
    assert out["resolved"]["torch-scatter"] == "2.1.2+pt28cu128", out  # the page of the chosen torch
    assert out["pages"] == {"torch-scatter": f"{url}/whl/torch-2.8.0+cu128.html"}, out
    assert any("torch-scatter 2.1.2+pt28cu128: from " in r and "its own wheel page for torch 2.8.0 cu128" in r
               for r in out["reasons"]), out["reasons"]
    assert not marker.exists()  # no build ran


def test_a_wheel_page_that_cannot_be_read_is_named_in_the_refusal(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cu128", ["2.8.0"])
    (tmp_path / "empty").mkdir()
    links = tmp_path / "links"
    failing_sdist(links, "torch-scatter", "2.1.2", tmp_path / "built")
    proc = run_cli("resolve", "--json", "--no-build", *DRIVER_570, "torch-scatter", "--find-links", str(links),
                   "--index-url", (tmp_path / "empty").as_uri(), "--torch-index-url", index.as_uri(),
                   "--allow-insecure-index", timeout=180, env={"TORCHFIT_PYG_URL": "http://127.0.0.1:9/whl"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)
    assert any("http://127.0.0.1:9/whl/torch-2.8.0+cu128.html" in h for h in err["hints"]), err
    assert not (tmp_path / "built").exists()


def test_a_pin_to_no_release_says_so_and_the_hint_is_what_the_source_serves(tmp_path: Path) -> None:
    """`torch==2.99` against a torch source that serves 2.13.0 only (issue 35, item 4): the
    refusal leads with "no such torch release", and its hint names the release that source
    serves (it said "torch 2.15.0 cpu would fit", a build nobody serves there); without a torch
    source of the user's, the same first line, the matrix's hint."""
    from tests.test_planning import CPU_HOST

    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("resolve", *CPU_HOST, "--torch-index-url", index.as_uri(), "torch==2.99", env=env)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert "no compatible set: torch==2.99: no such torch release is known (data/matrix.toml lists" in lines[0], lines
    hint = next(ln for ln in lines if ln.lstrip().startswith("hint: loosen"))
    assert f"torch 2.13.0 cpu would fit ({index.as_uri()} serves it)" in hint, hint
    assert "2.15" not in hint, hint
    bare = run_cli("resolve", *CPU_HOST, "torch==2.99", env=env)
    assert bare.returncode == 1, bare.stderr
    assert "no compatible set: torch==2.99: no such torch release is known" in bare.stderr.splitlines()[0], bare.stderr
    # A release that exists but is not served: no such line.
    served_not = run_cli("resolve", *CPU_HOST, "--torch-index-url", index.as_uri(), "torch==2.14.1", env=env)
    assert served_not.returncode == 1 and "no such torch release" not in served_not.stderr



def test_an_unlabelled_cuda_torch_on_a_gpu_less_host_is_refused_not_planned_as_an_older_cpu_row(tmp_path: Path) -> None:
    """Issue 37's bench found it: pypi.org as the torch source on a CPU host planned "torch 2.7.1 cpu"
    (an older release's matrix row, which fits) while the resolved set held uv's 2.8.0 and its CUDA 12.8
    runtime: a plan that names one torch and installs another. Now refused, naming the build uv chose.
    The index is remote (a real server on 127.0.0.1): its wheels' variants are known from uv's answer."""
    import functools
    import http.server

    from tests.support.servers import http_server

    wheels, links = tmp_path / "wheels", tmp_path / "links"
    torch = pypi_torch_280(wheels, links)  # PyPI's 2.8.0, unlabelled (cu128 by its METADATA)
    root = tmp_path / "pypi"
    write_index(root, [torch, *links.glob("*.whl")])
    make_wheel(links, "purelib", "1.0")
    cpu_host = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "glibc=2.36", "--assume", "arch=x86_64")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    with http_server(handler=handler) as server:
        out = run_cli("resolve", "--json", *cpu_host, "purelib", "--find-links", str(links), "--torch-index-url",
                      f"{server.url}/simple", "--allow-insecure-index", timeout=180)
    assert out.returncode == 1, out.stdout
    text = " ".join(json.loads(out.stdout)["conflicts"])
    assert "torch 2.8.0" in text and "is a cu128 build" in text and "not the cpu build that fits this host" in text, text
