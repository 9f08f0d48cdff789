"""`torchfit docs` without NAME: the shipped pages, one line each (name, title).

A page's own text (and `--path`) is data for a pager or a file: cli.ui.output.write_data."""

from __future__ import annotations

import sys
from collections.abc import Mapping


def render_page_list(titles: Mapping[str, str]) -> None:
    """One line per page: its name (what `torchfit docs NAME` takes), then its title."""
    for name, title in titles.items():
        sys.stdout.write(f"{name:<20} {title}\n")
