"""What torchfit knows about a host: `HostFacts`, its JSON form, and `--assume`.

`HostFacts` is a plain value. The probes in `torchfit.host` build it
on a live host; `facts_from_json` builds it from `torchfit detect --json` output
of another host; `apply_assumptions` replaces single facts (`--assume`). A fact
that could not be read is `None`, and `reasons[fact]` says why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from torchfit._backports import FROZEN
from torchfit.compat.gpunames import find_capability
from torchfit.compat.versions import Arch, Dotted, driver_version, glibc_version, python_version
from torchfit.errors import BadInput


@dataclass(**FROZEN)
class Gpu:
    """One GPU. NVIDIA GPUs carry `compute_capability` ("9.0"); AMD ones `gfx`."""

    index: int
    name: str
    compute_capability: str | None = None
    memory_mib: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    vendor: str = "nvidia"  # "nvidia" | "amd"
    gfx: str | None = None

    @property
    def arch(self) -> Arch | None:
        return Arch.parse(self.compute_capability) if self.compute_capability else None

    def label(self) -> str:
        if self.vendor == "amd":
            return f"{self.name} ({self.gfx or 'gfx unknown'})"
        cc = self.arch.sm if self.arch else "sm unknown"
        return f"{self.name} ({cc})"


@dataclass(**FROZEN)
class PythonInstall:
    """An interpreter on the host: version "3.12.1", where, and who put it there."""

    version: str
    path: str | None = None
    source: str = "path"  # "path" | "pyenv" | "assumed"

    @property
    def minor(self) -> tuple[int, int]:
        return python_version(self.version)


@dataclass(**FROZEN)
class Pyenv:
    """pyenv on the host: its root and the CPython versions `pyenv install` offers."""

    path: str
    version: str | None = None
    installable: tuple[str, ...] = ()


@dataclass(**FROZEN)
class HostFacts:
    """Everything the resolver needs to know about one host.

    `source` says where the facts came from ("host: probes", "file: node.json");
    `reasons` maps a fact's name to why it is unknown (or what replaced it).
    """

    driver_version: str | None = None
    gpus: tuple[Gpu, ...] = ()
    topology: Mapping[str, str] = field(default_factory=dict)
    glibc: str | None = None
    os: str | None = None
    wsl: bool | None = None
    arch: str | None = None
    pythons: tuple[PythonInstall, ...] = ()
    pyenv: Pyenv | None = None
    rocm_version: str | None = None
    reasons: Mapping[str, str] = field(default_factory=dict)
    source: str = "host"
    name: str = "this host"

    @property
    def driver(self) -> Dotted | None:
        return driver_version(self.driver_version) if self.driver_version else None

    @property
    def glibc_v(self) -> Dotted | None:
        return glibc_version(self.glibc) if self.glibc else None

    @property
    def nvidia_gpus(self) -> tuple[Gpu, ...]:
        return tuple(g for g in self.gpus if g.vendor == "nvidia")

    @property
    def amd_gpus(self) -> tuple[Gpu, ...]:
        return tuple(g for g in self.gpus if g.vendor == "amd")


# --- JSON -------------------------------------------------------------------------


def facts_to_json(facts: HostFacts) -> dict[str, Any]:
    """The `torchfit detect --json` object (keys in DESIGN.md, "Contracts")."""
    return {
        "driver_version": facts.driver_version,
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "compute_capability": g.compute_capability,
                "memory_mib": g.memory_mib,
                "uuid": g.uuid,
                "pci_bus_id": g.pci_bus_id,
                **({"vendor": g.vendor, "gfx": g.gfx} if g.vendor == "amd" else {}),
            }
            for g in facts.gpus
        ],
        "topology": dict(facts.topology),
        "glibc": facts.glibc,
        "os": facts.os,
        "wsl": facts.wsl,
        "arch": facts.arch,
        "pythons": [{"version": p.version, "path": p.path, "source": p.source} for p in facts.pythons],
        "pyenv": (
            None
            if facts.pyenv is None
            else {
                "path": facts.pyenv.path,
                "version": facts.pyenv.version,
                "installable": list(facts.pyenv.installable),
            }
        ),
        "rocm_version": facts.rocm_version,
        "reasons": dict(facts.reasons),
    }


def _opt_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    val = obj.get(key)
    if val is None or isinstance(val, str):
        return val
    raise BadInput(f"{where}: {key!r} must be a string or null, not {type(val).__name__}")


def _opt_int(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    val = obj.get(key)
    if val is None or (isinstance(val, int) and not isinstance(val, bool)):
        return val
    raise BadInput(f"{where}: {key!r} must be an integer or null")


def facts_from_json(data: Any, source: str) -> HostFacts:
    """Rebuild `HostFacts` from `torchfit detect --json` output; BadInput names the problem."""
    where = source
    if not isinstance(data, dict):
        raise BadInput(f"{where}: expected a JSON object from `torchfit detect --json`")
    gpus_raw = data.get("gpus") or []
    if not isinstance(gpus_raw, list):
        raise BadInput(f"{where}: 'gpus' must be a list")
    gpus = []
    for i, g in enumerate(gpus_raw):
        if not isinstance(g, dict) or not isinstance(g.get("name", ""), str):
            raise BadInput(f"{where}: gpus[{i}] must be an object with a 'name'")
        gw = f"{where}: gpus[{i}]"
        cc = _opt_str(g, "compute_capability", gw)
        if cc is not None:
            Arch.parse(cc)
        idx = _opt_int(g, "index", gw)
        gpus.append(
            Gpu(
                index=i if idx is None else idx,
                name=g.get("name") or "unknown GPU",
                compute_capability=cc,
                memory_mib=_opt_int(g, "memory_mib", gw),
                uuid=_opt_str(g, "uuid", gw),
                pci_bus_id=_opt_str(g, "pci_bus_id", gw),
                vendor="amd" if g.get("vendor") == "amd" or g.get("gfx") else "nvidia",
                gfx=_opt_str(g, "gfx", gw),
            )
        )
    topo = data.get("topology") or {}
    if not isinstance(topo, dict) or not all(isinstance(v, str) for v in topo.values()):
        raise BadInput(f"{where}: 'topology' must map 'i-j' to a link type string")
    pythons = []
    pythons_raw = data.get("pythons") or []
    if not isinstance(pythons_raw, list):
        raise BadInput(f"{where}: 'pythons' must be a list")
    for i, p in enumerate(pythons_raw):
        if not isinstance(p, dict) or not isinstance(p.get("version"), str):
            raise BadInput(f"{where}: pythons[{i}] must be an object with a 'version' string")
        python_version(p["version"])
        pythons.append(
            PythonInstall(p["version"], _opt_str(p, "path", where), p.get("source") or "path")
        )
    pyenv_raw = data.get("pyenv")
    pyenv = None
    if isinstance(pyenv_raw, dict) and isinstance(pyenv_raw.get("path"), str):
        inst = pyenv_raw.get("installable") or []
        if not isinstance(inst, list) or not all(isinstance(v, str) for v in inst):
            raise BadInput(f"{where}: 'pyenv.installable' must be a list of versions")
        pyenv = Pyenv(pyenv_raw["path"], _opt_str(pyenv_raw, "version", where), tuple(inst))
    elif pyenv_raw is not None and not isinstance(pyenv_raw, dict):
        raise BadInput(f"{where}: 'pyenv' must be an object or null")
    driver = _opt_str(data, "driver_version", where)
    if driver is not None:
        driver_version(driver)
    glibc = _opt_str(data, "glibc", where)
    if glibc is not None:
        glibc_version(glibc)
    wsl = data.get("wsl")
    if wsl is not None and not isinstance(wsl, bool):
        raise BadInput(f"{where}: 'wsl' must be true, false or null")
    reasons = data.get("reasons") or {}
    if not isinstance(reasons, dict):
        raise BadInput(f"{where}: 'reasons' must be an object")
    return HostFacts(
        driver_version=driver,
        gpus=tuple(gpus),
        topology=dict(topo),
        glibc=glibc,
        os=_opt_str(data, "os", where),
        wsl=wsl,
        arch=_opt_str(data, "arch", where),
        pythons=tuple(pythons),
        pyenv=pyenv,
        rocm_version=_opt_str(data, "rocm_version", where),
        reasons={str(k): str(v) for k, v in reasons.items()},
        source=f"file: {source}",
        name=source.replace("\\", "/").rsplit("/", 1)[-1],
    )


def parse_facts_file(text: str, source: str) -> HostFacts:
    """JSON text of a facts file -> HostFacts; BadInput with the position on bad JSON."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{source}: not valid JSON ({exc})") from exc
    return facts_from_json(data, source)


