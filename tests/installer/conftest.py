"""Fixtures for `torchfit install`: a local PEP 503 mirror over the CPU torch wheel,
one env built once per session (and its `--lock` twin), real subprocesses.

Installs are real: uv or pip, from the local wheel /opt/wheels/torch-2.13.0+cpu-...whl
and the machine's pip configuration (local file:// indexes, PyPI for the rest).
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.support.cli import run_cli, start_cli
from tests.support.servers import http_server
from tests.support.wheels import sha256_file

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data" / "installer"
CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
CPU_ARGS = ("torch==2.13.0", "--variant", "cpu", "--python", "3.11")
INSTALL_TIMEOUT = 900


def make_simple_index(root: Path, wheels: list[Path], relative: bool = False) -> Path:
    """A PEP 503 tree: root/simple/<project>/index.html linking each wheel with #sha256=.

    relative=True copies (links) the wheels under root/files and uses ../../files/ hrefs,
    as a mirror served over HTTP needs.
    """
    simple = root / "simple"
    projects: dict[str, list[str]] = {}
    for wheel in wheels:
        project = wheel.name.split("-")[0].lower().replace("_", "-")
        digest = sha256_file(wheel)
        quoted = wheel.name.replace("+", "%2B")
        if relative:
            (root / "files").mkdir(parents=True, exist_ok=True)
            target = root / "files" / wheel.name
            if not target.exists():
                os.symlink(wheel, target)
            href = f"../../files/{quoted}#sha256={digest}"
        else:
            href = f"{wheel.parent.as_uri()}/{quoted}#sha256={digest}"
        projects.setdefault(project, []).append(f'<a href="{href}">{wheel.name}</a>')
    for project, links in projects.items():
        (simple / project).mkdir(parents=True, exist_ok=True)
        (simple / project / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (simple / "index.html").write_text(
        "<!DOCTYPE html><html><body>\n"
        + "\n".join(f'<a href="{p}/">{p}</a>' for p in sorted(projects)) + "\n</body></html>\n")
    return simple


@pytest.fixture(scope="session")
def cpu_wheel() -> Path:
    if not CPU_WHEEL.is_file():
        pytest.skip(f"{CPU_WHEEL} is not on this machine")
    return CPU_WHEEL


@pytest.fixture(scope="session")
def torch_index(tmp_path_factory: pytest.TempPathFactory, cpu_wheel: Path) -> str:
    """file:// URL of a PEP 503 index holding only the CPU torch 2.13.0 wheel."""
    root = tmp_path_factory.mktemp("mirror")
    return make_simple_index(root, [cpu_wheel]).as_uri()


@pytest.fixture(scope="session")
def state_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


def tf_env(state: Path, **extra: str) -> dict[str, str]:
    """The environment of a torchfit subprocess: this checkout importable, logs in `state`."""
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["XDG_STATE_HOME"] = str(state)
    env.pop("TORCHFIT_TORCH_INDEX_URL", None)
    env.update(extra)
    return env


def run_tf(*args: str, state: Path, timeout: float = INSTALL_TIMEOUT, env: dict[str, str] | None = None,
           **extra_env: str) -> subprocess.CompletedProcess[str]:
    """`python -m torchfit ARGS` as a real subprocess."""
    return run_cli(*args, base_env=tf_env(state, **extra_env), env=env, timeout=timeout, cwd=str(ROOT))


def start_tf(*args: str, state: Path, **extra_env: str) -> subprocess.Popen[str]:
    return start_cli(*args, base_env=tf_env(state, **extra_env), cwd=str(ROOT))


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """Assert exit 2 with exactly one line on stderr and no traceback; return the line."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and lines[0].startswith("torchfit: error:"), proc.stderr
    return lines[0]


# --- processes ---------------------------------------------------------------------------


def children_of(pid: int) -> list[tuple[int, list[str]]]:
    """Direct children of `pid` with their argv, read from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
            ppid = int(stat.rpartition(")")[2].split()[1])
            if ppid != pid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
        except (OSError, ValueError, IndexError):
            continue
        out.append((int(entry), argv))
    return out


