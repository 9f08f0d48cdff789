"""`export --format lmod`: the shared env of a lock as an Lmod modulefile (Lua) (issue 26, item 3).

Sites expose software as modules (`module load torch/2.13.0-cu128`), not as `source
bin/activate`. The env is the lock's directory (`PREFIX/pylock.toml`); the modulefile sets
what `torchfit run` sets: PREFIX/bin first on PATH, VIRTUAL_ENV, and the env's NCCL pin as
`PREFIX/bin/torchfit-env` writes it (TORCHFIT_ENV, TORCHFIT_NCCL, and for an `--nccl-lib`
pin TORCHFIT_NCCL_LIB and LD_PRELOAD). Lmod reverses every one of these on `module
unload` (prepend_path/setenv are undone, PATH and LD_PRELOAD regain their old values).
`whatis` and `help` name the stack: torch, variant, CUDA, NCCL, the lock. `family("torch")`
keeps two torch modules from being loaded together (Lmod swaps them).

Functions used, from Lmod's "Lua Modulefile Functions": help, whatis, family, prepend_path,
setenv. Every value from the lock or the file system (paths, versions, the --lock path in the
first comment) is written as a Lua double-quoted string, escaped for Lua: `\\` and `"` escaped,
every control character (CR and newline included) and every byte that is not UTF-8 a decimal
escape `\\ddd`, so no value, whatever it ends with (`env[1]`, `2.27.3]`), can end the string
or the comment line and become Lua code. The modulefile is written with files.write_into (the
module directory is not torchfit's: a symlink at -o is refused, never followed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from torchfit.export.stack import Stack
from torchfit.lock.model import env_settings, pin_from_json


def _lua(text: str) -> str:
    """`text` as a Lua double-quoted string literal (Lua 5.1 reference manual, section 2.1: `\\ddd`
    is the byte of decimal value ddd). A path's byte that is not UTF-8 (os.fsdecode's surrogate
    escape) is written as that byte, so the string is the path's own bytes."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the undecodable byte itself
            out.append(f"\\{code - 0xDC00:03d}")
        elif code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF:
            out.append("".join(f"\\{b:03d}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def module_name(stack: Stack) -> str:
    """`torch/2.13.0-cpu`: where `module load` finds it (the file's path under a module directory)."""
    return f"torch/{stack.torch}-{stack.variant}"


def render_lmod(stack: Stack, *, lock_path: str, pin: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    """The modulefile of the env whose lock is `lock_path` (its directory is the env)."""
    prefix = os.path.dirname(os.path.abspath(lock_path))
    nccl = pin_from_json(pin)
    cuda = plan.get("cuda") or "none (CPU or ROCm build)"
    family = ", ".join(f"{n} {v}" for n, v in stack.family)
    lines = [
        # A comment ends at a CR or newline: the lock's path goes in quoted and escaped, never raw.
        f"-- {_lua(module_name(stack))[1:-1]}: written by `torchfit export --format lmod` from {_lua(lock_path)}",
        "-- Rewrite it from the lock after any `torchfit install --force` or `torchfit add` of this env.",
        "help(" + _lua(f"PyTorch {stack.torch} ({stack.variant}) in {prefix}: {family}; CUDA {cuda}; "
                       f"NCCL {nccl.describe()}; lock {prefix}/pylock.toml. "
                       f"Prove it on the GPUs: torchfit verify --env {prefix}") + ")",
        'whatis("Name: torch")',
        f"whatis({_lua('Version: ' + stack.torch + ' (' + stack.variant + ')')})",
        f"whatis({_lua('Packages: ' + family)})",
        f"whatis({_lua('CUDA: ' + str(cuda))})",
        f"whatis({_lua('NCCL: ' + nccl.describe())})",
        f"whatis({_lua('Lock: ' + prefix + '/pylock.toml')})",
        'family("torch")',
    ]
    # What `torchfit run` sets (lock.model.env_settings); Lmod undoes each on unload.
    for var in env_settings(prefix, nccl):
        verb = "prepend_path" if var.prepend else "setenv"
        lines.append(f'{verb}("{var.name}", {_lua(var.value)})')
    return "\n".join(lines) + "\n"
