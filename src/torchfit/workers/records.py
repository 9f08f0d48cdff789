"""The shapes of the workers' records, as the host side reads them (verify, doctor).

Host side only, beside the protocol they travel by (torchfit_runtime.py: one JSON object a
line, `kind` and `t`): no worker imports this module, and it imports nothing of torchfit, so
the workers' contract holds (docs/architecture.md, "The layering"). Each TypedDict names the
keys one function of torchfit_runtime.py or of a worker writes, with the types it writes them
in; every key is optional (`total=False`), because a record comes from another interpreter (a
worker that stopped part-way, an older torchfit's worker) and the readers ask with `.get()`.

Who writes what:
- `PythonRecord` python_info(), `HostRecord` host_info(), `TorchRecord` torch_info(),
  `LibRecord` probe_lib()/probe_nccl(), `LibsRecord` runtime_libs(), `SummaryRecord` summary();
- inspect_worker.py's `fact` lines, merged by key (verify/watch.merge_facts): `InspectionFacts`,
  with `DevicesRecord`, `GpuRecord`, `KernelRecord`, `ConvRecord`;
- ddp_worker.py's `runtime` record: a `PeerRecord` (the summary and its rank), one per rank in
  its `peers` record;
- doctor_worker.py's `meta`, `torch` and `libs` records (doctor/context.Context reads them):
  `MetaRecord`, a `TorchRecord` and a `LibsRecord`; its distributions: `DistRecord`.
"""

from __future__ import annotations

from typing import TypedDict


class PythonRecord(TypedDict, total=False):
    """torchfit_runtime.python_info(): the interpreter that ran the worker."""

    version: str
    executable: str
    prefix: str
    base_prefix: str


class HostRecord(TypedDict, total=False):
    """torchfit_runtime.host_info(): the node, as the worker's process saw it."""

    hostname: str
    nvrm: str | None  # the first line of /proc/driver/nvidia/version
    nvidia_module: str | None  # /sys/module/nvidia/version
    pid: int


class TorchRecord(TypedDict, total=False):
    """torchfit_runtime.torch_info(): the imported torch's build (compiled versions)."""

    version: str | None
    file: str | None
    cuda: str | None
    hip: str | None
    git: str | None
    nccl_compiled: list[int] | int | None  # torch.cuda.nccl.version(): a tuple (as a list) or a code
    nccl_compiled_error: str | None
    cudnn_compiled: list[int] | None


class LibRecord(TypedDict, total=False):
    """torchfit_runtime.probe_lib(): a mapped library, the copy that answers and its raw code."""

    paths: list[str]
    path: str | None
    code: int | None
    error: str | None
    how: str | None  # "global symbol scope", "first mapped", "linked into libtorch_cuda.so"


class LibsRecord(TypedDict, total=False):
    """torchfit_runtime.runtime_libs(): the libraries mapped now (inspect_worker adds the trigger's error)."""

    nccl: LibRecord
    cudnn: int | None  # torch.backends.cudnn.version(): the loaded library's code
    cudnn_error: str | None
    cudnn_lib: LibRecord
    cudart: LibRecord
    cuda_driver_api: LibRecord
    nccl_trigger_error: str


class SummaryRecord(TypedDict, total=False):
    """torchfit_runtime.summary(): one rank's (one node's) runtime versions, compared across ranks."""

    hostname: str
    nvrm: str | None
    nvidia_module: str | None
    python: str
    torch: str | None
    cuda: str | None
    hip: str | None
    cudnn: int | None
    cudnn_path: str | None
    nccl_code: int | None
    nccl_path: str | None
    cudart_code: int | None
    env: dict[str, str]


class PeerRecord(SummaryRecord, total=False):
    """ddp_worker.py's `runtime` info: the summary, and which rank of which node it is."""

    rank: int
    local_rank: int
    group_rank: int  # torchrun's c10d numbering of nodes, in join order
    node_rank: int | None  # the node rank the user gave


class GpuRecord(TypedDict, total=False):
    """inspect_worker.gpu_facts(): one GPU as torch sees it (or `error`)."""

    index: int
    name: str | None
    capability: str  # "9.0"
    gcn_arch: str | None
    memory_mib: int
    uuid: str | None
    pci_bus_id: str | None
    error: str


class DevicesRecord(TypedDict, total=False):
    """inspect_worker's `devices` fact: how many GPUs torch sees, and why none."""

    count: int
    gpus: list[GpuRecord]
    error: str | None


