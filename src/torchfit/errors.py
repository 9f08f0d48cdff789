"""The one error hierarchy: every failure torchfit reports is a `TorchfitError`.

Each subclass holds data (not just a message) and a short kebab-case `reference`
that the presenter prints and docs/troubleshooting.md indexes. `exit_code` follows
the contract in DESIGN.md: 1 = the job ran and the answer is no, 2 = bad input.
"""

from __future__ import annotations

from collections.abc import Sequence


class TorchfitError(Exception):
    """Root of every error torchfit raises on purpose."""

    reference = "torchfit-error"
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


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


class NoCompatibleSet(TorchfitError):
    """The resolver found no stack that satisfies the hosts and the request."""

    reference = "no-compatible-set"

    def __init__(self, conflicts: Sequence[str], hints: Sequence[str]) -> None:
        first = conflicts[0] if conflicts else "no candidate fits"
        super().__init__(f"no compatible set: {first}", hint=hints[0] if hints else None)
        self.conflicts = list(conflicts)
        self.hints = list(hints)


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


class ProbeFailed(TorchfitError):
    """A host tool exists but misbehaved in a way that is not just 'fact unknown'."""

    reference = "probe-failed"

    def __init__(self, argv: Sequence[str], code: int | None, stderr: str) -> None:
        from torchfit.redact import redact

        how = f"exit {code}" if code is not None else "did not finish"
        super().__init__(redact(f"{' '.join(argv)} failed ({how}): {stderr.strip()[:200]}"))
        self.argv = list(argv)
        self.code = code
        self.stderr = stderr


class InstallFailed(TorchfitError):
    """One install step failed; `tail` is the end of its log."""

    reference = "install-failed"

    def __init__(self, step: str, argv: Sequence[str], code: int | None, tail: str) -> None:
        # code None: the step did not finish (timed out, could not start, an OSError).
        how = f"exit {code}" if code is not None else "it did not finish"
        super().__init__(f"install step '{step}' failed ({how})")
        self.step = step
        self.argv = list(argv)
        self.code = code
        self.tail = tail


class VerifyFailed(TorchfitError):
    """A verify stage failed or stalled on a rank."""

    reference = "verify-failed"

    def __init__(self, rank: int | None, stage: str, tail: str) -> None:
        who = f"rank {rank}" if rank is not None else "verify"
        super().__init__(f"{who} failed at stage '{stage}'")
        self.rank = rank
        self.stage = stage
        self.tail = tail
