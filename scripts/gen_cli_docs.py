"""Write docs/cli.md from the CLI's own --help, so the reference and --help never disagree.

    python scripts/gen_cli_docs.py          # rewrite docs/cli.md
    python scripts/gen_cli_docs.py --check  # exit 1 if docs/cli.md is stale (a test runs this)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def _help(argv: list[str]) -> str:
    from torchfit.cli.options import build_parser

    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        parser.parse_args([*argv, "--help"])
    return buf.getvalue().rstrip()


def render() -> str:
    from torchfit.cli.options import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = [
        "# CLI reference",
        "",
        "Generated from `torchfit --help` by `scripts/gen_cli_docs.py`; a test fails when it is stale.",
        "",
        "```text",
        _help([]),
        "```",
    ]
    for name in sub.choices:
        parts += ["", f"## torchfit {name}", "", "```text", _help([name]), "```"]
        sub_parser = sub.choices[name]
        nested = [a for a in sub_parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in nested:
            for child in action.choices:
                parts += ["", f"### torchfit {name} {child}", "", "```text", _help([name, child]), "```"]
    return "\n".join(parts) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC} is stale: run python scripts/gen_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
