#!/usr/bin/env python3
"""Re-run the repro of each of the 30 defects of the 2026-11 attack against this checkout.

The repros are those of ../shared/reference/defects-2026-11.md, adapted to this checkout:
torchfit is `python -m torchfit` with this checkout's src/ first on PYTHONPATH, run by the
interpreter that runs this script (its bin/ holds uv, as `pip install torchfit` puts it);
a fresh HOME and temporary directories under one work directory; real processes, real
signals (SIGTERM, SIGKILL), real symlinks, fake `nvidia-smi` scripts on PATH, a real HTTP
server on 127.0.0.1 that accepts and never answers, and a local PEP 503 mirror over the CPU
torch wheel (`pip config get global.find-links`, or $PIP_FIND_LINKS).

Every command runs with a tag in its environment (TORCHFIT_RERUN_TAG), which all its
descendants inherit; after it ends, /proc is scanned for tagged processes. Each result is
classified:

  data-loss   a file or directory the user owns was changed or removed
  orphans     a process of the command was still alive 5 s after it ended (or, for #10
              and #25, a temporary directory it left behind)
  traceback   torchfit's own crash: an unindented "Traceback (most recent call last)" or
              "internal error" (a traceback indented under a failed check is evidence: the
              user's torch failing to import, shown as verify shows it)
  hang        it ran over 120 s and that is not a documented wait
  wrong-exit  the exit code is not what the contract (0/1/2/130, docs/architecture.md, Contracts) says for this case
  ok          none of these

Usage: python scripts/rerun-defects.py [--out DIR] [--only 1,7,...] [--keep]
Prints a table (defect, command, exit, seconds, verdict) and the counts per class; with
--out, writes results.md and results.json there. Exit status: 0 when every class is 0.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the hanging server lives with the tests' (one copy)
from tests.support.servers import serve

CLASSES = ("data-loss", "orphans", "traceback", "hang", "wrong-exit")
HANG_S = 120.0
TAG_VAR = "TORCHFIT_RERUN_TAG"
SRC = ROOT / "src"  # --src: another checkout's src/ (e.g. 6e0c2fd, to see the defects come back)


@dataclass
class Result:
    defect: int
    command: str
    exit: int | str
    seconds: float
    verdicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return ", ".join(self.verdicts) if self.verdicts else "ok"


# --- the environment -------------------------------------------------------------------


class Box:
    """One fresh HOME, the mirror, the fake nvidia-smi directories, the base env."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = work / "home"
        self.home.mkdir(parents=True)
        self.tmp = work / "tmp"
        self.tmp.mkdir()
        self.results: list[Result] = []
        self.mirror = self._mirror()
        self.smi = {name: self._smi(name, text) for name, text in SMI.items()}
        self.base_env: Path | None = None

    def _mirror(self) -> str:
        links = os.environ.get("PIP_FIND_LINKS") or subprocess.run(
            ["pip", "config", "get", "global.find-links"], capture_output=True, text=True).stdout.strip()
        wheels = sorted(Path(links or "/opt/wheels").glob("torch-2.13.0+cpu-*.whl"))
        if not wheels:
            sys.exit("rerun-defects: no torch-2.13.0+cpu wheel in the pip find-links directory")
        whl = wheels[0]
        digest = hashlib.sha256(whl.read_bytes()).hexdigest()
        page = self.work / "mirror" / "simple" / "torch"
        page.mkdir(parents=True)
        href = f"{whl.parent.as_uri()}/{whl.name.replace('+', '%2B')}#sha256={digest}"
        (page / "index.html").write_text(f'<a href="{href}">{whl.name}</a>\n')
        return (self.work / "mirror" / "simple").as_uri()

    def _smi(self, name: str, text: str) -> str:
        d = self.work / "smi" / name
        d.mkdir(parents=True)
        (d / "nvidia-smi").write_text(text)
        (d / "nvidia-smi").chmod(0o755)
        return str(d)

    def env(self, tag: str, smi: str | None = None, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TORCHFIT_", "VIRTUAL_ENV", "XDG_", "PYTEST"))}
        env.update(HOME=str(self.home), TMPDIR=str(self.tmp), PYTHONPATH=str(SRC))
        env[TAG_VAR] = tag
        # torchfit's own bin/ is not on PATH (uv is found beside its interpreter, #21)
        path = [p for p in env.get("PATH", os.defpath).split(os.pathsep)
                if p and Path(p).resolve() != Path(sys.executable).parent.resolve()]
        if smi:
            path.insert(0, self.smi[smi])
        env["PATH"] = os.pathsep.join(path)
        env.update(extra)
        return env

    # -- running one command ------------------------------------------------------------

    def run(self, defect: int, label: str, args: list[str], *, expect: set[int],
            smi: str | None = None, cwd: Path | None = None, timeout: float = 400,
            documented_wait: str | None = None, env: dict[str, str] | None = None,
            during: Callable[[subprocess.Popen[str]], None] | None = None,
            argv: list[str] | None = None, record: bool = True) -> tuple[Result, str, str]:
        """Run `torchfit ARGS` (or `argv`), classify it, record the result."""
        tag = uuid.uuid4().hex
        full_env = self.env(tag, smi, **(env or {}))
        cmd = argv or [sys.executable, "-m", "torchfit", *args]
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=full_env, cwd=str(cwd or self.work), errors="replace")
        out_err: dict[str, str] = {}

        def pump(name: str, stream) -> None:  # type: ignore[no-untyped-def]
            out_err[name] = stream.read()

        threads = [threading.Thread(target=pump, args=(n, s), daemon=True)
                   for n, s in (("out", proc.stdout), ("err", proc.stderr))]
        for t in threads:
            t.start()
        if during is not None:
            during(proc)
        try:
            code: int | str = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = f"killed@{timeout:g}s"
        for t in threads:
            t.join(timeout=10)
        took = time.monotonic() - start
        out, err = out_err.get("out", ""), out_err.get("err", "")
        res = Result(defect, label, code, round(took, 1))
        if isinstance(code, str) or code not in expect:
            res.verdicts.append("wrong-exit")
            res.notes.append(f"expected {sorted(expect)}")
        text = out + err
        # torchfit's own crash: an unindented traceback or "internal error". A traceback
        # indented under a check is evidence (the user's torch failing to import, shown).
        if any(line.startswith("Traceback (most recent call last)") for line in text.splitlines()) \
                or "internal error" in text:
            res.verdicts.append("traceback")
        if took > HANG_S:
            if documented_wait:
                res.notes.append(f"{took:.0f} s: {documented_wait}")
            else:
                res.verdicts.append("hang")
        left = tagged(tag, grace=5.0)
        if left:
            res.verdicts.append("orphans")
            res.notes.append("left: " + "; ".join(cmd[:60] for _, cmd in left[:3]))
            for pid, _ in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        if record:
            self.results.append(res)
        return res, out, err

    def base(self) -> Path:
        """A CPU torch env built once (the repros' `/tmp/d8/env`)."""
        if self.base_env is None:
            prefix = self.work / "base" / "env"
            res, _, err = self.run(0, "setup: install the base env", ["install", *REQ, "--torch-index-url",
                                   self.mirror, "--prefix", str(prefix)], expect={0}, record=False)
            if res.exit != 0:
                sys.exit(f"rerun-defects: the base install failed:\n{err[-2000:]}")
            self.base_env = prefix
        return self.base_env


