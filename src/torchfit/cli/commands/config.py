"""`torchfit config`: the effective site settings and where each came from (issue 26).

The precedence rule lives in cli/settings.py (flag > environment > $TORCHFIT_CONFIG file >
user file > system files > pip's configuration > default); this command shows its outcome
for this user in this shell, with the configuration files it looked at.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, TypedDict


class SettingRow(TypedDict):
    """One site setting: its value in force (credentials redacted), where it came from, what it is."""

    key: str
    value: str | float | list[str]
    origin: str
    what: str


class FileRow(TypedDict):
    """A configuration file looked at: its kind, path, whether it is there and could be read."""

    kind: str
    path: str
    found: bool
    readable: bool


class Effective(TypedDict):
    """`torchfit config`'s answer (`--json` adds `ok`; cli/ui/config.py renders it)."""

    settings: list[SettingRow]
    files: list[FileRow]
    config_env: str  # the variable that names a configuration file


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    p = subparsers.add_parser(
        "config",
        help="show the effective site settings (torch mirror, indexes, installer...) and where each came from",
        description="Print each setting a site configuration file may set, its effective value and its origin: "
                    "the environment, $TORCHFIT_CONFIG, the user's ~/.config/torchfit/config.toml, the system's "
                    "/etc/xdg/torchfit/config.toml or /etc/torchfit/config.toml, pip's configuration, or the "
                    "default. A command-line flag beats them all.",
        epilog=epilog + " See `torchfit docs install` (Site configuration).",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def effective(environ: dict[str, str]) -> Effective:
    """{"settings": [{key, value, origin, what}], "files": [{kind, path, found}]} for this environment."""
    from torchfit.cli.settings import (
        CONFIG_ENV,
        PREFIX_ROOT_ENV,
        SITE_KEYS,
        site_config,
        stall_setting,
    )
    from torchfit.compat.matrix import DEFAULT_INDEX, TORCH_INDEX_ENV
    from torchfit.index.sources import load_pip_config
    from torchfit.redact import redact
    from torchfit.runner import STALL_ENV

    config = site_config(environ)
    pip = load_pip_config(environ)
    rows: list[SettingRow] = []
    for key, (_, what) in SITE_KEYS.items():
        value: Any = None
        origin = "default"
        env_name = {"torch-index-url": TORCH_INDEX_ENV, "prefix-root": PREFIX_ROOT_ENV}.get(key)
        if key == "stall-timeout":
            # the runner's limit, read as the runner reads it (an unreadable one is refused here too)
            value, origin = stall_setting(environ)
            if origin == f"environment {STALL_ENV}" and config.get(key) is not None \
                    and environ.get(STALL_ENV) == f"{config.get(key):g}":
                origin = config.origins[key]  # put there from the file (settings.apply_site_config)
        elif env_name and environ.get(env_name):
            value, origin = environ[env_name], f"environment {env_name}"
        elif config.get(key) is not None:
            value, origin = config.get(key), config.origins[key]
        elif key in ("index-url", "extra-index-url", "find-links") and pip.get(key):
            value = pip.get_list(key) if key != "index-url" else pip.get(key)
            origin = pip.origins.get(key, "pip's configuration")
        if key in ("extra-index-url", "find-links") and config.get(key) and pip.get(key):
            value = [*config.get(key), *pip.get_list(key)]
            origin = f"{config.origins[key]}, then {pip.origins.get(key, 'pip')}"
        if value is None:
            value = {"torch-index-url": DEFAULT_INDEX, "index-url": "https://pypi.org/simple",
                     "installer": "auto", "prefix-root": "."}.get(key, [])  # the current directory: install's env is ./.venv
        shown = [redact(v) for v in value] if isinstance(value, list) else redact(str(value)) \
            if isinstance(value, str) else value
        rows.append({"key": key, "value": shown, "origin": origin, "what": what})
    files: list[FileRow] = [{"kind": kind, "path": path, "found": found, "readable": found and path not in config.unreadable}
             for kind, path, found in config.files]
    return {"settings": rows, "files": files, "config_env": CONFIG_ENV}


def run(args: argparse.Namespace) -> int:
    data = effective(dict(os.environ))
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("config", {"ok": True, **data}))
        return 0
    from torchfit.cli.ui.config import render_config

    render_config(data)
    return 0
