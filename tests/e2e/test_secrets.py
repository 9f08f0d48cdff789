"""Tokens in URLs (issue 21, class 5): what a real install, doctor and verify let out.

Every process a tagged torchfit starts is watched through /proc while it runs: its
command line (readable by every user, `ps`) and its environment. A secret may reach uv
or pip through their environment (only this user reads /proc/PID/environ), never their
argv; the env's own Python (install's check, verify's ranks, doctor's worker) gets no
package source at all. Progress lines, the install log and the lock hold no secret either.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import CPU_ARGS, Run, Tf
from tests.installer.conftest import make_simple_index, needs_uv
from tests.support.servers import http_server, reply
from tests.support.wheels import serve_dir

pytestmark = pytest.mark.filterwarnings("ignore")

SECRET = b"SEKRET"


class Watch:
    """Polls /proc for the processes of one tagged run: pid -> (ppid, argv, environ)."""

    def __init__(self, tag: str) -> None:
        self.needle = f"TORCHFIT_TEST_TAG={tag}".encode()
        self.seen: dict[int, tuple[int, list[bytes], bytes]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/environ", "rb") as fh:
                        environ = fh.read()
                    if self.needle not in environ.split(b"\0"):
                        continue
                    with open(f"/proc/{entry}/cmdline", "rb") as fh:
                        argv = fh.read().split(b"\0")
                    with open(f"/proc/{entry}/stat", "rb") as fh:
                        ppid = int(fh.read().rpartition(b")")[2].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if argv != [b""]:
                    self.seen[int(entry)] = (ppid, argv, environ)
            self._stop.wait(0.01)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def named(self, word: bytes) -> list[int]:
        return [p for p, (_, argv, _) in self.seen.items() if any(word in a for a in argv)]


def _watched(tf: Tf, *args: str, env: dict[str, str], timeout: float = 600) -> tuple[Run, Watch, int, str, str]:
    run = tf.start(*args, env=env)
    with Watch(run.tag) as watch:
        code, out, err = run.wait(timeout)
    return run, watch, code, out, err


@pytest.fixture
def http_mirror(tmp_path: Path, cpu_wheel: Path) -> Iterator[str]:
    """http://127.0.0.1:PORT serving /simple (the CPU torch) and /files/ (a find-links page);
    the server ignores the query, as GitLab's would check it."""
    root = tmp_path / "mirror"
    make_simple_index(root, [cpu_wheel], relative=True)
    with serve_dir(root) as url:
        yield url


@pytest.mark.slow
@needs_uv
def test_attack3_install_keeps_tokens_out_of_argv_children_log_and_lock(
        tf: Tf, tmp_path: Path, http_mirror: str) -> None:
    prefix = tmp_path / "env"
    env = {
        "TORCHFIT_TORCH_INDEX_URL": f"{http_mirror}/simple?token=SEKRETA",
        "PIP_EXTRA_INDEX_URL": f"file:///opt/pypi/simple {http_mirror.replace('://', '://u:SEKRETB@')}/simple/",
    }
    _, watch, code, out, err = _watched(
        tf, "install", *CPU_ARGS, "--prefix", str(prefix), "--allow-insecure-index", "--installer", "uv",
        "--find-links", f"{http_mirror}/files/?private_token=SEKRETC", env=env)
    assert code == 0, err
    assert SECRET.decode() not in out + err  # progress lines and the summary
    for name in ("torchfit-install.log", "pylock.toml"):
        text = (prefix / name).read_text()
        assert "SEKRET" not in text, (name, [ln for ln in text.splitlines() if "SEKRET" in ln][:3])
    assert "token=***" in (prefix / "torchfit-install.log").read_text()  # said, masked
    # torchfit's own process; a child caught between fork and exec (the runner's preexec sets
    # PDEATHSIG in Python, a window of milliseconds the 10 ms poll can hit) still shows torchfit's
    # argv, with torchfit as its parent: it is a child, not a second torchfit
    torchfits = {p for p, (_, argv, _) in watch.seen.items() if argv[1:3] == [b"-m", b"torchfit"]}
    own = [p for p in torchfits if watch.seen[p][0] not in torchfits]
    assert len(own) == 1, [v[1][:3] for v in watch.seen.values()]
    children = {p: v for p, v in watch.seen.items() if p not in own}
    uv = [p for p, (_, argv, _) in children.items() if argv[0].endswith(b"/uv")]
    assert uv, "no uv process was seen"
    # argv is public: no secret in any child's command line (a child seen only before its exec shows
    # torchfit's own argv, which carries the test's --find-links token by the test's choice: not a child's)
    mine = watch.seen[own[0]][1]
    leaks = [argv for _, argv, _ in children.values() if argv != mine and any(SECRET in a for a in argv)]
    assert leaks == [], leaks
    # uv gets the find-links page (with its token) through its environment
    assert any(b"UV_FIND_LINKS=" in e and b"SEKRETC" in e for p, (_, _, e) in children.items() if p in uv)
    # the env's own Python, run by torchfit (the build check), gets no source at all
    worker = [p for p in watch.named(b"build_worker") if children[p][0] == own[0]]
    assert worker, "the build check was not seen"
    for p in worker:
        environ = children[p][2]
        assert SECRET not in environ, [v for v in environ.split(b"\0") if SECRET in v]
        assert b"TORCHFIT_TORCH_INDEX_URL=" not in environ and b"PIP_EXTRA_INDEX_URL=" not in environ