def tagged(tag: str, grace: float = 0.0) -> list[tuple[int, str]]:
    """Live processes whose environment holds TAG_VAR=tag (after up to `grace` s)."""
    end = time.monotonic() + grace
    needle = f"{TAG_VAR}={tag}".encode()
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                    if fh.read().rpartition(")")[2].split()[0] == "Z":
                        continue
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if needle not in fh.read().split(b"\0"):
                        continue
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    found.append((int(entry), fh.read().replace(b"\0", b" ").decode(errors="replace")))
            except (OSError, IndexError):
                continue
        if not found or time.monotonic() >= end:
            return found
        time.sleep(0.1)


def fake_torch_env(parent: Path, name: str, init: str) -> Path:
    """A venv (Python 3.11 when present) whose torch/__init__.py is `init`."""
    py311 = shutil.which("python3.11") or sys.executable
    env = parent / name
    subprocess.run([py311, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    pkg = next((env / "lib").glob("python3.*")) / "site-packages" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(init)
    return env


def signal_on(sig: int, delay: float) -> Callable[[subprocess.Popen[str]], None]:
    """A `during` hook: send `sig` to the command `delay` seconds after it started."""
    def during(proc: subprocess.Popen[str]) -> None:
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(sig)
    return during


REQ = ["torch==2.13.0", "--python", "3.11", "--assume", "gpu=none"]

SMI = {
    "nvml": '#!/bin/sh\necho "Failed to initialize NVML: Driver/library version mismatch"\nexit 18\n',
    "hang": "#!/bin/sh\nexec sleep 600\n",
    "h200": ("#!/bin/sh\ncase \"$*\" in *--query-gpu=index,name,compute_cap*) printf '0, NVIDIA H200, 9.0, "
             "143771, GPU-0, 00000000:00:06.0, 580.159.04\\n1, NVIDIA H200, 9.0, 143771, GPU-1, "
             "00000000:00:07.0, 580.159.04\\n';; *) exit 2;; esac\n"),
}


# --- the 30 repros --------------------------------------------------------------------------


def d01(b: Box) -> None:
    d = b.work / "d1"
    d.mkdir()
    (d / "victim").write_text("precious\n")
    os.symlink(d / "victim", d / "env.lock")
    res, _, _ = b.run(1, "install with PREFIX.lock a symlink to a file", ["install", *REQ, "--torch-index-url",
                      b.mirror, "--prefix", str(d / "env")], expect={2})
    if (d / "victim").read_text() != "precious\n":
        res.verdicts.append("data-loss")
        res.notes.append("the symlink's target was changed")


def d02(b: Box) -> None:
    b.run(2, "resolve, nvidia-smi: NVML mismatch", ["resolve"], smi="nvml", expect={1})
    b.run(2, "install, nvidia-smi: NVML mismatch", ["install", "torch==2.13.0", "--python", "3.11",
          "--torch-index-url", b.mirror, "--prefix", str(b.work / "d2" / "env")], smi="nvml", expect={1})
    b.run(2, "resolve, nvidia-smi hangs", ["resolve"], smi="hang", expect={1})


def d03(b: Box) -> None:
    for name in ("o'brien/env", "it's env"):
        prefix = b.work / "d3" / name
        res, _, _ = b.run(3, f"install --prefix \"…/{name}\"", ["install", *REQ, "--torch-index-url", b.mirror,
                          "--prefix", str(prefix)], expect={0})
        if res.exit == 0:
            act = subprocess.run(["bash", "-c", 'source "$1/bin/activate"; command -v python', "_", str(prefix)],
                                 capture_output=True, text=True, timeout=60)
            pip = subprocess.run([str(prefix / "bin" / "pip"), "--version"], capture_output=True, text=True,
                                 timeout=120) if (prefix / "bin" / "pip").exists() else None
            if not act.stdout.strip().startswith(str(prefix)):
                res.verdicts.append("wrong-exit")
                res.notes.append(f"activate gives {act.stdout.strip()!r}")
            if pip is not None and pip.returncode != 0:
                res.verdicts.append("wrong-exit")
                res.notes.append(f"bin/pip exits {pip.returncode}")


def d04(b: Box) -> None:
    d = b.work / "d4"
    d.mkdir()
    fake_torch_env(d, "raise", 'raise RuntimeError("broken")\n')
    b.run(4, "doctor --env raise (relative, import raises)", ["doctor", "--env", "raise"], cwd=d, expect={1})
    b.run(4, "doctor --env /abs/raise", ["doctor", "--env", str(d / "raise")], expect={1})


def d05(b: Box) -> None:
    prefix = b.work / "d5" / "env"
    b.run(5, "install (an env to replace)", ["install", *REQ, "--torch-index-url", b.mirror, "--prefix", str(prefix)],
          expect={0})
    (prefix / "OLD_MARKER").write_text("old\n")
    tag = uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "-m", "torchfit", "install", *REQ, "--torch-index-url", b.mirror,
                             "--prefix", str(prefix), "--force"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, env=b.env(tag), cwd=str(b.work))
    start = time.monotonic()
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "[swap]" in line:
            time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            break
    lines.append(proc.stderr.read())
    code = proc.wait(timeout=300)
    err = "".join(lines)
    res = Result(5, "install --force, SIGTERM 0.05 s after [swap]", code, round(time.monotonic() - start, 1))
    replaced = not (prefix / "OLD_MARKER").exists()
    # The contract: a signal after the exchange is reported as such and the install kept (0);
    # before it, PREFIX untouched (130). Either way the message must match the filesystem.
    if code == 0 and not replaced:
        res.verdicts.append("data-loss")
    if code == 130 and replaced:
        res.verdicts.append("wrong-exit")
        res.notes.append("130 'not changed' but PREFIX was replaced")
    if code not in (0, 130):
        res.verdicts.append("wrong-exit")
    if not (prefix / "bin" / "python").exists():
        res.verdicts.append("data-loss")
        res.notes.append("PREFIX is not a working env")
    if "Traceback" in err or "internal error" in err:
        res.verdicts.append("traceback")
    if tagged(tag, 5.0):
        res.verdicts.append("orphans")
    res.notes.append("PREFIX replaced" if replaced else "PREFIX unchanged")
    b.results.append(res)


def d06(b: Box) -> None:
    src = b.base()
    text = (src / "pylock.toml").read_text()
    blocks = text.split("[[packages]]")
    lock = b.work / "d6" / "l.toml"
    lock.parent.mkdir()
    lock.write_text("[[packages]]".join(x for x in blocks if 'name = "sympy"' not in x.split("[[packages.wheels]]")[0]))
    b.run(6, "install --lock (sympy removed)", ["install", "--lock", str(lock), "--prefix", str(b.work / "d6" / "env")],
          expect={1})


def d07(b: Box) -> None:
    with serve() as url:  # a mirror that accepts and never answers
        b.run(7, "install against a mirror that never answers (uv, PIP_DEFAULT_TIMEOUT=180)",
              ["install", *REQ, "--torch-index-url", url + "/simple", "--allow-insecure-index", "--prefix",
               str(b.work / "d7" / "env")], env={"PIP_DEFAULT_TIMEOUT": "180"}, expect={1},
              documented_wait="the stall limit (120 s without a byte, docs/mirrors.md)")
        b.run(7, "export --format pylock against it", ["export", "--format", "pylock", *REQ, "--torch-index-url",
              url + "/whl/{variant}", "--allow-insecure-index"], expect={1},
              documented_wait="the stall limit (120 s without a byte, docs/mirrors.md)")


def d08(b: Box) -> None:
    env = b.base()
    b.run(8, "verify a CPU torch on a 2xH200 host", ["verify", "--env", str(env), "--nproc", "1", "--no-bandwidth"],
          smi="h200", expect={1})
    b.run(8, "doctor the same", ["doctor", "--env", str(env)], smi="h200", expect={1})


def d09(b: Box) -> None:
    d = b.work / "d9"
    d.mkdir()
    b.run(9, "doctor --python /bin/false", ["doctor", "--python", "/bin/false"], expect={1})
    fake_torch_env(d, "exit0", "import sys; sys.exit(0)\n")
    b.run(9, "doctor, torch import calls sys.exit(0)", ["doctor", "--env", str(d / "exit0")], expect={1})
    b.run(9, "verify, the same", ["verify", "--env", str(d / "exit0"), "--nproc", "1"], expect={1})
    fake_torch_env(d, "daemon", "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                   "        os.execvp('sleep', ['sleep', '600'])\n    os._exit(0)\n"
                   "raise ImportError('broken, and a daemon holds the pipe')\n")
    b.run(9, "doctor, torch import leaves a daemon holding the pipe", ["doctor", "--env", str(d / "daemon")],
          expect={1})


def d10(b: Box) -> None:
    d = b.work / "d10"

    def kill_later(proc: subprocess.Popen[str]) -> None:
        time.sleep(9)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)

    _res, _, _ = b.run(10, "install --installer pip, SIGKILL after 9 s", ["install", *REQ, "--torch-index-url",
                      b.mirror, "--installer", "pip", "--prefix", str(d / "env")], during=kill_later,
                      expect={-9, 0})
    res2, _, _ = b.run(10, "the next install into the same PREFIX", ["install", *REQ, "--torch-index-url", b.mirror,
                       "--installer", "pip", "--prefix", str(d / "env"), "--force"], expect={0})
    debris = [p.name for p in d.iterdir() if ".torchfit-" in p.name]
    if debris:  # not the user's data, but left behind: counted with what outlives a run
        res2.verdicts.append("orphans")
        res2.notes.append(f"debris: {debris}")


