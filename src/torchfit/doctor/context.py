"""What the doctor's checks look at, read once and on demand: the I/O side of doctor.

`Context` runs tools through the one `Runner` (nvidia-smi, lspci, ldconfig, dkms,
dmesg), reads files under `root` (/proc, /sys, /dev, /etc, /lib/modules,
/usr/lib/wsl; `--root DIR` relocates them, which is how checks are tested), and
runs the worker (`doctor_worker.py`) in the target environment's Python. Each fact
is computed the first time a check asks for it and kept; a fact that cannot be
read carries the reason instead of raising. `gather` runs the worker and the host
tools side by side, because importing torch is the slow part.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from torchfit.background import Background
from torchfit.compat import versions
from torchfit.compat.facts import Gpu
from torchfit.doctor import parse
from torchfit.errors import ProbeFailed, ToolMissing, ToolTimeout
from torchfit.owned import temp_dir
from torchfit.runner import Runner, index_variables
from torchfit.text import first_line
from torchfit.workers import last_record, read_records, worker_argv
from torchfit.workers.records import (
    DistRecord,
    DoctorTorchRecord,
    LibrariesRecord,
    LibVersionRecord,
    MetaRecord,
)
from torchfit.workers.torchfit_runtime import lib_kind

if TYPE_CHECKING:
    from torchfit.compat.judgements import GpuHost
    from torchfit.host.nvidia import NvidiaProbe


class ToolOutput(NamedTuple):
    """One command's outcome: `cause` is None when it ran and exited 0."""

    argv: tuple[str, ...]
    stdout: str
    stderr: str
    code: int | None
    cause: str | None
    missing: bool = False

    @property
    def text(self) -> str:
        return f"{self.stdout}\n{self.stderr}".strip()


class PciFacts(NamedTuple):
    devices: tuple[parse.PciDevice, ...]
    found: int | None  # how many NVIDIA GPUs; None: unknown
    source: str
    cause: str | None


@dataclass
class WorkerFacts:
    """What the worker reported, stage by stage; `cause` says why something is missing."""

    python: str | None
    cause: str | None = None
    meta: MetaRecord = field(default_factory=lambda: MetaRecord())
    torch: DoctorTorchRecord | None = None
    libs: LibrariesRecord | None = None
    last_stage: str | None = None

    @property
    def distributions(self) -> list[DistRecord]:
        d = self.meta.get("distributions")
        return [x for x in d if isinstance(x, dict)] if isinstance(d, list) else []

    def dist(self, *names: str) -> list[DistRecord]:
        want = {n.lower() for n in names}
        return [d for d in self.distributions if str(d.get("name", "")).lower().replace("_", "-") in want]

    @property
    def prefix(self) -> str | None:
        py = self.meta.get("python")
        return py.get("prefix") if isinstance(py, dict) else None


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


