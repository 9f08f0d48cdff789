"""What torchfit knows about a host: `HostFacts`, its JSON form, and `--assume`.

`HostFacts` is a plain value. The probes in `torchfit.host` build it
on a live host; `facts_from_json` builds it from `torchfit detect --json` output
of another host; `apply_assumptions` replaces single facts (`--assume`). A fact
that could not be read is `None`, and `reasons[fact]` says why.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from torchfit._backports import FROZEN
from torchfit.compat.gpunames import find_capability, load_gpu_names
from torchfit.compat.versions import Arch, Dotted, driver_version, glibc_version, python_version
from torchfit.errors import BadInput
from torchfit.inputs import loads_json
from torchfit.jsontypes import JsonObject


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
        return _parse_arch(self.compute_capability) if self.compute_capability else None

    @property
    def model(self) -> tuple[str, str, str | None, str | None]:
        """What every judgement of a GPU depends on: vendor, name, compute capability, gfx."""
        return (self.vendor, self.name, self.compute_capability, self.gfx)

    def label(self) -> str:
        if self.vendor == "amd":
            return f"{self.name} ({self.gfx or 'gfx unknown'})"
        cc = self.arch.sm if self.arch else "sm unknown"
        return f"{self.name} ({cc})"


@functools.lru_cache(maxsize=256)
def _parse_arch(text: str) -> Arch:
    # A host lists the same compute capability once per GPU: parse each spelling once.
    return Arch.parse(text)


_DISTINCT: dict[int, tuple[tuple[Gpu, ...], tuple[Gpu, ...], tuple[int, ...]]] = {}


def distinct_gpus(gpus: tuple[Gpu, ...]) -> tuple[tuple[Gpu, ...], tuple[int, ...]]:
    """One GPU per model (`Gpu.model`), in order of first sight, and how many of each.

    Every rule judges a GPU by its model alone, so a 1024-GPU host is judged once per
    model, not 1024 times per build. Remembered per tuple (hosts are immutable values).
    """
    hit = _DISTINCT.get(id(gpus))
    if hit is not None and hit[0] is gpus:
        return hit[1], hit[2]
    counts: dict[tuple[str, str, str | None, str | None], int] = {}
    first: dict[tuple[str, str, str | None, str | None], Gpu] = {}
    for g in gpus:
        key = g.model
        if key not in counts:
            counts[key], first[key] = 0, g
        counts[key] += 1
    result = (tuple(first.values()), tuple(counts.values()))
    if len(_DISTINCT) > 64:
        _DISTINCT.clear()
    _DISTINCT[id(gpus)] = (gpus, *result)
    return result


@dataclass(**FROZEN)
class PythonInstall:
    """An interpreter on the host: version "3.12.1", where, and who put it there."""

    version: str
    path: str | None = None
    source: str = "path"  # "path" | "pyenv" | "assumed"
    # A free-threaded build (sysconfig Py_GIL_DISABLED, "3.14t"): it takes only cpXYt wheels.
    free_threaded: bool = False

    @property
    def label(self) -> str:
        return self.version + ("t" if self.free_threaded else "")

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
class UvPythons:
    """uv's managed Pythons on the host: prebuilt CPythons `uv python install` can fetch (issue 35).

    `installable`: the CPython versions of uv's downloads list for this platform ("3.13.2t"
    free-threaded); `source`: where uv fetches them from (a mirror setting, or uv's default).
    """

    path: str
    installable: tuple[str, ...] = ()
    source: str = ""


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
    # The Jetson Linux release ("R36.4.3", /etc/nv_tegra_release); None off Jetson or unknown.
    l4t: str | None = None
    arch: str | None = None
    pythons: tuple[PythonInstall, ...] = ()
    pyenv: Pyenv | None = None
    uv_pythons: UvPythons | None = None
    rocm_version: str | None = None
    reasons: Mapping[str, str] = field(default_factory=dict)
    source: str = "host"
    # Set when an NVIDIA driver is there (nvidia-smi runs) but could not list the
    # GPUs: the cause. Such a host is a GPU host with unknown GPUs, never "no GPU"
    # (compat.judgements.judge_gpu_host).
    nvidia_failure: str | None = None
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

    @property
    def jetson(self) -> str | None:
        """"igpu" for a Jetson whose CUDA is L4T's own (JetPack <= 6: Nano, TX2, Xavier, Orin),
        "sbsa" for one on the SBSA userspace (JetPack 7, L4T R38+: Thor), None otherwise.

        From the L4T release when the facts have it, else from the GPU: compute
        capabilities 5.3, 6.2, 7.2 and 8.7 exist only as Jetson iGPUs (NVIDIA, CUDA GPUs
        list), nvidia-smi names Orin's "Orin (nvgpu)"; 11.0 (10.1 before CUDA 13) is Thor.
        """
        if self.l4t:
            m = re.match(r"R(\d+)", self.l4t)
            if m:
                return "sbsa" if int(m.group(1)) >= 38 else "igpu"
        for g in self.nvidia_gpus:
            if g.compute_capability in TEGRA_IGPU_CC or "nvgpu" in g.name.lower():
                return "igpu"
            if g.compute_capability in TEGRA_SBSA_CC or "thor" in g.name.lower():
                return "sbsa"
        return None


# Compute capabilities only Jetson iGPUs have (TX1/Nano 5.3, TX2 6.2, Xavier 7.2, Orin 8.7)
# and Thor's (10.1 under CUDA 12.8/12.9, renumbered 11.0 from CUDA 13): NVIDIA, "CUDA GPUs".
TEGRA_IGPU_CC = frozenset({"5.3", "6.2", "7.2", "8.7"})
TEGRA_SBSA_CC = frozenset({"10.1", "11.0"})


# --- JSON -------------------------------------------------------------------------


def facts_to_json(facts: HostFacts) -> JsonObject:
    """The `torchfit detect --json` object (keys in docs/architecture.md, "Contracts")."""
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
        "l4t": facts.l4t,
        "arch": facts.arch,
        "pythons": [{"version": p.version, "path": p.path, "source": p.source,
                     **({"free_threaded": True} if p.free_threaded else {})} for p in facts.pythons],
        "pyenv": (
            None
            if facts.pyenv is None
            else {
                "path": facts.pyenv.path,
                "version": facts.pyenv.version,
                "installable": list(facts.pyenv.installable),
            }
        ),
        "uv_pythons": (
            None
            if facts.uv_pythons is None
            else {
                "path": facts.uv_pythons.path,
                "installable": list(facts.uv_pythons.installable),
                "source": facts.uv_pythons.source,
            }
        ),
        "rocm_version": facts.rocm_version,
        "nvidia_failure": facts.nvidia_failure,
        "reasons": dict(facts.reasons),
    }


# The keys `facts_to_json` writes, per object: anything else in a facts file is a
# typo or a file from something else, and a silently ignored key is a fact lost.
FACTS_KEYS = frozenset(
    ("driver_version", "gpus", "topology", "glibc", "os", "wsl", "l4t", "arch", "pythons", "pyenv",
     "uv_pythons", "rocm_version", "nvidia_failure", "reasons",
     "schema")  # what `detect --json` names its object by (docs/schemas/detect.schema.json)
)
GPU_KEYS = frozenset(("index", "name", "compute_capability", "memory_mib", "uuid", "pci_bus_id", "vendor", "gfx"))
PYTHON_KEYS = frozenset(("version", "path", "source", "free_threaded"))
PYENV_KEYS = frozenset(("path", "version", "installable"))
UV_PYTHONS_KEYS = frozenset(("path", "installable", "source"))
# No single host has more GPUs (an NVL72 rack is 18 hosts of 4); beyond this a file
# is not a host's facts and only costs time (each GPU is judged against each build).
MAX_GPUS = 1024
# A GPU name from nvidia-smi is short ("NVIDIA GH200 480GB"); anything longer is not one.
MAX_TEXT = 256


def _check_keys(obj: Mapping[str, object], known: frozenset[str], where: str) -> None:
    import difflib

    for key in obj:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            also = f" (did you mean {close[0]!r}?)" if close else ""
            raise BadInput(
                f"{where}: unknown key {str(key)[:40]!r}{also}; keys are {', '.join(sorted(known))}"
            )


def _clean_name(value: str, where: str) -> str:
    """A name without control characters (they would reach a terminal) and bounded."""
    if len(value) > MAX_TEXT:
        raise BadInput(f"{where}: 'name' is longer than {MAX_TEXT} characters")
    from torchfit.inputs import terminal_text

    return "".join(ch for ch in terminal_text(value) if ch.isprintable())


def _opt_str(obj: Mapping[str, object], key: str, where: str) -> str | None:
    val = obj.get(key)
    if val is None or isinstance(val, str):
        return val
    raise BadInput(f"{where}: {key!r} must be a string or null, not {type(val).__name__}")


def _opt_int(obj: Mapping[str, object], key: str, where: str) -> int | None:
    val = obj.get(key)
    if val is None or (isinstance(val, int) and not isinstance(val, bool)):
        return val
    raise BadInput(f"{where}: {key!r} must be an integer or null")


def facts_from_json(data: Any, source: str) -> HostFacts:
    """Rebuild `HostFacts` from `torchfit detect --json` output; BadInput names the problem."""
    where = source
    if not isinstance(data, dict):
        raise BadInput(f"{where}: expected a JSON object from `torchfit detect --json`")
    _check_keys(data, FACTS_KEYS, where)
    gpus_raw = data.get("gpus") or []
    if not isinstance(gpus_raw, list):
        raise BadInput(f"{where}: 'gpus' must be a list")
    if len(gpus_raw) > MAX_GPUS:
        raise BadInput(f"{where}: {len(gpus_raw)} GPUs; one host has at most {MAX_GPUS}")
    gpus = []
    names: Mapping[str, str] | None = None
    for i, g in enumerate(gpus_raw):
        if not isinstance(g, dict) or not isinstance(g.get("name", ""), str):
            raise BadInput(f"{where}: gpus[{i}] must be an object with a 'name'")
        gw = f"{where}: gpus[{i}]"
        _check_keys(g, GPU_KEYS, gw)
        cc = _opt_str(g, "compute_capability", gw)
        if cc is not None:
            Arch.parse(cc)
        name = _clean_name(g.get("name") or "", gw) or "unknown GPU"
        gfx = _opt_str(g, "gfx", gw)
        if gfx is not None:
            parse_gfx(gfx, gw)
        is_amd = g.get("vendor") == "amd" or bool(gfx)
        if cc is None and not is_amd and g.get("name"):
            # A GPU given by name alone: the name table knows as much as --assume gpu=NAME.
            names = load_gpu_names() if names is None else names
            cc = find_capability(name, names)
        idx = _opt_int(g, "index", gw)
        gpus.append(
            Gpu(
                index=i if idx is None else idx,
                name=name,
                compute_capability=cc,
                memory_mib=_opt_int(g, "memory_mib", gw),
                uuid=_opt_str(g, "uuid", gw),
                pci_bus_id=_opt_str(g, "pci_bus_id", gw),
                vendor="amd" if is_amd else "nvidia",
                gfx=gfx,
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
        _check_keys(p, PYTHON_KEYS, f"{where}: pythons[{i}]")
        python_version(p["version"])
        ft = p.get("free_threaded", False)
        if not isinstance(ft, bool):
            raise BadInput(f"{where}: pythons[{i}].free_threaded must be true or false")
        pythons.append(
            PythonInstall(p["version"], _opt_str(p, "path", where), p.get("source") or "path", ft)
        )
    pyenv_raw = data.get("pyenv")
    pyenv = None
    if isinstance(pyenv_raw, dict):
        # An object is checked whole: a typo ("root") or a missing path is bad input, not "no pyenv".
        _check_keys(pyenv_raw, PYENV_KEYS, f"{where}: pyenv")
        if not isinstance(pyenv_raw.get("path"), str):
            raise BadInput(f"{where}: 'pyenv' needs a 'path' (pyenv's root, a string), or give null")
        inst = pyenv_raw.get("installable") or []
        if not isinstance(inst, list) or not all(isinstance(v, str) for v in inst):
            raise BadInput(f"{where}: 'pyenv.installable' must be a list of versions")
        for v in inst:
            # pyenv's CPython builds are X.Y.Z: the plan would print `pyenv install <v>`.
            if not _PYENV_VERSION.match(v):
                raise BadInput(f"{where}: pyenv.installable {v[:40]!r} is not a CPython version like 3.12.7")
        pyenv = Pyenv(pyenv_raw["path"], _opt_str(pyenv_raw, "version", where), tuple(inst))
    elif pyenv_raw is not None and not isinstance(pyenv_raw, dict):
        raise BadInput(f"{where}: 'pyenv' must be an object or null")
    uv_pythons = _uv_pythons_from_json(data.get("uv_pythons"), where)
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
    if not all(isinstance(v, str) for v in reasons.values()):
        raise BadInput(f"{where}: 'reasons' must map a fact to a text")
    nvidia_failure = _opt_str(data, "nvidia_failure", where)
    return HostFacts(
        driver_version=driver,
        gpus=tuple(gpus),
        topology=dict(topo),
        glibc=glibc,
        os=_opt_str(data, "os", where),
        wsl=wsl,
        l4t=_opt_str(data, "l4t", where),
        arch=_opt_str(data, "arch", where),
        pythons=tuple(pythons),
        pyenv=pyenv,
        uv_pythons=uv_pythons,
        rocm_version=_opt_str(data, "rocm_version", where),
        reasons={str(k): str(v) for k, v in reasons.items()},
        nvidia_failure=None if gpus else nvidia_failure,
        source=f"file: {source}",
        name=source.replace("\\", "/").rsplit("/", 1)[-1],
    )


def parse_facts_file(text: str, source: str) -> HostFacts:
    """JSON text of a facts file -> HostFacts; BadInput with the position on bad JSON."""
    return facts_from_json(loads_json(text, source), source)


_PYENV_VERSION = re.compile(r"^[0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,4}t?$")  # "3.13.2t": free-threaded
_GFX_TARGET = re.compile(r"^gfx[0-9a-f]{3,4}$")


def parse_gfx(value: str, what: str) -> str:
    """An AMD gfx target ("gfx942", "gfx90a", "gfx1100"); BadInput otherwise."""
    low = value.strip().lower()
    if not _GFX_TARGET.match(low):
        raise BadInput(f"{what}: {value[:40]!r} is not an AMD gfx target like gfx942 or gfx90a")
    return low


# --- --assume -----------------------------------------------------------------------

ASSUME_KEYS = ("driver", "gpu", "glibc", "python", "os", "wsl", "arch")


def _assumed_gpu(value: str, index: int, gpu_names: Mapping[str, str]) -> Gpu | None:
    v = value.strip()
    low = v.lower()
    if low == "none":
        return None
    if low.startswith("gfx"):
        gfx = parse_gfx(low, "--assume gpu")
        return Gpu(index=index, name=f"AMD {gfx}", vendor="amd", gfx=gfx)
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
            ft = value.lower().endswith("t")  # "3.14t": a free-threaded interpreter
            number = value[:-1] if ft else value
            python_version(number)
            pythons.append(PythonInstall(number, None, "assumed", ft))
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
        # The user stated the GPUs: a failed nvidia-smi no longer leaves them unknown.
        changes["nvidia_failure"] = None
    if pythons:
        changes["pythons"] = tuple(pythons)
    return replace(facts, reasons=reasons, **changes)


def _uv_pythons_from_json(raw: object, where: str) -> UvPythons | None:
    """A facts file's "uv_pythons" object (null, or absent in a file older than issue 35: no uv)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: 'uv_pythons' must be an object or null")
    _check_keys(raw, UV_PYTHONS_KEYS, f"{where}: uv_pythons")
    if not isinstance(raw.get("path"), str):
        raise BadInput(f"{where}: 'uv_pythons' needs a 'path' (uv's executable, a string), or give null")
    inst = raw.get("installable") or []
    if not isinstance(inst, list) or not all(isinstance(v, str) and _PYENV_VERSION.match(v) for v in inst):
        raise BadInput(f"{where}: 'uv_pythons.installable' must be a list of CPython versions like 3.12.7")
    return UvPythons(raw["path"], tuple(inst), _opt_str(raw, "source", where) or "")