# --- --assume -----------------------------------------------------------------------

ASSUME_KEYS = ("driver", "gpu", "glibc", "python", "os", "wsl", "arch")


def _assumed_gpu(value: str, index: int, gpu_names: Mapping[str, str]) -> Gpu | None:
    v = value.strip()
    low = v.lower()
    if low == "none":
        return None
    if low.startswith("gfx"):
        return Gpu(index=index, name=f"AMD {low}", vendor="amd", gfx=low)
    try:
        arch = Arch.parse(v)
    except BadInput:
        cc = find_capability(v, gpu_names)
        if cc is None:
            raise BadInput(
                f"--assume gpu={v}: not an arch (sm_90, 9.0, gfx942) or a GPU name torchfit knows"
            ) from None
        return Gpu(index=index, name=v, compute_capability=cc)
    return Gpu(index=index, name=f"assumed {arch.sm}", compute_capability=f"{arch}")


def parse_assumption(item: str) -> tuple[str, str]:
    """"driver=580.65.06" -> ("driver", "580.65.06"); BadInput for anything else."""
    key, sep, value = item.partition("=")
    key = key.strip().lower()
    if not sep or not value.strip():
        raise BadInput(f"--assume {item!r}: expected KEY=VALUE, keys: {', '.join(ASSUME_KEYS)}")
    if key not in ASSUME_KEYS:
        raise BadInput(f"--assume {key}: unknown key; known keys: {', '.join(ASSUME_KEYS)}")
    return key, value.strip().strip('"').strip("'")


