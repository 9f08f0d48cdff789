"""Round 4 repros of what round 3 left (issue 25, "Left from round 3" and "Listed as partial"):
a non-root install --force in a sticky directory, a zip-bombed METADATA in `matrix probe`, an
interrupted verify's torchrun directory, a full TMPDIR, the `release unlocked lock` error."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Box, Case

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.support.mounts import fill, readable_torchfit
from tests.support.servers import RangeFiles
from tests.support.wheels import metadata_bomb as bombed_wheel

WHEEL_GLOB = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def _wheel() -> Path:
    links = os.environ.get("PIP_FIND_LINKS") or subprocess.run(
        ["pip", "config", "get", "global.find-links"], capture_output=True, text=True).stdout.strip()
    return sorted(Path(links.split()[0] if links else "/opt/wheels").glob(WHEEL_GLOB))[0]


# --- a non-root user's install --force over root's env in a sticky directory ------------------


def _world(box: Box) -> tuple[Path, dict[str, str]]:
    """A directory every user may enter holding this src, its imports, uv and a torch index page;
    the environment that runs torchfit from it as another user."""
    base = Path(tempfile.mkdtemp(prefix="tf-attack4-", dir="/tmp"))
    box.on_exit(lambda: shutil.rmtree(base, ignore_errors=True))
    base.chmod(0o755)
    pythonpath = readable_torchfit(base, box.src)
    (base / "bin").mkdir()
    shutil.copy2(Path(sys.executable).parent / "uv", base / "bin" / "uv")
    whl = _wheel()
    page = base / "mirror" / "simple" / "torch"
    page.mkdir(parents=True)
    digest = hashlib.sha256(whl.read_bytes()).hexdigest()
    (page / "index.html").write_text(
        f'<a href="{whl.parent.as_uri()}/{whl.name.replace("+", "%2B")}#sha256={digest}">{whl.name}</a>\n')
    (base / "home").mkdir(mode=0o777)
    (base / "home").chmod(0o777)
    subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
    links = os.environ.get("PIP_FIND_LINKS") or str(whl.parent)
    extra = subprocess.run(["pip", "config", "get", "global.extra-index-url"], capture_output=True,
                           text=True).stdout.strip()
    env = {"PATH": f"{base / 'bin'}:/usr/bin:/bin", "HOME": str(base / "home"), "LANG": "C.UTF-8",
           "PYTHONPATH": pythonpath, "PIP_FIND_LINKS": links, "PIP_EXTRA_INDEX_URL": extra}
    return base, env


def sticky_force(box: Box) -> str | None:
    base, env = _world(box)
    sticky = base / "scratch"
    sticky.mkdir()
    sticky.chmod(0o1777)
    prefix = sticky / "env"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    (prefix / "pylock.toml").touch()
    argv = ["runuser", "-u", "nobody", "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
            "/usr/bin/python3", "-m", "torchfit", "install", "torch==2.13.0", "--variant", "cpu", "--python", "3.11",
            "--torch-index-url", (base / "mirror" / "simple").as_uri(), "--prefix", str(prefix), "--force"]
    seen = []
    for attempt in ("first", "again"):
        start = time.monotonic()
        res = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd="/")
        took = time.monotonic() - start
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("torchfit: error:")]
        if res.returncode != 2 or "root" not in "".join(lines) or "[swap]" in res.stderr:
            seen.append(f"{attempt}: exit {res.returncode} after {took:.1f} s: {(lines or [''])[0][:110]}")
    left = [p.name for p in sticky.iterdir() if p.name != "env"]
    if left:
        seen.append(f"left {left[0]} beside the env")
    return "; ".join(seen) or None


# --- matrix probe of a wheel whose METADATA is a zip bomb (declared honestly) ------------------


def _limit_memory(mib: int):  # type: ignore[no-untyped-def]
    import resource

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
    return apply


def _bomb(box: Box) -> Path:
    """torch-...whl whose METADATA is 1.9 GiB of zeros (2 MB on disk), its size declared truly."""
    path = box.work / "bomb" / "torch-2.13.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"
    path.parent.mkdir(exist_ok=True)
    return bombed_wheel(path, 1900)


def _ranges(box: Box, path: Path) -> str:
    """`path` over HTTP with Range (a mirror), its URL."""
    return f"{box.serve(answer=RangeFiles({path.name: path}))}/{path.name}"


def metadata_bomb(box: Box) -> str | None:
    whl = _bomb(box)
    url = _ranges(box, whl)
    seen = []
    for what, target in (("file", str(whl)), ("http", url)):
        for extra in ([], ["--json"]):
            res = box.tf("matrix", "probe", target, "--allow-insecure-index", "--no-cache", *extra, timeout=120,
                         preexec_fn=_limit_memory(1024))
            lines = [ln for ln in res.err.splitlines() if ln.strip()]
            label = f"{what}{' --json' if extra else ''}"
            if res.timed_out or "MemoryError" in res.text or res.traceback:
                seen.append(f"{label}: exit {res.code} after {res.seconds:.0f} s, "
                            + ("timed out" if res.timed_out else "MemoryError/traceback"))
            elif res.code != (2 if what == "file" else 1) or len(lines) != 1 or res.seconds > 10:
                seen.append(f"{label}: exit {res.code}, {len(lines)} lines, {res.seconds:.0f} s")
    return "; ".join(seen) or None


# --- an interrupted verify: torchrun's torchelastic_* directory ------------------------------


def verify_torchelastic(box: Box) -> str | None:
    import random
    import signal

    env = box.cpu_env()
    rng = random.Random(25)
    seen = []
    tmp = box.work / "tmp"
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        for group in (False, True):
            moment = rng.uniform(5, 8)

            def hit(proc, moment: float = moment, sig: int = sig, group: bool = group) -> None:  # type: ignore[no-untyped-def]
                time.sleep(moment)
                if proc.poll() is None:
                    (os.killpg if group else os.kill)(proc.pid, sig)

            res = box.tf("verify", "--env", str(env), "--backend", "gloo", "--nproc", "2", during=hit, timeout=180,
                         start_new_session=True)
            left = sorted(p.name for p in tmp.rglob("torchelastic_*"))
            label = f"{signal.Signals(sig).name}{' to the group' if group else ''} at {moment:.1f} s"
            if left:
                seen.append(f"{label}: exit {res.code}, left {left[0]} in TMPDIR")
                for p in tmp.glob("torchelastic_*"):
                    shutil.rmtree(p, ignore_errors=True)
            elif res.code not in (0, 130):
                seen.append(f"{label}: exit {res.code}")
    return "; ".join(seen[:3]) + (f" (and {len(seen) - 3} more)" if len(seen) > 3 else "") or None


# --- a TMPDIR full to the last byte ---------------------------------------------------------


def tmpdir_full(box: Box) -> str | None:
    where = box.tmpfs("full", "size=256k")
    fill(where)
    seen = []
    runs = {
        "verify": ("verify", "--python", sys.executable, "--no-bandwidth", "--nproc", "1"),
        "install": ("install", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--torch-index-url",
                    box.torch_index, "--prefix", str(box.work / "env")),
    }
    for what, args in runs.items():
        before = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("torchfit-")}
        res = box.tf(*args, env={"TMPDIR": str(where)}, timeout=300)
        moved = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("torchfit-")} - before
        said = "[disk-full]" in res.err and "TMPDIR" in res.err and str(where) in res.err
        if not said:
            line = next((ln for ln in res.err.splitlines() if "error" in ln), res.err.strip()[-100:])
            seen.append(f"{what}: exit {res.code}, TMPDIR not named as full: {line[:110]}")
        elif moved:
            seen.append(f"{what}: used {tempfile.gettempdir()} instead ({sorted(moved)[0]})")
    return "; ".join(seen) or None


# --- "release unlocked lock": SIGINT at each line the main thread runs inside threading.py ----

def _at_each_line() -> str:
    """tests/test_background.py's program: a real SIGINT at each line the main thread runs in
    threading.py while a Background starts and is waited for (torchfit's own handler)."""
    import ast

    tree = ast.parse((ROOT / "tests" / "test_background.py").read_text())
    return next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and getattr(node.targets[0], "id", "") == "AT_EACH_LINE")  # type: ignore[attr-defined]