def d11(b: Box) -> None:
    d = b.work / "d11"
    d.mkdir()
    fake_torch_env(d, "hang", "import time; time.sleep(10**6)\n")
    b.run(11, "doctor (import torch hangs), SIGTERM after 4 s", ["doctor", "--env", str(d / "hang")],
          during=signal_on(signal.SIGTERM, 4), expect={130})
    with serve() as url:  # a mirror that accepts and never answers
        b.run(11, "export --format pylock (hung mirror), SIGTERM after 4 s", ["export", "--format", "pylock", *REQ,
              "--torch-index-url", url + "/whl/{variant}", "--allow-insecure-index"],
              during=signal_on(signal.SIGTERM, 4), expect={130})
        b.run(11, "matrix check (hung mirror), SIGHUP after 3 s", ["matrix", "check", "--torch", "2.13.0",
              "--variant", "cpu", "--index-url", url + "/whl/{variant}", "--allow-insecure-index", "--no-cache"],
              during=signal_on(signal.SIGHUP, 3), expect={130})
    b.run(11, "verify, nvidia-smi hangs", ["verify", "--env", str(b.base()), "--nproc", "1", "--no-bandwidth"],
          smi="hang", expect={0, 1})


def d12(b: Box) -> None:
    d = b.work / "d12"
    (d / ".env.torchfit-mybackup").mkdir(parents=True)
    (d / ".env.torchfit-mybackup" / "a.txt").write_text("notes\n")
    res, _, _ = b.run(12, "install beside a user's .env.torchfit-mybackup", ["install", *REQ, "--torch-index-url",
                      b.mirror, "--prefix", str(d / "env")], expect={0})
    if not (d / ".env.torchfit-mybackup" / "a.txt").exists():
        res.verdicts.append("data-loss")


