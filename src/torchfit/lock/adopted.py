"""An adopted env's base (`torchfit adopt`, `[tool.torchfit.base]`) as a resolver reads it.

`verify/adopt.py` records what an env had installed before torchfit came; `torchfit add`
(installer/add.py) resolves new packages around it. uv knows nothing of an installed
distribution it did not lock, so each one is handed to it as a stand-in wheel carrying the
installed METADATA (its real requirements), pinned to the installed version. Here, in the
lock layer, because adopt (verify) and add (installer) are siblings that do not import
each other (docs/architecture.md, The layering).
"""

from __future__ import annotations

import os
import re
import zipfile

from packaging.version import Version

from torchfit.compat.versions import is_pep440
from torchfit.lock.closure import find_dist_infos
from torchfit.lock.model import Lock
from torchfit.lock.tool import strings


def write_base_stubs(lock: Lock, directory: str) -> str:
    """A flat directory of stand-in wheels, one per distribution an adopted env has installed
    (its METADATA, so uv reads its real requirements): uv resolves new packages around them,
    each pinned to its installed version. They are never installed: add drops them from uv's
    answer (they are the base's own)."""
    os.makedirs(directory, exist_ok=True)
    sites = strings(lock.base().get("site"))
    installed = lock.base().get("installed") or {}
    for name, version in sorted(installed.items()) if isinstance(installed, dict) else []:
        infos = find_dist_infos(sites, str(name))
        try:
            with open(os.path.join(infos[0], "METADATA"), "rb") as fh:
                metadata = fh.read(4 << 20)
        except (OSError, IndexError):
            continue
        # The file name carries the normalised version (the binary distribution format spec):
        # uv splits the name at '-', so `2.8.0+cu128-custom` as written is no wheel of torch at
        # all; METADATA keeps the version as installed, which the normalised one equals.
        if not is_pep440(str(version)):  # no wheel can carry it: uv finds none, `moved` refuses a new one
            continue
        version = str(Version(str(version)))
        dist = re.sub(r"[-_.]+", "_", str(name))
        info = f"{dist}-{version}.dist-info"
        wheel = b"Wheel-Version: 1.0\nGenerator: torchfit adopt (stand-in)\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        with zipfile.ZipFile(os.path.join(directory, f"{dist}-{version}-py3-none-any.whl"), "w") as zf:
            zf.writestr(f"{info}/METADATA", metadata)
            zf.writestr(f"{info}/WHEEL", wheel)
            zf.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return directory
