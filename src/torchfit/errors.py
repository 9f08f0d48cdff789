"""The one error hierarchy: every failure torchfit reports is a `TorchfitError`.

Every subclass is defined here. Each is built from data (not from a finished
sentence where the data can say it), formats its own message in its constructor,
and has a short kebab-case `reference` that the presenter prints and
docs/troubleshooting.md indexes. Nothing changes an error after it is raised: what
it says is known where it is built (the install log's path is `InstallFailed`'s
`log_path`, given by the step that fails).

`to_json()` is the one `--json` error object every command prints at the CLI
boundary: `ok`, `error`, `reference`, `hint`, plus the keys of `details()` (a
subclass's data: `conflicts` and `hints` of a failed resolve, `step` and `tail` of
a failed install). docs/architecture.md, Contracts: keys may be added, never renamed.

`exit_code` follows the contract in docs/architecture.md, Contracts: 1 = the job ran and the answer is
no, 2 = bad input. Every message passes through `redact`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from torchfit.jsontypes import JsonObject
from torchfit.redact import redact
from torchfit.text import format_bytes

if TYPE_CHECKING:
    from torchfit.access import Denied


class Diagnosis(Protocol):
    """What a failed Python build was short of (installer/pyenv's diagnosis): its fix."""

    def hint(self, version: str) -> str: ...


class TorchfitError(Exception):
    """Root of every error torchfit raises on purpose."""

    reference = "torchfit-error"
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = redact(message)
        self.hint = redact(hint) if hint else None
        super().__init__(self.message)

    def details(self) -> JsonObject:
        """The subclass's own keys for the `--json` error object ({} here)."""
        return {}

    def to_json(self) -> JsonObject:
        """The `--json` error object: one shape for every command."""
        out: JsonObject = {"ok": False, "error": self.message, "reference": self.reference,
                               "hint": self.hint}
        out.update(self.details())
        return out


def interrupted_json() -> JsonObject:
    """The `--json` error object of Ctrl-C / SIGTERM (exit 130): the same shape."""
    return {"ok": False, "error": "interrupted", "reference": "interrupted", "hint": None}


# --- the user's input --------------------------------------------------------------------


class BadInput(TorchfitError):
    """The user gave something torchfit cannot use (exit 2, one line)."""

    reference = "bad-input"
    exit_code = 2


class MatrixError(BadInput):
    """data/matrix.toml (or a file given in its place) is malformed: `path:line: what`."""

    reference = "bad-matrix"

    def __init__(self, path: str, line: int | None, what: str) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {what}")
        self.path = path
        self.line = line
        self.what = what


class CompanionsError(MatrixError):
    """data/companions.toml (or a file given in its place) is malformed: `path:line: what`."""

    reference = "bad-companions"


# --- resolving ---------------------------------------------------------------------------


class NoCompatibleSet(TorchfitError):
    """The resolver found no stack that satisfies the hosts and the request."""

    reference = "no-compatible-set"

    def __init__(self, conflicts: Sequence[str], hints: Sequence[str], remedies: Sequence[Any] = ()) -> None:
        first = conflicts[0] if conflicts else "no candidate fits"
        super().__init__(f"no compatible set: {first}", hint=hints[0] if hints else None)
        self.conflicts = [redact(c) for c in conflicts]
        self.hints = [redact(h) for h in hints]
        # The change behind each hint (compat.explain.Remedy), in the same order.
        self.remedies = list(remedies)

    def details(self) -> JsonObject:
        return {"conflicts": self.conflicts, "hints": self.hints}


class MetadataMismatch(TorchfitError):
    """A wheel of the plan whose index-served metadata (PEP 658 `.metadata`) disagrees with the
    wheel's own METADATA: the plan would promise what the wheel does not install (exit 1)."""

    reference = "metadata-mismatch"


class ResolveFailed(TorchfitError):
    """uv could not resolve the project for a reason other than a conflict: a package's build
    failed, it was stopped (no progress, past the time limit), uv itself failed. uv's cause first."""

    reference = "resolve-failed"


# --- host tools and processes --------------------------------------------------------------


class GpuFactsUnknown(TorchfitError):
    """A host has an NVIDIA driver but its GPUs could not be read (exit 1): torchfit
    will not guess, and never plans a CPU build for it unasked."""

    reference = "gpu-facts-unknown"

    def __init__(self, host: str, cause: str, fix: str) -> None:
        super().__init__(
            f"{host} has an NVIDIA driver, but its GPUs could not be read ({cause}); "
            "torchfit will not guess them, nor plan a CPU build unasked",
            hint=fix,
        )
        self.host = host
        self.cause = cause


class SlurmMissing(TorchfitError):
    """A --slurm command where Slurm's client commands are not installed (exit 2)."""

    reference = "slurm-missing"
    exit_code = 2

    def __init__(self, tool: str) -> None:
        super().__init__(f"{tool} not found on PATH: --slurm needs Slurm's client commands (sinfo, srun)",
                         hint="run it on a login node of the cluster (or give --facts files instead)")


class FleetNodesUnknown(TorchfitError):
    """Nodes of a fleet file gave no facts to the gather (exit 1): their GPUs are
    unknown, so no stack is picked as if they were not there."""

    reference = "fleet-nodes-unknown"

    def __init__(self, nodes: str, why: str, fix: str) -> None:
        super().__init__(f"{nodes}: no facts in the fleet file ({why}); torchfit will not pick a stack "
                         "for a fleet whose nodes it cannot see", hint=fix)
        self.nodes = nodes

    def details(self) -> JsonObject:
        return {"nodes": self.nodes}


class ProbeFailed(TorchfitError):
    """A host tool exists but misbehaved in a way that is not just 'fact unknown'."""

    reference = "probe-failed"

    def __init__(self, argv: Sequence[str], code: int | None, stderr: str, *, message: str | None = None) -> None:
        how = f"exit {code}" if code is not None else "did not finish"
        super().__init__(message or f"{' '.join(argv)} failed ({how}): {stderr.strip()[:200]}")
        self.argv = list(argv)
        self.code = code
        self.stderr = stderr


class ToolMissing(ProbeFailed):
    """The executable named by argv[0] is not on PATH (or not executable)."""

    reference = "tool-missing"

    def __init__(self, argv: Sequence[str], why: str = "not found on PATH") -> None:
        super().__init__(argv, None, why, message=f"{argv[0] if argv else '(empty argv)'} {why}")


class ToolTimeout(ProbeFailed):
    """The command ran past its timeout; its whole process group was killed."""

    reference = "tool-timeout"

    def __init__(self, argv: Sequence[str], timeout: float, stdout: str = "", stderr: str = "", *,
                 message: str | None = None) -> None:
        super().__init__(argv, None, redact(stderr),
                         message=message or f"{' '.join(argv)} timed out after {timeout:g} s")
        self.timeout = timeout
        self.stdout = redact(stdout)


class ToolStalled(ToolTimeout):
    """The command's process group did no I/O for `stall` seconds (a hung index); it was killed."""

    reference = "tool-stalled"

    def __init__(self, argv: Sequence[str], stall: float, elapsed: float, stdout: str = "",
                 stderr: str = "") -> None:
        super().__init__(argv, elapsed, stdout, stderr,
                         message=f"{' '.join(argv)} made no progress for {stall:g} s "
                                 f"(no bytes read or written; killed after {elapsed:.0f} s)")
        self.stall = stall


# --- space -------------------------------------------------------------------------------


class DiskFull(TorchfitError):
    """A write ran out of space (ENOSPC) or quota (EDQUOT): the step, the path, its
    filesystem and what is left there, what that place is to torchfit and how to make
    room (exit 1: the host's state, not the user's input). Built by torchfit.space."""

    reference = "disk-full"

    def __init__(self, step: str, path: str, mount: str, *, role: str | None = None, fix: str | None = None,
                 quota: bool = False, free: int | None = None, size: int | None = None,
                 inodes_free: int | None = None, inodes: int | None = None, needed: int | None = None,
                 needed_what: str = "", grown: int | None = None) -> None:
        self.step, self.path, self.mount, self.role, self.fix = step, path, mount, role, fix
        self.quota, self.free, self.size = quota, free, size
        self.inodes_free, self.inodes, self.needed, self.needed_what = inodes_free, inodes, needed, needed_what
        self.grown = grown
        # Out of inodes rather than bytes: blocks left, no file can be made.
        self.out_of_inodes = inodes_free is not None and inodes_free == 0 and (free or 0) > 0
        if quota:
            what = "disk quota exceeded"
        elif self.out_of_inodes:
            what = "no free inodes left (the filesystem can hold no more files)"
        else:
            what = "no space left on device"
        place = f"{mount}, {role}" if role else mount
        left = []
        if self.out_of_inodes and inodes is not None:
            left.append(f"0 of {inodes} inodes free")
        elif free is not None and size is not None:
            left.append(f"{format_bytes(free)} free of {format_bytes(size)}")
        if needed is not None:
            left.append(f"{needed_what or 'needed'} {format_bytes(needed)}")
        if grown is not None:
            left.append(f"it had written {format_bytes(grown)} when it ran out")
        super().__init__(f"{what}: {step}: {path} (on {place}" + (f"; {'; '.join(left)}" if left else "") + ")",
                         hint=fix or f"free space on {mount}")

    def with_grown(self, grown: int) -> DiskFull:
        """The same failure, saying how much the step had written (a new error)."""
        return DiskFull(self.step, self.path, self.mount, role=self.role, fix=self.fix, quota=self.quota,
                        free=self.free, size=self.size, inodes_free=self.inodes_free, inodes=self.inodes,
                        needed=self.needed, needed_what=self.needed_what, grown=grown)

    def details(self) -> JsonObject:
        return {"step": self.step, "path": self.path, "mount": self.mount, "role": self.role,
                "free_bytes": self.free, "size_bytes": self.size, "free_inodes": self.inodes_free,
                "needed_bytes": self.needed, "written_bytes": self.grown}


# --- installing ----------------------------------------------------------------------------


class InstallFailed(TorchfitError):
    """One install step failed; `tail` is the end of its log.

    `what` replaces the generic first line ("install step 'x' failed") when the
    step knows better; `log_path` (the install log the step wrote to) is named in the hint.
    """

    reference = "install-failed"

    def __init__(self, step: str, argv: Sequence[str], code: int | None, tail: str, *,
                 what: str | None = None, hint: str | None = None, log_path: str | None = None) -> None:
        self.step = step
        self.argv = list(argv)
        self.code = code
        self.tail = redact(tail)
        self.what = what
        self.base_hint = hint
        self.log_path = log_path
        # code None: the step did not finish (timed out, could not start, an OSError).
        how = f"exit {code}" if code is not None else "it did not finish"
        super().__init__(what or f"install step '{step}' failed ({how})", hint=self._hint())

    def _hint(self) -> str | None:
        log = f"the full log: {self.log_path}" if self.log_path else None
        return "; ".join(h for h in (self.base_hint, log) if h) or None

    def details(self) -> JsonObject:
        return {"step": self.step, "tail": self.tail}


class PythonBuildFailed(InstallFailed):
    """`pyenv install` could not build the plan's Python; `diagnosis` names the causes."""

    reference = "install-failed"

    def __init__(self, version: str, argv: Sequence[str], code: int | None, tail: str, diagnosis: Diagnosis, *,
                 log_path: str | None = None) -> None:
        self.version = version
        self.diagnosis = diagnosis
        super().__init__("python", argv, code, tail,
                         what=f"pyenv could not build Python {version} (exit {code})",
                         hint=diagnosis.hint(version), log_path=log_path)


class PythonUnavailable(TorchfitError):
    """The plan's interpreter is neither present nor installable here (exit 1)."""

    reference = "python-unavailable"


class BrokenEnv(TorchfitError):
    """An environment whose interpreter is damaged (missing, a dangling link, a link loop):
    not bad input, a broken state to repair (exit 1), with how to rebuild it."""

    reference = "broken-env"

    def __init__(self, prefix: str, what: str, hint: str) -> None:
        self.prefix = prefix
        self.what = what
        super().__init__(f"{prefix} is a broken environment: {what}", hint=hint)

    def details(self) -> JsonObject:
        return {"prefix": self.prefix, "broken": self.what}


class PermissionDenied(TorchfitError):
    """This user may not use a path another user made (exit 1): access.Denied's sentence."""

    reference = "permission-denied"

    def __init__(self, what: str, denied: Denied, within: str | None = None) -> None:
        self.path = denied.path
        super().__init__(f"{what}: {denied.sentence()}", hint=denied.hint(within))

    def details(self) -> JsonObject:
        return {"path": self.path}


class PrefixBusy(TorchfitError):
    """Another torchfit install holds PREFIX.lock (exit 1)."""

    reference = "prefix-locked"


class EnvInUse(TorchfitError):
    """`install --force` would remove an env that running processes use (exit 1; `--wait` waits)."""

    reference = "env-in-use"

    def __init__(self, message: str, processes: Sequence[tuple[int, str]] = (), hint: str | None = None) -> None:
        self.processes = [(pid, redact(cmd)) for pid, cmd in processes]
        super().__init__(message, hint=hint)

    def details(self) -> JsonObject:
        return {"processes": [{"pid": pid, "command": cmd} for pid, cmd in self.processes]}


class RelocationFailed(TorchfitError):
    """A script of the env still names the temporary path after relocation."""

    reference = "relocate-failed"


class LockMismatch(TorchfitError):
    """This host contradicts the lock being rebuilt (exit 1; `--force` overrides)."""

    reference = "lock-host-mismatch"

    def __init__(self, message: str, conflicts: Sequence[str] = (), hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.conflicts = [redact(c) for c in conflicts]

    def details(self) -> JsonObject:
        return {"conflicts": self.conflicts}


class AddRefused(TorchfitError):
    """`torchfit add`: a package needs another torch family than the env's lock (exit 1).

    Built from the culprits, (package, version, requirement) each, and the command
    that rebuilds the env for them; nothing in the env or its lock was changed.
    """

    reference = "add-needs-other-torch"

    def __init__(self, message: str, culprits: Sequence[tuple[str, str, str]], command: str,
                 locked: dict[str, str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint or f"nothing was changed; to rebuild the env for it: {command}")
        self.culprits = [(n, v, redact(r)) for n, v, r in culprits]
        self.command = redact(command)
        self.locked = dict(locked)

    def details(self) -> JsonObject:
        return {"culprits": [{"package": n, "version": v, "requires": r} for n, v, r in self.culprits],
                "command": self.command, "locked": self.locked}


class AdoptRefused(TorchfitError):
    """`torchfit adopt`: the env's torch cannot be the base (none, fails on this host, contradicts
    the image's constraints); exit 1, no lock written."""

    reference = "adopt-refused"

    def __init__(self, message: str, checks: Sequence[Any] = ()) -> None:
        super().__init__(message, hint="nothing was written; `torchfit verify --env PREFIX` shows the checks")
        self.checks = [{"id": c.name, "status": c.status.value, "summary": redact(c.summary)} for c in checks]

    def details(self) -> JsonObject:
        return {"checks": self.checks}


class EnvDrifted(TorchfitError):
    """`torchfit add`: the env's torch family is not what its lock records (a bare `pip install`
    swapped it), so the lock cannot be the base to add to (exit 1). Nothing was changed."""

    reference = "env-drifted"

    def __init__(self, prefix: str, drift: Sequence[str], lock_path: str) -> None:
        import shlex

        self.drift = [redact(d) for d in drift]
        q = shlex.quote
        super().__init__(
            f"{prefix}'s torch family is not the one its lock records: {'; '.join(drift)}; "
            "`torchfit add` adds only to an env that matches its lock, and nothing was changed",
            hint=f"`torchfit verify --env {q(prefix)} --lock {q(lock_path)}` shows what runs; to rebuild the env "
                 f"as locked: torchfit install --force --lock {q(lock_path)} --prefix {q(prefix)}")

    def details(self) -> JsonObject:
        return {"drift": self.drift}


# --- verify, export, the indexes ---------------------------------------------------------------


class VerifyFailed(TorchfitError):
    """A verify stage failed or stalled on a rank."""

    reference = "verify-failed"

    def __init__(self, rank: int | None, stage: str, tail: str) -> None:
        who = f"rank {rank}" if rank is not None else "verify"
        super().__init__(f"{who} failed at stage '{stage}'")
        self.rank = rank
        self.stage = stage
        self.tail = redact(tail)

    def details(self) -> JsonObject:
        return {"rank": self.rank, "stage": self.stage, "tail": self.tail}


class OutputFailed(TorchfitError):
    """A file a command writes for the user could not be written (an I/O error, a file too
    large; a full disk is DiskFull): not bad input, exit 1; the file that was there is
    unchanged (files.write_atomic)."""

    reference = "output-failed"


class ExportFailed(TorchfitError):
    """A step of the export could not be done (uv missing or failing, a lock the stack contradicts)."""

    reference = "export-failed"


class IndexUnavailable(TorchfitError):
    """A page could not be read: timeout, connection error, HTTP error after retries."""

    reference = "index-unavailable"

    def __init__(self, url: str, why: str, *, hint: str | None = None, kind: str = "http") -> None:
        self.url = redact(url)
        self.why = redact(why)
        # "connect": the host could not be reached at all (DNS, refused, connect
        # timeout): later requests to it will fail the same way. "timeout": it was
        # reached but answered too slowly. "http": it answered with an error. "redirect": a
        # redirect torchfit refuses (https to plain http, not http(s), a loop, too many).
        self.kind = kind
        super().__init__(f"{self.url}: {self.why}", hint=hint)

    def details(self) -> JsonObject:
        return {"url": self.url}


class IndexMalformed(TorchfitError):
    """A page was read but is not a simple-repository page torchfit can parse."""

    reference = "index-malformed"

    def __init__(self, url: str, why: str) -> None:
        self.url = redact(url)
        self.why = redact(why)
        super().__init__(f"malformed index page {self.url}: {self.why}")

    def details(self) -> JsonObject:
        return {"url": self.url}


class WheelFormatError(TorchfitError):
    """The bytes are not a zip torchfit can read (truncated, garbage, an unsupported method)."""

    reference = "wheel-format"

    def __init__(self, where: str, why: str) -> None:
        self.where = redact(where)
        self.why = why
        super().__init__(f"{self.where}: not a readable wheel: {why}")


class WheelsUnread(TorchfitError):
    """`matrix probe`: wheels (or the index pages listing them) that could not be read.

    Exit 1 (2 when a local file given is no wheel); `--json` carries what was measured
    beside each failure, so one object says it all.
    """

    reference = "wheels-unread"

    def __init__(self, failures: list[tuple[str, str]], measured: list[JsonObject], *,
                 bad_file: bool = False) -> None:
        self.failures = [(redact(what), redact(why)) for what, why in failures]
        self.measured = measured
        if bad_file:
            self.exit_code = 2
        n = len(self.failures)
        super().__init__(f"{n} of {n + len(measured)} could not be read: "
                         + "; ".join(f"{what}: {why}" for what, why in self.failures))

    def details(self) -> JsonObject:
        return {"failures": [{"what": what, "error": why} for what, why in self.failures],
                "wheels": self.measured}