def d13(b: Box) -> None:
    b.run(13, "export --torch-index-url http://… (no flag)", ["export", "--format", "requirements",
          "--torch-index-url", "http://mirror.example/whl/{variant}", *REQ], expect={2})
    b.run(13, "matrix check --index-url http://u:TOKEN@… (no flag)", ["matrix", "check", "--torch", "2.13.0",
          "--variant", "cpu", "--index-url", "http://u:TOKEN@127.0.0.1:9/whl"], expect={2})
    b.run(13, "install --torch-index-url http://… (no flag)", ["install", *REQ, "--torch-index-url",
          "http://mirror.example/whl/{variant}", "--prefix", str(b.work / "d13")], expect={2})


def d14(b: Box) -> None:
    for v in ("nan", "inf", "-1", "0", "1e309"):
        b.run(14, f"detect --timeout {v}", ["detect", "--timeout", v], expect={2})
    b.run(14, "install --timeout nan", ["install", *REQ, "--timeout", "nan", "--prefix", str(b.work / "d14")],
          expect={2})
    b.run(14, "install --wait nan", ["install", *REQ, "--wait", "nan", "--prefix", str(b.work / "d14")], expect={2})
    b.run(14, "verify --sizes 1e20", ["verify", "--env", str(b.base()), "--sizes", "100000000000000000000"],
          expect={2})
    b.run(14, "verify --timeout nan", ["verify", "--env", str(b.base()), "--timeout", "nan"], expect={2})
    b.run(14, "verify --master-port 99999", ["verify", "--env", str(b.base()), "--master-port", "99999"], expect={2})