@pytest.mark.slow
@pytest.mark.parametrize("command", ["doctor", "verify"])
def test_attack3_env_python_inherits_no_index_settings(tf: Tf, cpu_torch_env: Path, command: str) -> None:
    env = {
        "TORCHFIT_TORCH_INDEX_URL": "https://mirror.example/whl/{variant}?private_token=SEKRETA",
        "PIP_FIND_LINKS": "https://u:SEKRETB@mirror.example/wheels/",
        "PIP_EXTRA_INDEX_URL": "https://mirror.example/simple", "PIP_INDEX_URL": "https://mirror.example/simple",
        "UV_INDEX_URL": "https://mirror.example/simple", "UV_EXTRA_INDEX_URL": "https://mirror.example/simple",
    }
    args = [command, "--env", str(cpu_torch_env)] + (["--nproc", "1", "--backend", "gloo"] if command == "verify" else [])
    _, watch, code, out, err = _watched(tf, *args, env=env, timeout=300)
    assert "SEKRET" not in out + err
    python = str(cpu_torch_env / "bin" / "python").encode()
    mine = [p for p, (_, argv, _) in watch.seen.items()
            if argv[1:3] != [b"-m", b"torchfit"] and (argv[0].startswith(str(cpu_torch_env).encode()) or any(python in a for a in argv))]
    assert mine, (code, err, [v[1][:3] for v in watch.seen.values()])
    for p in mine:
        names = {v.partition(b"=")[0].decode() for v in watch.seen[p][2].split(b"\0")}
        assert not names & set(env), (watch.seen[p][1][:3], names & set(env))


def test_attack3_matrix_probe_sends_no_basic_credentials_over_plain_http(tf: Tf) -> None:
    wheel = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    with http_server(lambda h: reply(h, 404)) as srv:
        port = srv.url.rsplit(":", 1)[1]
        for url in (f"http://u:SEKRET1@127.0.0.1:{port}/{wheel}", f"http://127.0.0.1:{port}/{wheel}?token=SEKRET2"):
            code, out, err = tf.run("matrix", "probe", url, "--no-cache", timeout=120)
            assert code == 2 and "--allow-insecure-index" in err and "SEKRET" not in out + err, err
            assert srv.seen == []
        code, out, err = tf.run("matrix", "probe", f"http://u:SEKRET1@127.0.0.1:{port}/{wheel}", "--no-cache",
                                "--allow-insecure-index", timeout=120)
        assert srv.seen and "SEKRET" not in out + err, err  # asked for: sent, and still never printed
