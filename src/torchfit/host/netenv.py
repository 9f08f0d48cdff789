"""What NCCL will read on this host: its settings (the environment, then NCCL_CONF_FILE,
~/.nccl.conf, /etc/nccl.conf) and the network interfaces it can choose from.

doctor (doctor/environment.py) and verify (verify/environment.py) read these facts here
and judge them with compat.envjudge, so both say the same thing about them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from torchfit.compat.ncclenv import parse_env_file


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(1 << 20)
    except (OSError, ValueError):
        return None


def nccl_setting(environ: Mapping[str, str], key: str, root: str = "/") -> tuple[str | None, str]:
    """A NCCL variable and where it came from: the environment, then NCCL_CONF_FILE,
    ~/.nccl.conf and /etc/nccl.conf (under `root`) (NCCL docs, "Environment Variables")."""
    if key in environ:
        return environ[key], "environment"
    home = environ.get("HOME")
    user = os.path.join(home, ".nccl.conf") if home else None
    for path in [p for p in (environ.get("NCCL_CONF_FILE"), user, "/etc/nccl.conf") if p]:
        where = os.path.join(root, path.lstrip("/")) if path == "/etc/nccl.conf" else path
        text = _read(where)
        if text is not None:
            values = parse_env_file(text)
            if key in values:
                return values[key], path
    return None, ""


def probe_interfaces(root: str = "/") -> tuple[tuple[str, ...] | None, str | None]:
    """The network interfaces (/sys/class/net under `root`), or None and why."""
    try:
        return tuple(sorted(os.listdir(os.path.join(root, "sys/class/net")))), None
    except FileNotFoundError:
        return None, "/sys/class/net does not exist"
    except OSError as exc:
        return None, f"/sys/class/net cannot be listed ({exc.strerror or exc})"