class Context:
    """Facts for the checks of one doctor run."""

    def __init__(
        self,
        *,
        root: str = "/",
        runner: Runner | None = None,
        environ: Mapping[str, str] | None = None,
        python: str | None = None,
        python_source: str = "",
        log_path: str | None = None,
        log_text: str | None = None,
        timeout: float = 10.0,
        worker_timeout: float = 300.0,
    ) -> None:
        self.root = root
        self.runner = runner or Runner()
        self.environ = dict(os.environ if environ is None else environ)
        self.python = python
        self.python_source = python_source
        self.log_path = log_path
        self.log_text = log_text
        self.timeout = timeout
        self.worker_timeout = worker_timeout
        self._tools: dict[tuple[str, ...], ToolOutput] = {}
        self._lock = threading.Lock()
        self._smi_hung: str | None = None
        self._libv: dict[str, tuple[tuple[int, ...] | None, str | None]] = {}
        self._worker_facts: WorkerFacts | None = None

    def gather(self) -> None:
        """Run the worker while the host's tools run in a second thread.

        The worker (importing torch: the slow part) runs in this thread, so Ctrl-C
        reaches the runner, which kills it; the tools have short timeouts. The
        checks start after both, with every fact they share already read.
        """
        helper = Background(self._prefetch, name="torchfit-doctor-tools")
        self._worker_facts = self._run_worker()
        helper.wait()

    def _prefetch(self) -> None:
        for name in ("nvidia", "smi", "pci", "ldconfig", "glibc"):
            try:
                getattr(self, name)
            except Exception:  # the check that needs it reports the reason
                pass
        try:
            if len(self.nvidia.gpus) >= 2:
                _ = (self.topology, self.p2p)
        except Exception:
            pass

    # --- files ---------------------------------------------------------------------

    def path(self, path: str) -> str:
        return _under(self.root, path)

    def read(self, path: str, limit: int = 4 << 20) -> str | None:
        """A text file under root, or None when it is absent or unreadable."""
        try:
            with open(self.path(path), encoding="utf-8", errors="replace") as fh:
                return fh.read(limit)
        except (OSError, ValueError):
            return None

    def torch_record(self) -> str | None:
        """torch's RECORD (…/torch-X.dist-info/RECORD) on the target interpreter's path, or None."""
        from torchfit.lock.closure import env_site_dirs, find_record

        w = self.worker
        file = (w.torch or {}).get("file") if w.torch else None
        roots = [os.path.dirname(os.path.dirname(str(file)))] if file else []
        py = w.meta.get("python")
        roots += [p for p in (py.get("path") or []) if isinstance(p, str)] if isinstance(py, dict) else []
        if w.prefix:
            roots += env_site_dirs(w.prefix)
        return find_record(roots)

    @cached_property
    def torch_files(self) -> tuple[str | None, int, list[Any]]:
        """(RECORD, files checked, files that differ) of torch's files against its wheel's RECORD,
        hashed once per run (torch-import's fix and torch-files both ask)."""
        from torchfit.lock.closure import record_mismatches

        record = self.torch_record()
        if record is None:
            return None, 0, []
        checked, bad = record_mismatches(record)
        return record, checked, list(bad)

    def why_unreadable(self, path: str) -> str:
        try:
            with open(self.path(path), "rb"):
                return f"{path} is readable"
        except FileNotFoundError:
            return f"{path} does not exist"
        except PermissionError:
            return f"{path} is not readable (permission denied)"
        except IsADirectoryError:
            return f"{path} is a directory"
        except OSError as exc:
            return f"{path} cannot be read ({exc.strerror or exc})"

    # --- tools -----------------------------------------------------------------------

    def which(self, name: str) -> str | None:
        found = self.runner.which(name)
        if found is None and self.root == "/":
            # ldconfig and lspci live in /sbin or /usr/sbin, often not on a user's PATH.
            for d in ("/sbin", "/usr/sbin"):
                candidate = os.path.join(d, name)
                if os.access(candidate, os.X_OK):
                    return candidate
        return found

    def tool(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> ToolOutput:
        """Run a tool once per doctor run (same argv, same answer)."""
        key = tuple(argv)
        with self._lock:
            if key in self._tools:
                return self._tools[key]
        out = self._run_tool(key, env)
        with self._lock:
            self._tools[key] = out
        return out

    def _run_tool(self, argv: tuple[str, ...], env: Mapping[str, str] | None) -> ToolOutput:
        name = argv[0]
        if name == "nvidia-smi" and self._smi_hung:
            return ToolOutput(argv, "", "", None, f"not run: {self._smi_hung}")
        exe = self.which(name)
        if exe is None:
            return ToolOutput(argv, "", "", None, f"{name} not found on PATH", missing=True)
        try:
            res = self.runner.run([exe, *argv[1:]], timeout=self.timeout, env=env, unset=index_variables())
        except ToolTimeout as exc:
            if name == "nvidia-smi":
                self._smi_hung = f"nvidia-smi timed out after {self.timeout:g} s"
            return ToolOutput(argv, exc.stdout, exc.stderr, None, f"{name} timed out after {self.timeout:g} s")
        except ToolMissing as exc:
            return ToolOutput(argv, "", "", None, exc.message, missing=True)
        except ProbeFailed as exc:
            return ToolOutput(argv, "", "", None, f"{name} could not run: {exc.message}")
        if res.returncode != 0:
            said = first_line(res.stdout) or first_line(res.stderr)
            cause = f"{name} exited with status {res.returncode}" + (f": {said}" if said else "")
            return ToolOutput(argv, res.stdout, res.stderr, res.returncode, cause)
        return ToolOutput(argv, res.stdout, res.stderr, 0, None)

    # --- NVIDIA driver and GPUs --------------------------------------------------------

    @cached_property
    def nvidia(self) -> NvidiaProbe:
        """probes.probe_nvidia_gpus: GPUs from `nvidia-smi --query-gpu`, or the cause."""
        from torchfit.host.nvidia import probe_nvidia_gpus

        found = probe_nvidia_gpus(self.runner, timeout=self.timeout)
        if found.cause and "timed out" in found.cause:
            self._smi_hung = found.cause
        return found

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return tuple(self.nvidia.gpus)

    @cached_property
    def smi(self) -> ToolOutput:
        """Plain `nvidia-smi`: its banner (driver, CUDA ceiling) or its complaint."""
        return self.tool(["nvidia-smi"])

    @cached_property
    def pci(self) -> PciFacts:
        """NVIDIA GPUs on the PCI bus: `lspci -nn`, else sysfs (no tool, no driver needed)."""
        res = self.tool(["lspci", "-nn"])
        if res.cause is None:
            if res.stdout.strip() and not parse.looks_like_lspci(res.stdout):
                return PciFacts((), None, "lspci -nn", f"lspci printed nothing torchfit could read "
                                                       f"({first_line(res.stdout, 80)!r})")
            devices = parse.parse_lspci(res.stdout)
            return PciFacts(devices, len(devices), "lspci -nn", None)
        from torchfit.host.pci import find_pci_gpus

        sysfs = self.path("/sys/bus/pci/devices")
        if os.path.isdir(sysfs):
            count = find_pci_gpus(self.root).get("NVIDIA", 0)
            return PciFacts((), count, "/sys/bus/pci/devices", None)
        return PciFacts((), None, "", f"{res.cause}, and /sys/bus/pci/devices is absent")

    @cached_property
    def gpu_host(self) -> GpuHost:
        """compat.judgements.judge_gpu_host for this host: the judgement resolve,
        install and verify make too ("gpu", "none" or "unknown")."""
        from torchfit.compat.facts import HostFacts
        from torchfit.compat.judgements import judge_gpu_host
        from torchfit.host import nvidia_failure

        failure = nvidia_failure(self.nvidia, self.pci.found)
        return judge_gpu_host(HostFacts(gpus=self.gpus, nvidia_failure=failure))

    @cached_property
    def nvrm_text(self) -> str | None:
        return self.read("/proc/driver/nvidia/version")

    @cached_property
    def kernel_module_version(self) -> str | None:
        from torchfit.host.nvidia import parse_module_version, parse_nvrm_version

        if self.nvrm_text:
            found = parse_nvrm_version(self.nvrm_text)
            if found:
                return found
        text = self.read("/sys/module/nvidia/version")
        return parse_module_version(text) if text else None

    @cached_property
    def modules(self) -> frozenset[str] | None:
        text = self.read("/proc/modules")
        return parse.parse_proc_modules(text) if text is not None else None

    @cached_property
    def kernel_release(self) -> str | None:
        text = self.read("/proc/sys/kernel/osrelease")
        if text is None and self.root == "/":
            text = os.uname().release  # sandboxes that hide /proc/sys still answer uname(2)
        return parse.parse_osrelease(text) if text else None

    # --- the loader ---------------------------------------------------------------------

    @cached_property
    def ldconfig(self) -> tuple[tuple[parse.LdEntry, ...], ToolOutput]:
        res = self.tool(["ldconfig", "-p"])
        return parse.parse_ldconfig(res.stdout), res

    def lib_versions(self, paths: Sequence[str]) -> dict[str, tuple[tuple[int, ...] | None, str | None]]:
        """Ask each library for its version (ncclGetVersion, ...) in a separate, torch-free
        process with LD_PRELOAD cleared; fall back to the version in the file name."""
        out: dict[str, tuple[tuple[int, ...] | None, str | None]] = {}
        wanted = []
        for p in dict.fromkeys(paths):
            if p in self._libv:
                out[p] = self._libv[p]
            elif p:
                wanted.append(p)
        if not wanted:
            return out
        codes: dict[str, LibVersionRecord] = {}  # lib_version()'s, as the worker writes it
        try:
            res = self.runner.run(
                worker_argv(sys.executable, "doctor", "libversions", *wanted),
                timeout=max(self.timeout, 30.0),
                env={"LD_PRELOAD": ""}, unset=index_variables(),
            )
            for lib in (last_record(read_records(res.stdout), "libversions") or {}).get("libs") or []:
                if isinstance(lib, dict) and isinstance(lib.get("path"), str):
                    codes[lib["path"]] = cast("LibVersionRecord", lib)
        except ProbeFailed:
            pass
        for p in wanted:
            out[p] = self._libv[p] = decode_lib(codes.get(p) or LibVersionRecord(), p)
        return out

    # --- the target environment ------------------------------------------------------------

    @property
    def worker(self) -> WorkerFacts:
        if self._worker_facts is None:
            self._worker_facts = self._run_worker()
        return self._worker_facts

    def _run_worker(self) -> WorkerFacts:
        facts = WorkerFacts(self.python)
        if self.python is None:
            facts.cause = "no Python to inspect (no --python/--env, no active venv or conda env, no python3 on PATH)"
            return facts
        try:
            with temp_dir("doctor") as cwd:
                # An empty working directory: a `torch/` in the user's cwd (a PyTorch
                # checkout) must not be what the report describes.
                res = self.runner.run(worker_argv(self.python, "doctor", "report"), timeout=self.worker_timeout,
                                      cwd=cwd, unset=index_variables())
        except ToolTimeout as exc:
            self._read_worker_lines(facts, exc.stdout)
            facts.cause = f"the worker timed out after {self.worker_timeout:g} s (stage: {facts.last_stage})"
            return facts
        except ProbeFailed as exc:
            facts.cause = f"{self.python} could not be run: {exc.message}"
            return facts
        self._read_worker_lines(facts, res.stdout)
        if facts.last_stage != "done":
            if res.returncode < 0:
                how = f"was killed by signal {-res.returncode}"
            else:
                how = f"exited with status {res.returncode}"
            facts.cause = f"the worker {how} during stage '{facts.last_stage or 'start-up'}'" + (
                f": {first_line(res.stderr[-2000:])}" if res.stderr.strip() else ""
            )
        return facts

    @staticmethod
    def _read_worker_lines(facts: WorkerFacts, stdout: str) -> None:
        """Fold the worker's records (torchfit.workers protocol) into `facts`."""
        for data in read_records(stdout):
            kind = data.get("kind")
            if not isinstance(kind, str):
                continue
            if kind == "stage":
                stage = data.get("stage")
                facts.last_stage = stage if isinstance(stage, str) else facts.last_stage
                continue
            body = {k: v for k, v in data.items() if k not in ("kind", "t")}
            if kind == "error":
                facts.last_stage = "worker-error"
                facts.cause = f"the worker failed: {data.get('type')}: {data.get('message')}"
                continue
            facts.last_stage = kind
            # each record as the worker writes it (workers/records.py): read with .get() only
            if kind == "metadata":
                facts.meta = cast("MetaRecord", body)
            elif kind == "torch":
                facts.torch = cast("DoctorTorchRecord", body)
            elif kind == "libraries":
                facts.libs = cast("LibrariesRecord", body)

    # --- topology, host facts ----------------------------------------------------------

    @cached_property
    def topology(self) -> tuple[dict[str, str], str | None]:
        from torchfit.host.nvidia import parse_topology

        res = self.tool(["nvidia-smi", "topo", "-m"])
        if res.cause:
            return {}, res.cause
        links = parse_topology(res.stdout)
        return links, None if links else f"`nvidia-smi topo -m` printed no GPU matrix ({first_line(res.stdout)!r})"

    @cached_property
    def p2p(self) -> tuple[dict[str, str], str | None]:
        from torchfit.host.nvidia import parse_topology

        # `topo -p2p r` prints the same GPU matrix layout as `topo -m`, with
        # OK/CNS/GNS/TNS/NS/DR/U cells, so the topology parser reads it.
        res = self.tool(["nvidia-smi", "topo", "-p2p", "r"])
        if res.cause:
            return {}, res.cause
        cells = parse_topology(res.stdout)
        return cells, None if cells else f"`nvidia-smi topo -p2p r` printed no GPU matrix ({first_line(res.stdout)!r})"

    @cached_property
    def glibc(self) -> tuple[str | None, str | None]:
        from torchfit.host.system import probe_glibc

        return probe_glibc(self.runner, self.root, timeout=self.timeout)

    @cached_property
    def wsl(self) -> tuple[bool | None, str | None]:
        from torchfit.host.system import probe_wsl

        return probe_wsl(self.root)

    @cached_property
    def matrix(self) -> tuple[Any, str | None]:
        try:
            from torchfit.cache import load_matrix

            return load_matrix(), None
        except Exception as exc:  # ImportError (packaging), MatrixError, a missing file
            return None, f"the compatibility matrix could not be loaded ({type(exc).__name__}: {exc})"

    @cached_property
    def interfaces(self) -> tuple[tuple[str, ...] | None, str | None]:
        from torchfit.host.netenv import probe_interfaces

        return probe_interfaces(self.root)


def decode_lib(lib: LibVersionRecord, path: str) -> tuple[tuple[int, ...] | None, str | None]:
    """A worker's {"kind", "code"} -> (version, how it was found)."""
    kind = lib.get("kind") or lib_kind(path)
    code = lib.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        decoder = {"nccl": versions.decode_nccl_code, "cudnn": versions.decode_cudnn_code,
                   "cudart": versions.decode_cuda_code, "cuda": versions.decode_cuda_code}.get(str(kind))
        version = decoder(code) if decoder else None
        if version:
            fn = {"nccl": "ncclGetVersion", "cudnn": "cudnnGetVersion", "cudart": "cudaRuntimeGetVersion",
                  "cuda": "cuDriverGetVersion"}[str(kind)]
            return version, f"{fn}() = {code}"
    real = os.path.realpath(path)
    from_name = parse.version_from_filename(real) or parse.version_from_filename(path)
    if from_name:
        return from_name, f"file name {os.path.basename(real)}"
    err = lib.get("error")
    return None, str(err) if err else "no version in the file name"
