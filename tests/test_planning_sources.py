"""Issue 33, class 9 and 7: the user's own sources decide where a companion is looked for and
what a torch wheel is; a project's own wheel pages (PyG's) are offered before any build.

As in tests/test_planning.py: tiny wheels with real METADATA on local sources (PEP 503 trees,
flat directories, a page served on 127.0.0.1), real uv, `resolve --offline` where the sources
are all file://.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement

from tests.support.wheels import make_wheel, write_index
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


def test_an_unlabelled_torch_wheel_is_the_cuda_its_metadata_pins_not_any_variant(tmp_path: Path) -> None:
    # `pip download` output: PyPI's torch 2.8.0 (cu128: it pins nvidia-cuda-runtime-cu12==12.8.90) beside
    # a labelled 2.7.1+cu126. A P100 runs cu126, not cu128 (no sm_60 in its arch list).
    flat = tmp_path / "wheels"
    links = tmp_path / "links"
    pypi_torch_280(flat, links)
    make_wheel(flat, "torch", "2.7.1+cu126", tag=CP311)
    make_wheel(links, "purelib", "1.0")
    out = resolve(*P100, "--torch-index-url", str(flat))  # the family alone: the directory is read
    assert (out["torch"], out["variant"]) == ("2.7.1", "cu126"), out
    out = resolve(*P100, "purelib", "--find-links", str(links), "--torch-index-url", str(flat))
    assert (out["torch"], out["variant"], out["resolved"]["torch"]) == ("2.7.1", "cu126", "2.7.1+cu126"), out
    # and on a host that runs cu128, the unlabelled wheel is the cu128 build of 2.8.0
    out = resolve(*DRIVER_570, "purelib", "--find-links", str(links), "--torch-index-url", str(flat))
    assert (out["torch"], out["variant"], out["resolved"]["torch"]) == ("2.8.0", "cu128", "2.8.0"), out
