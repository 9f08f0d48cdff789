"""Which libnccl an env runs, and the `PREFIX/bin/torchfit-env` script that pins it.

pip's torch wheels load NCCL through `DT_RPATH=$ORIGIN/../../nvidia/nccl/lib`, and
DT_RPATH wins over LD_LIBRARY_PATH (measured, docs/architecture.md, Contracts). So an env's NCCL is pinned:

- by default, by the `nvidia-nccl-cuXX` version the plan names (torch's own pin);
- with `--nccl VERSION`, by installing that `nvidia-nccl-cuXX` version instead;
- with `--nccl-lib PATH`, by LD_PRELOAD of that library: a preloaded object with
  the soname `libnccl.so.2` satisfies libtorch_cuda's DT_NEEDED before any search
  path is looked at.

`bin/torchfit-env` is POSIX sh, sourced by the venv's `activate` and by
`torchfit run`; it carries the pin, so a shell, a batch script and `torchfit run`
load the same library.
"""

from __future__ import annotations

import os
import re
from typing import BinaryIO

from packaging.version import InvalidVersion, Version

from torchfit.errors import BadInput
from torchfit.lock.model import NcclPin

ENV_SCRIPT = "torchfit-env"
_HOOK_MARK = "# torchfit: NCCL pin"


def nccl_package(cuda: str) -> str:
    """The NCCL wheel of a CUDA major version: "13.0" -> "nvidia-nccl-cu13"."""
    return f"nvidia-nccl-cu{cuda.split('.')[0]}"


def parse_nccl_version(text: str) -> str:
    """A `--nccl` value: a release like 2.28.3 (BadInput otherwise)."""
    try:
        v = Version(text)
    except InvalidVersion:
        raise BadInput(f"--nccl {text!r}: not a version like 2.28.3") from None
    if len(v.release) < 2 or v.local:
        raise BadInput(f"--nccl {text!r}: give the nvidia-nccl-cuXX release, like 2.28.3")
    return str(v)


def check_nccl_lib(path: str) -> str:
    """The absolute path of a `--nccl-lib` library; BadInput unless it looks like libnccl.

    Cheap checks only (torchfit does not load it into its own process): a readable
    regular file, an ELF shared object, exporting `ncclGetVersion`. The install's
    build check then loads it in the env's Python and records its version.
    """
    if "\n" in path or not path.strip():
        raise BadInput(f"--nccl-lib {path!r}: not a file path")
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(full):
        raise BadInput(f"--nccl-lib {path}: no such file")
    if not os.path.isfile(full):
        raise BadInput(f"--nccl-lib {path}: not a file (give the library, e.g. /usr/lib/x86_64-linux-gnu/libnccl.so.2)")
    try:
        with open(full, "rb") as fh:
            head = fh.read(64)
            found = _contains(fh, b"ncclGetVersion", head)
    except OSError as exc:
        raise BadInput(f"--nccl-lib {path}: cannot read ({exc.strerror})") from None
    if not head.startswith(b"\x7fELF"):
        raise BadInput(f"--nccl-lib {path}: not a shared library (no ELF header)")
    if not found:
        raise BadInput(f"--nccl-lib {path}: not an NCCL library (no ncclGetVersion symbol)")
    return full


