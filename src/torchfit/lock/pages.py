"""A project's own wheel pages as uv sources (issue 33, class 7): PyG's extensions.

torch-scatter, torch-sparse, torch-cluster and pyg-lib publish their binaries one page per
torch build (`https://data.pyg.org/whl/torch-2.8.0+cu128.html`; PyPI has their sdists only,
or nothing: companions.toml, PYG-INDEX, TORCH-SCATTER-README). The wheels on a page carry no
torch pin in their METADATA (`torch_scatter-2.1.2+pt28cu128`): only the page says which torch
they were built for. So a page is offered to uv only beside the torch release it belongs to
(torch constrained to that release), as an explicit flat index serving those packages alone
(`lock.uv.uv_routing`), and only after the wheels of the user's own sources could not answer:
before any build from source.

`TORCHFIT_PYG_URL` replaces the base `https://data.pyg.org/whl` (a mirror, or a server on
127.0.0.1 in the tests; `off`: no page is offered); the default is the real one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from packaging.version import Version

from torchfit.compat.companions import Companions, find_links_pages
from torchfit.compat.matrix import Build
from torchfit.errors import IndexUnavailable

if TYPE_CHECKING:
    from torchfit.lock.uv import Compiled

PYG_URL_ENV = "TORCHFIT_PYG_URL"
# Torch releases whose page is tried, newest first: each try is one uv run (wheels only).
MAX_PAGE_TRIES = 3


def iter_pages(companions: Companions, names: Sequence[str], builds: Sequence[Build], variant: str,
               environ: Mapping[str, str] | None = None) -> Iterator[tuple[Version, dict[str, str]]]:
    """(torch release, name -> page) for the releases among `builds` (newest first, at most
    `MAX_PAGE_TRIES`) where every one of `names` published per torch build has a page; nothing
    when none of `names` is."""
    base = (os.environ if environ is None else environ).get(PYG_URL_ENV) or None
    if base is not None and base.strip().lower() == "off":
        return
    tried = 0
    for torch in sorted({b.torch for b in builds if b.variant == variant}, reverse=True):
        pages = find_links_pages(companions, names, torch=torch, variant=variant, base=base)
        if pages == {}:
            return  # no package of the project is published so
        if pages is None:
            continue
        yield torch, pages
        tried += 1
        if tried >= MAX_PAGE_TRIES:
            return


def is_remote(page: str) -> bool:
    return page.lower().startswith(("http://", "https://"))


def solve_from_pages(companions: Companions, names: Sequence[str], builds: Sequence[Build], variant: str,
                     compile_with: Callable[[Version, dict[str, str]], Compiled], *, offline: bool,
                     environ: Mapping[str, str] | None = None,
                     ) -> tuple[Compiled | None, dict[str, str], dict[str, str]]:
    """(uv's answer, the pages it used, the pages tried in vain): `compile_with(torch, pages)` for
    each of `iter_pages` until one answers (a page that cannot be read is the next release's turn).
    Offline, a remote page is not tried, only named."""
    tried: dict[str, str] = {}
    for torch, pages in iter_pages(companions, names, builds, variant, environ):
        tried = {**pages, **tried}
        if offline and any(is_remote(p) for p in pages.values()):
            continue
        try:
            got = compile_with(torch, pages)
        except IndexUnavailable:
            continue
        if got.ok:
            return got, pages, {}
    return None, {}, tried


def format_pages_tried(pages: Mapping[str, str]) -> str:
    """" PAGE ... (its own wheel page, ...)" for a hint's --find-links, or "" when none was tried."""
    named = list(dict.fromkeys(pages.values()))
    if not named:
        return ""
    return "".join(f" {p}" for p in named) + (" (the project's own wheel page, which gave uv no answer: "
                                              "unreadable, or without a wheel for this host)")
