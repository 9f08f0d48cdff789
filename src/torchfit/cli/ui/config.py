"""`torchfit config`'s text: each setting, its value and origin; the files looked at."""

from __future__ import annotations

from typing import Any

from torchfit.cli.ui.console import console, esc_plain


def render_config(data: dict[str, Any]) -> None:
    con = console()
    con.print("torchfit config: the effective settings (a flag beats every line below)", soft_wrap=True)
    for row in data["settings"]:
        value = row["value"]
        text = ", ".join(value) if isinstance(value, list) else str(value)
        con.print(esc_plain(f"  {row['key']:<16}{text or '-'}"), soft_wrap=True)
        con.print(esc_plain(f"  {'':<16}from {row['origin']}"), soft_wrap=True)
    con.print(f"files, highest first (${data['config_env']} names one):", soft_wrap=True)
    for f in data["files"]:
        con.print(esc_plain(f"  {'read ' if f['found'] else 'none '} {f['kind']:<17} {f['path']}"), soft_wrap=True)