def wait_for_child(proc: subprocess.Popen[str], match: Callable[[list[str]], bool],
                   timeout: float = 300) -> tuple[int, list[str]]:
    """Poll until `proc` has a child whose argv satisfies `match`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"torchfit ended (exit {proc.returncode}) before the child appeared:\n{err}")
        for pid, argv in children_of(proc.pid):
            if match(argv):
                return pid, argv
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("the child never appeared")


def is_pip_install(argv: list[str]) -> bool:
    # The exec'd pip itself: a child forked but not yet exec'd still shows torchfit's own
    # argv (which holds "--installer pip" and "install"), and may be a host probe.
    return argv[1:4] == ["-m", "pip", "install"]


def is_uv_install(argv: list[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) == "uv" and argv[1:3] == ["pip", "install"]


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            state = fh.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def leftovers(parent: Path) -> list[str]:
    """Temporary envs or lock files torchfit left in `parent`."""
    return sorted(p.name for p in parent.iterdir() if ".torchfit-" in p.name or p.name.endswith(".lock"))


def env_dists(prefix: Path) -> dict[str, str]:
    """name -> version of every distribution in an env, read by its own Python."""
    code = ("import json; from importlib import metadata; "
            "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version "
            "for d in metadata.distributions()}))")
    out = subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout)


def have_uv() -> bool:
    from torchfit.lock.uvbin import find_uv
    from torchfit.runner import Runner

    return find_uv(Runner()) is not None


needs_uv = pytest.mark.skipif(not have_uv(), reason="uv is not installed (pip install uv)")


# --- the shared env -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cpu_env(tmp_path_factory: pytest.TempPathFactory, torch_index: str, state_home: Path) -> dict[str, Any]:
    """One CPU torch 2.13.0 env built by `torchfit install` (uv), shared by the tests."""
    if not have_uv():
        pytest.skip("uv is not installed")
    prefix = tmp_path_factory.mktemp("cpu") / "env"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix), "--json",
                  state=state_home)
    assert proc.returncode == 0, proc.stderr
    return {"prefix": prefix, "json": json.loads(proc.stdout), "stderr": proc.stderr}


@pytest.fixture(scope="session")
def cpu_env_relocked(tmp_path_factory: pytest.TempPathFactory, cpu_env: dict[str, Any],
                     state_home: Path) -> dict[str, Any]:
    """The same env rebuilt elsewhere with `torchfit install --lock`, with pip seeded (--seed)."""
    prefix = tmp_path_factory.mktemp("relock") / "env"
    proc = run_tf("install", "--lock", str(cpu_env["prefix"] / "pylock.toml"), "--prefix", str(prefix), "--json",
                  "--seed", state=state_home)
    assert proc.returncode == 0, proc.stderr
    return {"prefix": prefix, "json": json.loads(proc.stdout), "stderr": proc.stderr}


# --- an HTTP mirror with basic auth ----------------------------------------------------------


class _AuthHandler(http.server.SimpleHTTPRequestHandler):
    expected = ""
    seen: ClassVar[list[tuple[str, int]]] = []

    def log_message(self, *_args: Any) -> None:  # quiet
        pass

    def _authorized(self) -> bool:
        ok = self.headers.get("Authorization") == self.expected
        if not ok:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="torchfit-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
        return ok

    def do_GET(self) -> None:
        if self._authorized():
            self.seen.append((self.path, 200))
            super().do_GET()

    def do_HEAD(self) -> None:
        if self._authorized():
            super().do_HEAD()


@pytest.fixture
def auth_mirror(tmp_path: Path, cpu_wheel: Path) -> Iterator[dict[str, Any]]:
    """http://user:secret@127.0.0.1:PORT/simple: a PEP 503 tree that demands basic auth."""
    root = tmp_path / "served"
    make_simple_index(root, [cpu_wheel], relative=True)
    token = base64.b64encode(b"user:secret").decode()
    seen: list[tuple[str, int]] = []
    handler = type("Handler", (_AuthHandler,), {"expected": f"Basic {token}", "seen": seen})

    def factory(*a: Any, **kw: Any) -> Any:
        return handler(*a, directory=str(root), **kw)

    with http_server(handler=factory) as server:
        port = int(server.url.rsplit(":", 1)[1])
        yield {"url": f"http://user:secret@127.0.0.1:{port}/simple", "seen": seen, "port": port}


def send_and_wait(proc: subprocess.Popen[str], sig: int, timeout: float = 120) -> tuple[str, str]:
    os.kill(proc.pid, sig)
    return proc.communicate(timeout=timeout)