def d15(b: Box) -> None:
    deep = b.work / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    b.run(15, "resolve --facts (100 000 nested [)", ["resolve", "--facts", str(deep)], expect={2})
    b.run(15, "resolve --facts /dev/zero", ["resolve", "--facts", "/dev/zero"], expect={2})
    b.run(15, "export --lock /dev/zero", ["export", "--format", "requirements", "--lock", "/dev/zero"], expect={2})


def d16(b: Box) -> None:
    bad = b.work / "c.toml"
    bad.write_text("bad = [\n")
    b.run(16, "verify --lock corrupt.toml", ["verify", "--env", str(b.base()), "--lock", str(bad), "--nproc", "1",
          "--no-bandwidth"], expect={1})


def d17(b: Box) -> None:
    res, out, _err = b.run(17, "resolve --assume gpu=gfx942", ["resolve", "--assume", "gpu=gfx942", "--json"],
                          expect={0, 1})
    with contextlib.suppress(ValueError):
        plan = json.loads(out)
        res.notes.append(f"torch {plan.get('torch')} {plan.get('variant')}")
        if str(plan.get("torch", "")).startswith("2.5") and "unknown in the matrix" not in " ".join(
                plan.get("warnings", [])):
            res.verdicts.append("wrong-exit")
            res.notes.append("2.5 without saying that newer builds lack data")


