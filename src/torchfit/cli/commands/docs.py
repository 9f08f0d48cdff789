"""`torchfit docs [NAME]`: the user documentation that ships with torchfit, read where it is installed.

`--help` sends readers here (`torchfit docs install`), not to a docs/*.md path: an installed
copy has no source tree, and torchfit has no published documentation site. The pages are the
repository's docs/*.md, shipped in the package (src/torchfit/docs links to them; the wheel
holds copies), so the text read here is the text of that release.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from torchfit.errors import BadInput

if TYPE_CHECKING:
    from importlib.abc import Traversable


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    p = subparsers.add_parser(
        "docs",
        help="read torchfit's documentation (install, cluster, doctor, ...), shipped with it",
        description="Without NAME: list the pages with their titles. With NAME (install, install.md, "
                    "doctor, ...): print that page (Markdown) on stdout; `--path` prints where it is instead.",
        epilog=epilog,
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="a page: install, projects, cluster, doctor, mirrors, ...")
    p.add_argument("--path", action="store_true", help="print the page's path, not its text")


def pages() -> dict[str, Traversable]:
    """name (without .md) -> the page (an importlib.resources Traversable), sorted by name."""
    from importlib.resources import files

    root = files("torchfit") / "docs"
    found = {e.name[:-3]: e for e in root.iterdir() if e.name.endswith(".md")} if root.is_dir() else {}
    return dict(sorted(found.items()))


def run(args: argparse.Namespace) -> int:
    found = pages()
    if not found:
        raise BadInput("this copy of torchfit ships no documentation (a build without its docs/)")
    if not args.name:
        from torchfit.cli.ui.docs import render_page_list

        render_page_list({name: next((line.lstrip("# ").strip() for line in page.read_text(encoding="utf-8")
                                      .splitlines() if line.startswith("# ")), "") for name, page in found.items()})
        return 0
    name = args.name[:-3] if args.name.endswith(".md") else args.name
    name = name.rsplit("/", 1)[-1]  # docs/install.md as --help once wrote it
    page = found.get(name)
    if page is None:
        raise BadInput(f"no page {args.name!r}; the pages are: {', '.join(found)}")
    from torchfit.cli.ui.output import write_data

    write_data(f"{page}\n" if args.path else page.read_text(encoding="utf-8"))
    return 0