def unlocked_lock(box: Box) -> str | None:
    import json

    res = subprocess.run([sys.executable, "-c", _at_each_line(), "result"], env=box.env, capture_output=True,
                         text=True, timeout=120)
    if res.returncode != 0:
        return f"exit {res.returncode}: {res.stderr.strip()[-150:]}"
    errors = json.loads(res.stdout.strip().splitlines()[-1])["errors"]
    return f"{len(errors)} of 79 instants (SIGINT at line N of threading.py): {errors[0]}" if errors else None


CASES = [
    Case("lo-sticky-force", 4, "a non-root install --force over root's env in a sticky directory (twice)",
         sticky_force),
    Case("lo-metadata-bomb", 3, "matrix probe FILE|URL (--json): METADATA is 1.9 GiB of zeros, declared, 1 GiB memory",
         metadata_bomb),
    Case("lo-verify-torchelastic", 7, "verify (gloo, 2 ranks) interrupted 5-8 s in: torchrun's torchelastic_* in TMPDIR",
         verify_torchelastic),
    Case("lo-tmpdir-full", 5, "verify and install with a TMPDIR full to the last byte (a tmpfs): said, not /tmp",
         tmpdir_full),
    Case("lo-unlocked-lock", 3, "SIGINT at each instant of a Background start and wait: 'release unlocked lock'",
         unlocked_lock),
]