def apply_assumptions(
    facts: HostFacts, items: Iterable[str], gpu_names: Mapping[str, str]
) -> HostFacts:
    """Replace detected facts with the user's `--assume KEY=VALUE` items.

    Repeated `gpu=` and `python=` keys accumulate (several GPUs, several
    interpreters); every other key replaces the fact. The replaced fact's reason
    records "assumed by the user".
    """
    pairs = [parse_assumption(i) for i in items]
    if not pairs:
        return facts
    changes: dict[str, Any] = {}
    reasons = dict(facts.reasons)
    gpus: list[Gpu] = []
    saw_gpu = False
    pythons: list[PythonInstall] = []
    for key, value in pairs:
        reasons[key] = f"assumed by the user (--assume {key}={value})"
        if key == "driver":
            if value.lower() == "none":
                changes["driver_version"] = None
            else:
                changes["driver_version"] = str(driver_version(value))
        elif key == "glibc":
            changes["glibc"] = str(glibc_version(value))
        elif key == "gpu":
            saw_gpu = True
            gpu = _assumed_gpu(value, len(gpus), gpu_names)
            if gpu is not None:
                gpus.append(gpu)
        elif key == "python":
            python_version(value)
            pythons.append(PythonInstall(value, None, "assumed"))
        elif key == "os":
            changes["os"] = value.lower()
        elif key == "wsl":
            if value.lower() not in ("yes", "no", "true", "false"):
                raise BadInput(f"--assume wsl={value}: expected yes or no")
            changes["wsl"] = value.lower() in ("yes", "true")
        elif key == "arch":
            if value not in ("x86_64", "aarch64"):
                raise BadInput(f"--assume arch={value}: expected x86_64 or aarch64")
            changes["arch"] = value
    if saw_gpu:
        changes["gpus"] = tuple(gpus)
        changes["topology"] = {}
    if pythons:
        changes["pythons"] = tuple(pythons)
    return replace(facts, reasons=reasons, **changes)
