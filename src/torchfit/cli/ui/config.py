"""`torchfit config`'s text: each setting, its value and origin; the files looked at."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchfit.cli.ui.console import console, esc_plain
from torchfit.inputs import shown

if TYPE_CHECKING:
    from torchfit.cli.commands.config import Effective


def render_config(data: Effective) -> None:
    """Values, origins and paths are the user's text (a URL, a file name): each is `shown`, its
    control characters escaped (`\\x1b[2J` printed, not obeyed), then rich markup escaped."""
    con = console()
    con.print("torchfit config: the effective settings (a flag beats every line below)", soft_wrap=True)
    for row in data["settings"]:
        value = row["value"]
        text = ", ".join(shown(v) for v in value) if isinstance(value, list) else shown(str(value))
        con.print(esc_plain(f"  {row['key']:<16}{text or '-'}"), soft_wrap=True)
        con.print(esc_plain(f"  {'':<16}from {shown(row['origin'])}"), soft_wrap=True)
    con.print(f"files, highest first (${data['config_env']} names one):", soft_wrap=True)
    for f in data["files"]:
        state = "read " if f.get("readable", f["found"]) else "unreadable" if f["found"] else "none "
        con.print(esc_plain(f"  {state} {f['kind']:<17} {shown(f['path'])}"), soft_wrap=True)