def d18(b: Box) -> None:
    env = b.work / "d18" / "env"
    env.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(env)], capture_output=True).returncode == 0
    if not mounted:
        b.results.append(Result(18, "install into a mount point (skipped: cannot mount tmpfs here)", "-", 0.0))
        return
    try:
        shutil.copytree(b.base(), env, dirs_exist_ok=True, symlinks=True)
        b.run(18, "install --force into a PREFIX that is a mount point", ["install", *REQ, "--torch-index-url",
              b.mirror, "--prefix", str(env), "--force"], expect={2})
    finally:
        subprocess.run(["umount", str(env)], capture_output=True)


def _facts(b: Box, name: str, data: object) -> str:
    p = b.work / f"{name}.json"
    p.write_text(json.dumps(data))
    return str(p)


def d19(b: Box) -> None:
    b.run(19, "resolve --facts with a typo key 'driver'", ["resolve", "--facts",
          _facts(b, "typo", {"driver": "550.54.14", "gpus": []})], expect={2})
    b.run(19, "resolve --facts GPU by name alone", ["resolve", "--facts", _facts(b, "byname", {
          "driver_version": "580.65.06", "gpus": [{"name": "NVIDIA GeForce RTX 4090"}], "glibc": "2.35",
          "arch": "x86_64", "pythons": [{"version": "3.11.7"}]})], expect={0})
    b.run(19, "resolve --facts pyenv.installable garbage", ["resolve", "--facts", _facts(b, "pyenv", {
          "pyenv": {"path": "/r", "installable": ["abc", "3.12.99999999999999999999"]}})], expect={2})
    b.run(19, "resolve --facts pyenv with a typo key 'root'", ["resolve", "--facts", _facts(b, "pyenv2", {
          "pyenv": {"root": "/r", "installable": ["3.12.1"]}})], expect={2})


def d20(b: Box) -> None:
    for req in ("torch @ https://x/y.whl", "torch[opt-einsum]", 'torch; python_version<"3"'):
        b.run(20, f"resolve {req!r}", ["resolve", req, "--assume", "gpu=none"], expect={2})


def d21(b: Box) -> None:
    b.run(21, "export --format pylock, uv only beside torchfit", ["export", "--format", "pylock", *REQ,
          "--torch-index-url", b.mirror], expect={0})


def d22(b: Box) -> None:
    res, out, _ = b.run(22, "verify --slurm --partition $'gpu\\necho pwned'", ["verify", "--slurm", "--nodes", "2",
                        "--gpus-per-node", "8", "--env", str(b.base()), "--partition", "gpu\necho pwned"], expect={2})
    if "pwned" in out:
        res.verdicts.append("wrong-exit")
    b.run(22, "verify --slurm --time abc", ["verify", "--slurm", "--nodes", "2", "--gpus-per-node", "8", "--env",
          str(b.base()), "--time", "abc"], expect={2})


