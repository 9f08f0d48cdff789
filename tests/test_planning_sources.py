"""Issue 33, class 9 and 7: the user's own sources decide where a companion is looked for and
what a torch wheel is; a project's own wheel pages (PyG's) are offered before any build.

As in tests/test_planning.py: tiny wheels with real METADATA on local sources (PEP 503 trees,
flat directories, a page served on 127.0.0.1), real uv, `resolve --offline` where the sources
are all file://.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.wheels import make_wheel, write_index
from tests.test_planning import CP311, resolve, torch_tree

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
