"""`--log FILE`: recognise the error messages of a broken GPU stack and say what caused them.

Each pattern is matched against the verbatim text PyTorch, NCCL, the CUDA driver or
nvidia-smi print (the tests use messages quoted in the upstream issues cited
below) and maps it to its cause, the check that looks at that cause, and the fix.
`parse_log` is pure; the checks only run when --log is given.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from torchfit.compat import versions
from torchfit.doctor import parse
from torchfit.doctor.context import Context
from torchfit.doctor.model import Verdict, check, fail, ok, warn
from torchfit.redact import redact


class LogHit(NamedTuple):
    pattern: str
    line_no: int
    line: str
    match: re.Match[str]


class Pattern(NamedTuple):
    id: str
    title: str
    regex: re.Pattern[str]
    explain: Callable[[re.Match[str]], tuple[str, str]]  # match -> (cause, fix)


def _version_text(raw: str) -> str:
    """"(8, 3, 2)" -> "8.3.2"; "7102" (cuDNN 7 style) -> "7.1.2"."""
    nums = re.findall(r"[0-9]+", raw)
    if len(nums) >= 2:
        return ".".join(nums[:3])
    if nums:
        decoded = versions.decode_cudnn_code(int(nums[0][:9]))
        return parse.fmt_version(decoded) if decoded else nums[0]
    return raw


def _cudnn(m: re.Match[str]) -> tuple[str, str]:
    built, runtime = _version_text(m.group("built")), _version_text(m.group("runtime"))
    return (
        f"torch was built against cuDNN {built} but {m.group('verb')} {runtime} at run time: another libcudnn is "
        "found before the one torch ships with (LD_LIBRARY_PATH, a conda env's lib/, the system)",
        "see cudnn-shadowed for every libcudnn on the loader path; drop that directory from LD_LIBRARY_PATH "
        "(pytorch/pytorch#81881 words it so), remove the conda cudnn package, or reinstall the env's "
        "nvidia-cudnn package",
    )


# The NCCL release that added a symbol torch calls: an older libnccl lacks it.
_NCCL_SINCE = {
    "ncclCommRegister": ("2.19", "user-buffer registration arrived in NCCL 2.19"),
    "ncclCommDeregister": ("2.19", "user-buffer registration arrived in NCCL 2.19"),
    "ncclCommResume": ("2.29.7", "ncclCommSuspend/ncclCommResume arrived in NCCL 2.29.7 (NVIDIA/nccl#2337)"),
    "ncclCommSuspend": ("2.29.7", "ncclCommSuspend/ncclCommResume arrived in NCCL 2.29.7 (NVIDIA/nccl#2337)"),
}


def _nccl_symbol(m: re.Match[str]) -> tuple[str, str]:
    sym = m.group("symbol")
    since = _NCCL_SINCE.get(sym)
    detail = f"; {since[1]}, so the library loaded is older than NCCL {since[0]}" if since else ""
    return (
        f"the libnccl that loaded lacks {sym}, which torch was built to call{detail}",
        "two NCCL packages in one env (nvidia-nccl-cu12 and -cu13, pytorch/pytorch#186591) or an older "
        "libnccl on LD_PRELOAD / LD_LIBRARY_PATH (pytorch/pytorch#119072): see nccl-cu12-and-cu13 and "
        "nccl-shadowed; `pip install --force-reinstall --no-deps nvidia-nccl-cuXX==<torch's pin>` restores it",
    )


def _driver_too_old(m: re.Match[str]) -> tuple[str, str]:
    code = int(m.group("code")[:9])
    got = versions.decode_cuda_code(code)
    cuda = f"{got[0]}.{got[1]}" if got else "?"
    return (
        f"found version {code} is CUDA {cuda}: the newest CUDA this driver runs (cudaDriverGetVersion encodes "
        f"1000*major + 10*minor), older than the CUDA torch was built for",
        f"upgrade the NVIDIA driver (driver-too-old names the floor), or install a torch build for CUDA "
        f"{got[0] if got else '?'}.x: `torchfit resolve` reads the driver and picks one",
    )


def _arch(m: re.Match[str]) -> tuple[str, str]:
    sm = m.groupdict().get("sm")
    if sm:
        return (
            f"this torch has no kernels for {sm}: the GPU is newer than its arch list",
            "install a build whose arch list covers the GPU (arch-not-covered; `torchfit resolve` checks it)",
        )
    return (
        "a kernel was launched on a GPU the build has no code (or PTX) for",
        "install a build whose arch list covers the GPU (arch-not-covered; `torchfit resolve` checks it)",
    )


def _cpu(_m: re.Match[str]) -> tuple[str, str]:
    return (
        "the torch in this env is a CPU-only build",
        "install a CUDA build (torch-cpu-build; `torchfit resolve` picks one)",
    )


def _nvml(m: re.Match[str]) -> tuple[str, str]:
    return (
        "the driver's userspace libraries were updated but the running kernel module was not",
        "reboot, or reload the module (nvml-mismatch)",
    )


def _glibc(m: re.Match[str]) -> tuple[str, str]:
    who = m.group("by") or "a torch library"
    return (
        f"{who} needs glibc {m.group('glibc')}, newer than this system's",
        "use an OS with a newer glibc, or a torch release built for this one (glibc-too-old; `torchfit "
        "resolve` reads glibc)",
    )


def _socket(_m: re.Match[str]) -> tuple[str, str]:
    return (
        "NCCL found no network interface to bootstrap on: NCCL_SOCKET_IFNAME names none this host has",
        "fix or unset NCCL_SOCKET_IFNAME (nccl-socket-ifname)",
    )


def _shm(_m: re.Match[str]) -> tuple[str, str]:
    return (
        "NCCL could not create its shared-memory segment: /dev/shm is too small (64 MB in a default container)",
        "`docker run --shm-size=16g` or `--ipc=host` (dev-shm-size)",
    )


def _smi(_m: re.Match[str]) -> tuple[str, str]:
    return (
        "nvidia-smi cannot reach the kernel module: not loaded, or not built for the running kernel",
        "see driver-loaded and driver-module-for-kernel",
    )


PATTERNS: tuple[Pattern, ...] = (
    # "cuDNN version incompatibility: PyTorch was compiled  against (8, 3, 2) but found runtime
    # version (8, 0, 3)" (pytorch/pytorch#81881); "... compiled against (8, 3, 2) but linked
    # against (8, 0, 3)" (pytorch/functorch#926); "cuDNN version mismatch: PyTorch was compiled
    # against 7102 but linked against 7600" (jwyang/faster-rcnn.pytorch#662).
    Pattern(
        "log-cudnn-mismatch",
        "the log shows no cuDNN version mismatch",
        re.compile(
            r"cuDNN version (?:incompatibility|mismatch): PyTorch was compiled\s+against\s+"
            r"(?P<built>\([0-9, ]+\)|[0-9]+)\s+but\s+(?P<verb>found runtime version|linked against)\s+"
            r"(?P<runtime>\([0-9, ]+\)|[0-9]+)"
        ),
        _cudnn,
    ),
    # "ImportError: .../torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister"
    # (pytorch/pytorch#119072); "... undefined symbol: ncclCommResume" (lyogavin/airllm#331,
    # cause in pytorch/pytorch#186591).
    Pattern(
        "log-nccl-undefined-symbol",
        "the log shows no undefined NCCL symbol",
        re.compile(r"undefined symbol: (?P<symbol>nccl[A-Za-z0-9_]+)"),
        _nccl_symbol,
    ),
    # "The NVIDIA driver on your system is too old (found version 11040)" (lllyasviel/Fooocus#1313).
    Pattern(
        "log-driver-too-old",
        "the log shows no 'driver too old' error",
        re.compile(r"The NVIDIA driver on your system is too old \(found version (?P<code>[0-9]{1,9})\)"),
        _driver_too_old,
    ),
    # "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current
    # PyTorch installation." (Hellod035/LeggedLab#26); "no kernel image is available for
    # execution on the device" (CUDA error text).
    Pattern(
        "log-arch-not-covered",
        "the log shows no GPU the build lacks kernels for",
        re.compile(
            r"with CUDA capability (?P<sm>sm_[0-9]+[a-z]?) is not compatible with the current PyTorch installation"
            r"|no kernel image is available for execution on the device"
        ),
        _arch,
    ),
    Pattern(
        "log-torch-cpu-build",
        "the log shows no CPU-only torch",
        re.compile(r"Torch not compiled with CUDA enabled"),
        _cpu,
    ),
    # "Failed to initialize NVML: Driver/library version mismatch" (intel/llvm#17614).
    Pattern(
        "log-nvml-mismatch",
        "the log shows no NVML driver/library mismatch",
        re.compile(r"Failed to initialize NVML: Driver/library version mismatch", re.IGNORECASE),
        _nvml,
    ),
    # "ImportError: /lib64/libm.so.6: version `GLIBC_2.27' not found (required by
    # .../libcurand.so.10)" (pytorch/pytorch#150724).
    Pattern(
        "log-glibc-too-old",
        "the log shows no missing glibc version",
        re.compile(r"version [`'](?:GLIBC)_(?P<glibc>[0-9.]+)' not found(?: \(required by (?P<by>[^)\n]+)\))?"),
        _glibc,
    ),
    # "Bootstrap : no socket interface found" (marin-community/marin#6940).
    Pattern(
        "log-nccl-no-socket-interface",
        "the log shows no NCCL bootstrap interface error",
        re.compile(r"Bootstrap\s*:\s*no socket interface found"),
        _socket,
    ),
    # "misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment
    # /dev/shm/nccl-WU88OE (size 9637888), error: No space left on device (28)" (pytorch/ci-infra#490).
    Pattern(
        "log-nccl-shm",
        "the log shows no NCCL shared-memory failure",
        re.compile(r"Error while creating shared memory segment|failed to extend /dev/shm/\S+"),
        _shm,
    ),
    # "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    # (GoogleCloudPlatform/compute-gpu-installation#18).
    Pattern(
        "log-nvidia-smi-no-driver",
        "the log shows no nvidia-smi driver failure",
        re.compile(r"couldn.t communicate with the NVIDIA driver"),
        _smi,
    ),
)


def parse_log(text: str) -> list[LogHit]:
    """Every pattern hit in `text`, in pattern order then position; never raises."""
    hits = []
    starts = [0]
    for m in re.finditer(r"\n", text):
        starts.append(m.end())
    import bisect

    for pat in PATTERNS:
        for m in pat.regex.finditer(text):
            no = bisect.bisect_right(starts, m.start())
            begin = starts[no - 1]
            end = text.find("\n", m.start())
            line = text[begin: end if end != -1 else len(text)]
            hits.append(LogHit(pat.id, no, line.strip()[:400], m))
    return hits


def explain_text(text: str) -> str | None:
    """The cause and fix for the first known message in `text` (used for import errors)."""
    hits = parse_log(text)
    if not hits:
        return None
    pat = next(p for p in PATTERNS if p.id == hits[0].pattern)
    cause, fix = pat.explain(hits[0].match)
    return f"{cause}; {fix}"


def _make(pat: Pattern) -> Callable[[Context], Verdict]:
    def run(ctx: Context) -> Verdict:
        hits = [h for h in parse_log(ctx.log_text or "") if h.pattern == pat.id]
        if not hits:
            return ok(f"not in {ctx.log_path}")
        first = hits[0]
        cause, fix = pat.explain(first.match)
        more = f" (and {len(hits) - 1} more)" if len(hits) > 1 else ""
        return fail(f"{ctx.log_path}:{first.line_no}: {redact(first.line)}{more} -> {redact(cause)}", fix)

    return run


for _pat in PATTERNS:
    check(_pat.id, "log", _pat.title, needs_log=True)(_make(_pat))


# A line that says something went wrong, in the words torch, NCCL and CUDA use.
_ERROR_LINE = re.compile(r"\b(?:error|Error|ERROR|NCCL WARN|failed|Failed|FAILED|Traceback|Exception|"
                         r"Segmentation fault|Aborted|core dumped)\b")


def unrecognised_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every error-looking line no pattern recognises (issue 28, item 1):
    a log with three NCCL errors, one known, says so of the two others instead of nothing."""
    known = {h.line_no for h in parse_log(text)}
    out: list[tuple[int, str]] = []
    seen: set[str] = set()
    for no, line in enumerate(text.splitlines(), 1):
        bare = line.strip()
        # a traceback's header and frames lead to its last line, the error itself; a warning
        # ("UserWarning: Failed to initialize NumPy") is not an error; a comment is not the program's
        if no in known or not _ERROR_LINE.search(bare) or bare.startswith(("Traceback (", "File \"", "#")) \
                or "Warning" in bare or bare in seen:
            continue
        seen.add(bare)
        out.append((no, redact(bare)[:300]))  # a log line may hold a mirror's credentials (issue 34, T2)
    return out


@check("log-unrecognised", "log", "every error line of the log is one torchfit knows", needs_log=True)
def check_unrecognised(ctx: Context) -> Verdict:
    lines = unrecognised_lines(ctx.log_text or "")
    if not lines:
        return ok(f"no error line in {ctx.log_path} that the checks above do not explain")
    shown = "; ".join(f"{ctx.log_path}:{no}: {line}" for no, line in lines[:3])
    more = f" (and {len(lines) - 3} more)" if len(lines) > 3 else ""
    return warn(f"{len(lines)} error line{'s' * (len(lines) != 1)} not recognised: {shown}{more}",
                "torchfit knows no cause for these: search `torchfit docs troubleshooting` for their words, or run "
                "`torchfit doctor` without --log for the host's own checks")