class KernelRecord(TypedDict, total=False):
    """inspect_worker.run_kernels(): a real kernel on one GPU."""

    index: int
    ok: bool
    error: str | None
    ms: float


class ConvRecord(TypedDict, total=False):
    """inspect_worker.run_conv(): one cuDNN (MIOpen) convolution on GPU 0."""

    ok: bool
    error: str | None
    ms: float


class InspectionFacts(TypedDict, total=False):
    """inspect_worker.py's `fact` lines merged by key (verify/watch.merge_facts)."""

    python: PythonRecord
    host: HostRecord
    env: dict[str, str]
    torch_error: str  # torch did not import: why
    torch_traceback: str | None
    import_s: float
    torch: TorchRecord
    arch_list: list[str]
    devices: DevicesRecord
    libs: LibsRecord
    summary: SummaryRecord
    kernels: list[KernelRecord]
    conv: ConvRecord


# --- doctor_worker.py's records (doctor/context.WorkerFacts) --------------------------------------


class DistRecord(TypedDict, total=False):
    """doctor_worker.distributions(): one torch, triton, nvidia-* or cuda-* distribution."""

    name: str
    version: str
    path: str | None  # its dist-info
    installer: str | None  # INSTALLER's line
    wheel: str | None  # torch's WHEEL file
    requires: list[str]  # torch's Requires-Dist
    libs: list[str]  # an nvidia-* wheel's shared libraries


class DoctorPythonRecord(TypedDict, total=False):
    """doctor_worker.metadata_report()'s `python`: python_info()'s keys and sys.path."""

    executable: str
    version: str
    prefix: str
    base_prefix: str
    path: list[str]


class MetaRecord(TypedDict, total=False):
    """doctor_worker.py's `metadata` record: the interpreter, its loader variables, its distributions."""

    python: DoctorPythonRecord
    env: dict[str, str | None]  # LD_PRELOAD, LD_LIBRARY_PATH, CONDA_PREFIX, VIRTUAL_ENV
    distributions: list[DistRecord] | None
    distributions_error: str | None


class ErrorRecord(TypedDict, total=False):
    """An exception as doctor_worker reports it: torch's import error."""

    type: str
    message: str
    traceback: str


class DoctorGpuRecord(TypedDict, total=False):
    """doctor_worker.torch_report()'s `devices`: one GPU as torch.cuda names it."""

    index: int
    name: str | None
    capability: list[int] | None
    error: str | None


class DoctorTorchRecord(TypedDict, total=False):
    """doctor_worker.py's `torch` record (torch_report()): the import, the build, what CUDA says."""

    imported: bool
    error: ErrorRecord
    version: str | None
    file: str | None
    cuda: str | None
    hip: str | None
    arch_flags: str | None
    arch_error: str | None
    nccl_compiled: list[int] | int | None
    nccl_error: str | None
    cudnn_compiled: list[int] | int | None
    cudnn_runtime: int | None
    cudnn_error: str | None
    available: bool | None
    available_error: str | None
    device_count: int | None
    init_error: str | None
    devices: list[DoctorGpuRecord]
    warnings: list[str]


class LibVersionRecord(TypedDict, total=False):
    """torchfit_runtime.lib_version(): the raw version code a library file reports (or `error`)."""

    path: str
    kind: str | None
    code: int
    error: str


class BoundRecord(TypedDict, total=False):
    """doctor_worker.effective_libraries(): the copy a symbol binds to, and in which scope."""

    path: str
    scope: str


class LibrariesRecord(TypedDict, total=False):
    """doctor_worker.py's `libraries` record (libraries_report()): what is mapped and what answers."""

    maps: list[str] | None
    maps_error: str | None
    libs: list[LibVersionRecord]
    effective: dict[str, BoundRecord]  # nccl, cudnn, cudart -> the copy libtorch_cuda binds
    effective_error: str | None


__all__ = [
    "BoundRecord", "ConvRecord", "DevicesRecord", "DistRecord", "DoctorGpuRecord", "DoctorPythonRecord",
    "DoctorTorchRecord", "ErrorRecord", "GpuRecord", "HostRecord", "InspectionFacts", "KernelRecord",
    "LibRecord", "LibVersionRecord", "LibrariesRecord", "LibsRecord", "MetaRecord", "PeerRecord",
    "PythonRecord", "SummaryRecord", "TorchRecord",
]