def _contains(fh: BinaryIO, needle: bytes, head: bytes) -> bool:
    """Whether the rest of a binary file holds `needle` (read in chunks)."""
    tail = head
    while True:
        chunk = fh.read(1 << 22)
        if not chunk:
            return needle in tail
        buf = tail + chunk
        if needle in buf:
            return True
        tail = buf[-len(needle):]


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def render_env_script(prefix: str, pin: NcclPin) -> str:
    """The text of bin/torchfit-env (POSIX sh; sourcing it twice changes nothing)."""
    lines = [
        "# torchfit-env: the NCCL pin of this environment, written by `torchfit install`.",
        "# Sourced by bin/activate and by `torchfit run --env PREFIX -- CMD`.",
        "# Re-run torchfit install to change it; edits here are not recorded in pylock.toml.",
        f"TORCHFIT_ENV={_sh_quote(prefix)}",
        "export TORCHFIT_ENV",
        f"TORCHFIT_NCCL={_sh_quote(pin.describe())}",
        "export TORCHFIT_NCCL",
    ]
    if pin.mechanism == "ld-preload" and pin.library:
        lib = _sh_quote(pin.library)
        lines += [
            "# pip's torch finds libnccl through DT_RPATH, which LD_LIBRARY_PATH cannot override;",
            "# a preloaded libnccl.so.2 is used before any search path is looked at.",
            f"TORCHFIT_NCCL_LIB={lib}",
            "export TORCHFIT_NCCL_LIB",
            'case ":${LD_PRELOAD-}:" in',
            '  *":$TORCHFIT_NCCL_LIB:"*) ;;',
            "  *)",
            '    _TORCHFIT_OLD_LD_PRELOAD="${LD_PRELOAD-}"',
            '    _TORCHFIT_HAD_LD_PRELOAD="${LD_PRELOAD+1}"',
            '    LD_PRELOAD="$TORCHFIT_NCCL_LIB${LD_PRELOAD:+:$LD_PRELOAD}"',
            "    export LD_PRELOAD",
            "    ;;",
            "esac",
        ]
    lines += [
        "_torchfit_env_off () {",
        '    if [ -n "${TORCHFIT_NCCL_LIB-}" ] && [ -n "${_TORCHFIT_OLD_LD_PRELOAD+x}" ]; then',
        '        if [ -n "${_TORCHFIT_HAD_LD_PRELOAD-}" ]; then',
        '            LD_PRELOAD="$_TORCHFIT_OLD_LD_PRELOAD"; export LD_PRELOAD',
        "        else",
        "            unset LD_PRELOAD",
        "        fi",
        "    fi",
        "    unset TORCHFIT_ENV TORCHFIT_NCCL TORCHFIT_NCCL_LIB _TORCHFIT_OLD_LD_PRELOAD _TORCHFIT_HAD_LD_PRELOAD",
        "}",
    ]
    return "\n".join(lines) + "\n"


def write_env_script(env_dir: str, prefix: str, pin: NcclPin) -> str:
    path = os.path.join(env_dir, "bin", ENV_SCRIPT)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_env_script(prefix, pin))
    os.chmod(path, 0o644)
    return path


_DEACTIVATE = re.compile(r"^(deactivate\s*\(\)\s*\{)[ \t]*$", re.M)


def hook_activate(env_dir: str, prefix: str, pin: NcclPin) -> list[str]:
    """Make the venv's activate scripts apply the pin; returns the scripts changed.

    bash/zsh/sh `activate` sources bin/torchfit-env and its `deactivate` undoes it;
    fish and csh cannot source sh, so they get the one LD_PRELOAD line themselves.
    """
    changed = []
    script = os.path.join(prefix, "bin", ENV_SCRIPT)
    sh = os.path.join(env_dir, "bin", "activate")
    if os.path.isfile(sh):
        text = _read(sh)
        if _HOOK_MARK not in text:
            text = _DEACTIVATE.sub(
                r"\1\n    # torchfit: undo bin/torchfit-env\n"
                r"    if command -v _torchfit_env_off >/dev/null 2>&1; then _torchfit_env_off; unset -f _torchfit_env_off; fi",
                text, count=1)
            text += f"\n{_HOOK_MARK} (bin/torchfit-env)\n. {_sh_quote(script)}\n"
            _write(sh, text)
            changed.append(sh)
    if pin.mechanism == "ld-preload" and pin.library:
        fish = os.path.join(env_dir, "bin", "activate.fish")
        if os.path.isfile(fish) and _HOOK_MARK not in _read(fish):
            _write(fish, _read(fish) + f"\n{_HOOK_MARK} (see bin/torchfit-env)\n"
                   f"set -gx LD_PRELOAD {_sh_quote(pin.library)} $LD_PRELOAD\n")
            changed.append(fish)
        csh = os.path.join(env_dir, "bin", "activate.csh")
        if os.path.isfile(csh) and _HOOK_MARK not in _read(csh):
            _write(csh, _read(csh) + f"\n{_HOOK_MARK} (see bin/torchfit-env)\n"
                   f"if ($?LD_PRELOAD) then\n  setenv LD_PRELOAD {_sh_quote(pin.library)}:$LD_PRELOAD\n"
                   f"else\n  setenv LD_PRELOAD {_sh_quote(pin.library)}\nendif\n")
            changed.append(csh)
    return changed


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