def d23(b: Box) -> None:
    for args in (["resolve", "--assume", "gpu=none"], ["detect", "--json"], ["matrix", "show", "--json"]):
        b.run(23, f"{' '.join(args)} > /dev/full", [], argv=["sh", "-c", 'exec "$@" > /dev/full', "_",
              sys.executable, "-m", "torchfit", *args], expect={2})
    b.run(23, "resolve | head -1 (torchfit's own status)", [], argv=["bash", "-c",
          '"$@" | head -1 >/dev/null; exit ${PIPESTATUS[0]}', "_", sys.executable, "-m", "torchfit", "resolve",
          "--assume", "gpu=none"], expect={0})


def d24(b: Box) -> None:
    state = b.work / "d24state"
    state.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(state)],
                      capture_output=True).returncode != 0:
        b.results.append(Result(24, "install log on a full filesystem (skipped: cannot mount tmpfs)", "-", 0.0))
        return
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={state}/fill", "bs=4k", "count=64"], capture_output=True)
        res, _, err = b.run(24, "install with XDG_STATE_HOME on a full tmpfs", ["install", *REQ, "--torch-index-url",
                            b.mirror, "--prefix", str(b.work / "d24" / "env")], env={"XDG_STATE_HOME": str(state)},
                            expect={0})
        if "log" not in err.lower():
            res.verdicts.append("wrong-exit")
            res.notes.append("no word about the log")
    finally:
        subprocess.run(["umount", str(state)], capture_output=True)


def d25(b: Box) -> None:
    before = {p.name for p in b.tmp.iterdir()}
    res, _, _ = b.run(25, "verify, SIGTERM after 3 s", ["verify", "--env", str(b.base()), "--nproc", "2"],
                      during=signal_on(signal.SIGTERM, 3), expect={130, 0, 1})
    left = sorted(p.name for p in b.tmp.iterdir() if p.name.startswith("torchfit-") and p.name not in before)
    if left:  # counted with what outlives a run
        res.verdicts.append("orphans")
        res.notes.append(f"left in TMPDIR: {left}")


def d26(b: Box) -> None:
    b.run(26, "matrix check --index-url 'https://[::1/whl'", ["matrix", "check", "--index-url", "https://[::1/whl"],
          expect={2})


def d27(b: Box) -> None:
    for args in (["resolve", "--assume", "gpu=gfxZZZ"], ["resolve", "--assume", "driver=\uff15\uff18\uff10.\uff11"],
                 ["install", "--torch-index-url", "notaurl", "--prefix", str(b.work / "d27")],
                 ["install", "--torch-index-url", "https://m/{varient}", "--prefix", str(b.work / "d27")],
                 ["install", "--index-url", "notaurl", "--prefix", str(b.work / "d27")]):
        b.run(27, " ".join(args[:3]), args, expect={2})
    b.run(27, "resolve --facts with a 2001-part driver", ["resolve", "--facts",
          _facts(b, "drv", {"driver_version": ".".join(["1"] * 2001)})], expect={2})


def d28(b: Box) -> None:
    text = (b.base() / "pylock.toml").read_text()
    blocks = text.split("[[packages]]")
    torch = next(x for x in blocks if 'name = "torch"' in x.split("[[packages.wheels]]")[0])
    dup = b.work / "dup.toml"
    dup.write_text(text.rstrip("\n") + "\n\n[[packages]]" + torch)
    b.run(28, "install --lock with torch twice", ["install", "--lock", str(dup), "--prefix", str(b.work / "d28")],
          expect={2})
    import re

    py39 = b.work / "py39.toml"
    py39.write_text(re.sub(r'^requires-python = ".*"$', 'requires-python = "==3.9.*"', text, flags=re.M))
    b.run(28, "install --lock requires-python ==3.9.* (plan 3.11)", ["install", "--lock", str(py39), "--prefix",
          str(b.work / "d28")], expect={2})


def d29(b: Box) -> None:
    gpu = {"index": 0, "name": "NVIDIA H100", "compute_capability": "9.0"}
    res, _, err = b.run(29, "resolve --facts with 200 000 GPUs", ["resolve", "--facts", _facts(b, "huge", {
                        "driver_version": "580.65.06", "gpus": [gpu] * 200_000})], expect={2})
    if max((len(x) for x in err.splitlines()), default=0) > 300:
        res.verdicts.append("wrong-exit")
        res.notes.append("an error line over 300 characters")
    gpus = [dict(gpu, index=i) for i in range(1024)]
    res, _, _ = b.run(29, "resolve --facts with 1024 GPUs, old driver", ["resolve", "--facts", _facts(b, "g1024", {
                      "driver_version": "450.80.02", "gpus": gpus, "glibc": "2.35", "arch": "x86_64",
                      "pythons": [{"version": "3.11.7"}]})], expect={0, 1})
    if res.seconds > 5:
        res.verdicts.append("hang")
        res.notes.append("over 5 s")


