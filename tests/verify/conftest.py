"""Fixtures for the verify tests: a real second NCCL, orphan checks (the real CPU-torch venv
is tests/conftest.py's `cpu_torch_env`).

The "other NCCL" is the real libnccl.so.2 of the nvidia-nccl-cu13 wheel (it loads
without a GPU: ncclGetVersion needs no device), preloaded into one node's workers
the way a pinned NCCL is (LD_PRELOAD), so that node really runs another NCCL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import start_cli
from tests.support.envs import CACHE, locked, pip_env
from torchfit.checks import Check

NCCL_WHEEL = "nvidia-nccl-cu13==2.30.7"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def empty_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv without torch (and without pip: nothing else is needed)."""
    prefix = tmp_path_factory.mktemp("no-torch") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120
    )
    return prefix


@pytest.fixture(scope="session")
def other_nccl() -> Path:
    """A real libnccl.so.2 (from the nvidia-nccl-cu13 wheel), extracted once and cached."""
    dest = (
        CACHE / "verify-nccl-2.30.7" / "libnccl.so.2"
    )  # own dir: tests/install extracts non-atomically
    with locked(CACHE / ".lock-verify-nccl"):
        if not dest.exists():
            dl = CACHE / "downloads"
            res = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    NCCL_WHEEL,
                    "-d",
                    str(dl),
                ],
                capture_output=True,
                text=True,
                timeout=900,
                env=pip_env(),
            )
            wheels = sorted(dl.glob("nvidia_nccl_cu13-2.30.7-*.whl"))
            if res.returncode != 0 or not wheels:
                pytest.fail(f"pip download {NCCL_WHEEL} failed:\n{res.stderr[-3000:]}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_suffix(".part")
            with (
                zipfile.ZipFile(wheels[-1]) as zf,
                zf.open("nvidia/nccl/lib/libnccl.so.2") as src,
                open(tmp, "wb") as out,
            ):
                shutil.copyfileobj(src, out, 1 << 20)
            tmp.rename(dest)
            for w in wheels:
                w.unlink()  # 216 MB; the extracted library is what the tests need
    return dest


@pytest.fixture(scope="session")
def nccl_pin_env(
    tmp_path_factory: pytest.TempPathFactory, cpu_torch_env: Path, other_nccl: Path
) -> Path:
    """A directory whose bin/torchfit-env pins `other_nccl` by LD_PRELOAD, written by
    torchfit's own nccl_pin (what `torchfit install --nccl-lib` writes), for
    `torchfit run --env DIR -- ...`."""
    from torchfit.installer.nccl import write_env_script
    from torchfit.lock.model import NcclPin

    pin_dir = tmp_path_factory.mktemp("nccl-pin")
    (pin_dir / "bin").mkdir()
    # An env has its python (run refuses an env whose bin/python is missing: broken-env).
    (pin_dir / "bin" / "python").symlink_to(cpu_torch_env / "bin" / "python")
    pin = NcclPin("ld-preload", version="2.30.7", library=str(other_nccl))
    write_env_script(str(pin_dir), str(cpu_torch_env), pin)
    return pin_dir


def scan_tagged(tag: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose environment holds TORCHFIT_TEST_TAG=tag."""
    needle = f"TORCHFIT_TEST_TAG={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, IndexError):
            continue
        if needle in env.split(b"\0") and state != "Z":
            found.append((int(entry), cmd[:200]))
    return found


def assert_no_orphans(tag: str, grace: float = 3.0) -> None:
    end = time.monotonic() + grace
    left = scan_tagged(tag)
    while left and time.monotonic() < end:
        time.sleep(0.1)
        left = scan_tagged(tag)
    assert not left, f"processes left running: {left}"


FAULTS = ROOT / "tests" / "support" / "faults"


def faults(spec: str) -> dict[str, str]:
    """Environment that injects TORCHFIT_VERIFY_FAULT=spec into the verify workers
    (tests/support/faults: a sitecustomize on PYTHONPATH; the product never reads it)."""
    return {"TORCHFIT_VERIFY_FAULT": spec, "PYTHONPATH": str(FAULTS)}


class Verify:
    """Runs `python -m torchfit verify ...` as a real process, tagged for the orphan scan."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path

    def env(self, extra: dict[str, str] | None = None) -> tuple[dict[str, str], str]:
        tag = uuid.uuid4().hex
        env = dict(os.environ)
        env["TORCHFIT_TEST_TAG"] = tag
        env["TMPDIR"] = str(self.tmp)  # kept work dirs land in the test's tmp
        extra = dict(extra or {})
        # faults(): the test hook's directory goes first on PYTHONPATH, then src.
        first = [extra.pop("PYTHONPATH")] if "PYTHONPATH" in extra else []
        src = str(ROOT / "src")
        env["PYTHONPATH"] = os.pathsep.join([*first, src, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        env.pop("TORCHFIT_VERIFY_FAULT", None)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env.update(extra)
        return env, tag

    def start(
        self, *args: str, env: dict[str, str] | None = None, via: list[str] | None = None
    ) -> tuple[subprocess.Popen[str], str]:
        """`via` goes before the command, e.g. `torchfit run --env PIN --`."""
        full, tag = self.env(env)
        proc = start_cli("verify", *args, via=via, base_env=full)
        return proc, tag

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> Result:
        proc, tag = self.start(*args, env=env)
        return finish(proc, tag, timeout)


class Result:
    def __init__(self, code: int, out: str, err: str, seconds: float, tag: str) -> None:
        self.code, self.out, self.err, self.seconds, self.tag = code, out, err, seconds, tag

    @property
    def json(self) -> dict[str, Any]:
        import json

        return json.loads(self.out)

    def check(self, name: str) -> dict[str, Any]:
        found = [c for c in self.json["checks"] if c["name"] == name]
        assert found, f"no check {name!r} in {[c['name'] for c in self.json['checks']]}"
        return found[0]

    def __repr__(self) -> str:
        head = f"exit {self.code} after {self.seconds:.1f} s"
        try:
            report = self.json
        except ValueError:
            return f"{head}\nstdout:\n{self.out[-4000:]}\nstderr:\n{self.err[-3000:]}"
        lines = [head, f"verdict: {report['verdict']}"]
        for c in report["checks"]:
            lines.append(f"  {c['status']:5} {c['name']}: {c['summary']}")
            lines += [f"        {d}" for d in c.get("detail", [])[-12:]]
        ddp = report.get("ddp") or {}
        lines += [
            f"  ddp argv: {ddp.get('argv')}",
            f"  ddp returncode {ddp.get('returncode')}, stall {ddp.get('stall')}",
        ]
        lines += [f"  note: {n}" for n in ddp.get("notes") or []]
        lines += [f"  timings: {report.get('timings')}", f"stderr:\n{self.err[-2000:]}"]
        return "\n".join(lines)


def finish(proc: subprocess.Popen[str], tag: str, timeout: float) -> Result:
    start = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(
            f"torchfit verify did not finish within {timeout} s (it must never hang)\n{out}\n{err}"
        )
    return Result(proc.returncode, out, err, time.monotonic() - start, tag)


@pytest.fixture
def verify(tmp_path: Path) -> Verify:
    return Verify(tmp_path)


# --- the judging tests' captures and helpers -----------------------------------------------

DATA = Path(__file__).resolve().parents[1] / "data" / "verify"


# The H200 captures live once, in tests/data/h200-x2 (PROVENANCE.md there).
H200 = Path(__file__).resolve().parents[1] / "data" / "h200-x2"


H200_ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # data/torch-info.txt



def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}

