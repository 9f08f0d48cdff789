"""Every error rendered the same way, on stderr: what failed, why (host facts first), how to fix it."""

from __future__ import annotations

import sys

from torchfit.cli.ui.console import clean, error_width, wrap
from torchfit.errors import NoCompatibleSet, TorchfitError


def render_error(err: TorchfitError, verbose: bool = False) -> None:
    """One line for what failed (plus conflicts and hints where there are some), on stderr."""
    out = sys.stderr
    width = error_width()
    if isinstance(err, NoCompatibleSet) and width:
        # A terminal (or COLUMNS): the facts and each conflict wrapped to its width.
        out.write(f"torchfit: error: no compatible set  [{err.reference}]\n")
        for i, line in enumerate(err.conflicts):
            out.write(wrap(clean(line), width, "  " if i == 0 else "  - ", "    ") + "\n")
        for hint in err.hints:
            out.write(wrap(clean(hint), width, "  hint: ", "    ") + "\n")
    elif isinstance(err, NoCompatibleSet):
        out.write(clean(f"torchfit: error: {err.message}") + f"  [{err.reference}]\n")
        for line in err.conflicts[1:]:
            out.write(clean(f"  - {line}") + "\n")
        for hint in err.hints:
            out.write(clean(f"  hint: {hint}") + "\n")
    elif width and err.exit_code != 2:
        # Bad input stays one line (exit 2 contract); a refusal reads at the terminal's width.
        out.write(wrap(clean(f"torchfit: error: {err.message}  [{err.reference}]"), width, "", "  ") + "\n")
        if err.hint:
            out.write(wrap(clean(err.hint), width, "  hint: ", "    ") + "\n")
    else:
        out.write(clean(f"torchfit: error: {err.message}") + f"  [{err.reference}]\n")
        if err.hint:
            out.write(clean(f"  hint: {err.hint}") + "\n")
    tail = err.to_json().get("tail")  # ask the error, do not inspect it
    if tail:
        out.write("  last lines of the log:\n")
        for line in str(tail).splitlines()[-20:]:
            out.write(clean(f"    {line}") + "\n")