def d30(b: Box) -> None:
    res, out, err = b.run(30, "resolve --facts, ANSI escapes in a GPU name", ["resolve", "--facts", _facts(b, "ansi", {
                          "driver_version": "450.80.02", "gpus": [{"name": "Evil\x1b[2J\x1b]0;pwned\x07GPU",
                          "compute_capability": "9.0"}]})], expect={1})
    if "\x1b" in out + err:
        res.verdicts.append("wrong-exit")
        res.notes.append("an escape reached the terminal")


def selftest(b: Box) -> None:
    """The classifier can fail: a command that leaves a process in a session of its own,
    prints an unindented traceback and exits 3 must be classified orphans, traceback and
    wrong-exit; one that prints an indented traceback and exits as expected is ok."""
    bad, _, _ = b.run(0, "selftest", [], argv=["sh", "-c", "setsid sleep 30 >/dev/null 2>&1 & echo 'Traceback (most recent call "
                      "last):'; exit 3"], expect={0}, record=False)
    good, _, _ = b.run(0, "selftest", [], argv=["sh", "-c", "echo '   Traceback (most recent call last):'"],
                       expect={0}, record=False)
    if sorted(bad.verdicts) != ["orphans", "traceback", "wrong-exit"] or good.verdicts:
        sys.exit(f"rerun-defects: the classifier self-test failed: {bad.verdicts} / {good.verdicts}")


REPROS: dict[int, Callable[[Box], None]] = {int(name[1:]): fn for name, fn in globals().items()
                                            if name.startswith("d") and name[1:].isdigit() and callable(fn)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write results.md and results.json into this directory")
    ap.add_argument("--only", help="comma-separated defect numbers")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--src", help="run the torchfit of this src/ directory instead of this checkout's")
    args = ap.parse_args()
    if args.src:
        global SRC
        SRC = Path(args.src).resolve()
    only = sorted(int(x) for x in args.only.split(",")) if args.only else sorted(REPROS)
    work = Path(tempfile.mkdtemp(prefix="torchfit-rerun-"))
    box = Box(work)
    started = time.monotonic()
    selftest(box)
    print("classifier self-test: ok (an orphan, a traceback and a wrong exit are caught)", file=sys.stderr)
    # #7 waits out the stall limit (~2 min): run it beside the others.
    slow = [n for n in only if n == 7]
    side = Box(work / "side") if slow else None
    t = threading.Thread(target=lambda: [REPROS[n](side) for n in slow], daemon=True) if side else None
    if t:
        t.start()
    try:
        for n in only:
            if n in slow:
                continue
            print(f"#{n} ...", file=sys.stderr, flush=True)
            REPROS[n](box)
        if t:
            t.join()
            box.results.extend(side.results)  # type: ignore[union-attr]
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results = sorted(box.results, key=lambda r: r.defect)
    counts = {c: sum(c in r.verdicts for r in results) for c in CLASSES}
    lines = ["| defect | command | exit | s | verdict | notes |", "|---|---|---|---|---|---|"]
    for r in results:
        note = "; ".join(r.notes).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| #{r.defect} | {r.command.replace('|', chr(92) + '|')} | {r.exit} | {r.seconds:g} | "
                     f"{r.verdict} | {note} |")
    summary = [f"{len(results)} results from {len(only)} defects in {time.monotonic() - started:.0f} s; "
               + ", ".join(f"{c}: {counts[c]}" for c in CLASSES)]
    print("\n".join([*lines, "", *summary]))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.md").write_text("\n".join([*lines, "", *summary]) + "\n")
        (out / "results.json").write_text(json.dumps({"counts": counts, "results": [
            dict(asdict(r), verdict=r.verdict) for r in results]}, indent=1) + "\n")
    return 0 if not any(counts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
