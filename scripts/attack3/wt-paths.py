"""Repros of wt-paths: tokens in URLs (class 5), paths (class 4), shared machines (class 7)."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from _common import Box, Case

SEK = "SEKRET"
WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CPU = ("torch==2.13.0", "--variant", "cpu", "--python", "3.11")


# --- helpers --------------------------------------------------------------------------------


def _descendants(pid: int) -> list[int]:
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    parent[int(entry)] = int(fh.read().rpartition(b")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


class Watch:
    """While torchfit runs: every descendant's argv and environment, read from /proc."""

    def __init__(self, stop_when: Callable[[list[bytes]], bool] | None = None) -> None:
        self.seen: dict[int, tuple[list[bytes], bytes]] = {}
        self.stop_when = stop_when

    def __call__(self, proc: subprocess.Popen[str]) -> None:
        while proc.poll() is None:
            for p in _descendants(proc.pid):
                try:
                    with open(f"/proc/{p}/cmdline", "rb") as fh:
                        argv = fh.read().split(b"\0")
                    with open(f"/proc/{p}/environ", "rb") as fh:
                        environ = fh.read()
                except OSError:
                    continue
                if argv != [b""]:
                    self.seen[p] = (argv, environ)
                    if self.stop_when and self.stop_when(argv):
                        time.sleep(0.3)
                        proc.kill()
                        return
            time.sleep(0.01)

    def argv_leaks(self) -> list[str]:
        return [b" ".join(a[:3]).decode(errors="replace") for a, _ in self.seen.values() if any(SEK.encode() in x for x in a)]

    def env_of(self, word: bytes) -> list[bytes]:
        return [e for a, e in self.seen.values() if any(word in x for x in a)]


def _leak(text: str, where: str) -> str | None:
    if SEK not in text:
        return None
    line = next(ln for ln in text.splitlines() if SEK in ln)
    return f"{where}: {line.strip()[:140]}"


def _files_with_secret(root: Path) -> list[str]:
    hits = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) > 20 << 20:
                    continue
                with open(path, "rb") as fh:
                    if SEK.encode() in fh.read():
                        hits.append(os.path.relpath(path, root))
            except OSError:
                pass
    return hits


def _mirror(box: Box) -> str:
    """The local torch index served over http on 127.0.0.1 (query strings ignored, as a token check would pass)."""
    from urllib.parse import unquote, urlsplit

    page = (Path(unquote(urlsplit(box.torch_index).path)) / "torch" / "index.html").read_text()
    href = page.split('href="', 1)[1].split('"', 1)[0]
    files = box.work / "files"
    files.mkdir(exist_ok=True)
    if not (files / WHEEL).exists():
        os.symlink(unquote(urlsplit(href).path), files / WHEEL)
    simple = box.work / "simple" / "torch"
    simple.mkdir(parents=True, exist_ok=True)
    (simple / "index.html").write_text(f'<a href="../../files/{WHEEL.replace("+", "%2B")}#{href.split("#", 1)[1]}">'
                                       f'{WHEEL}</a>\n')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_a: object) -> None:
            pass

    return box.serve(functools.partial(Quiet, directory=str(box.work)))  # type: ignore[arg-type]


# --- class 5: tokens in URLs ------------------------------------------------------------------


def progress_and_error_show_query_token(box: Box) -> str | None:
    res = box.tf("install", *CPU, "--prefix", str(box.work / "env"), "--allow-insecure-index",
                 "--torch-index-url", f"http://127.0.0.1:9/simple?token={SEK}1", timeout=120)
    return _leak(res.out + res.err, "stderr")


def json_error_shows_private_token(box: Box) -> str | None:
    res = box.tf("install", *CPU, "--prefix", str(box.work / "env"), "--allow-insecure-index", "--json",
                 "--torch-index-url", f"http://127.0.0.1:9/simple?private_token={SEK}2", timeout=120)
    return _leak(res.out, "--json")


def install_log_and_lock_keep_token(box: Box) -> str | None:
    url = _mirror(box)
    prefix = box.work / "env"
    res = box.tf("install", *CPU, "--prefix", str(prefix), "--allow-insecure-index",
                 "--torch-index-url", f"{url}/simple?token={SEK}3", timeout=600)
    if res.code != 0:
        return f"install failed ({res.code}): {res.err.strip().splitlines()[-1][:120]}"
    hits = _files_with_secret(prefix) + [f"state/{p}" for p in _files_with_secret(box.work / "state")]
    return ("the token is written to " + ", ".join(sorted(hits)[:4])) if hits else _leak(res.err, "progress")


def export_writes_token(box: Box) -> str | None:
    out = []
    for fmt in ("requirements", "uv"):
        res = box.tf("export", "--format", fmt, *CPU, "--assume", "gpu=none",
                     "--torch-index-url", f"https://mirror.example/whl/cpu?private_token={SEK}4")
        seen = _leak(res.out + res.err, f"export --format {fmt}")
        if seen:
            out.append(seen)
    return out[0] if out else None


def find_links_token_in_uv_argv(box: Box) -> str | None:
    # a find-links page that never answers: uv waits on it, its command line readable by anyone (ps)
    hang = box.serve(_Hang)
    watch = Watch(stop_when=lambda argv: argv[0].endswith(b"/uv") and b"compile" in argv and b"--offline" not in argv)
    box.tf("install", *CPU, "--prefix", str(box.work / "env"), "--allow-insecure-index", "--installer", "uv",
           "--torch-index-url", box.torch_index, "--find-links", f"{hang}/wheels/?private_token={SEK}5",
           timeout=90, during=watch)
    leaks = watch.argv_leaks()
    if leaks:
        return f"a child's argv (ps) holds the token: {leaks[0]}"
    if not [a for a, _ in watch.seen.values() if b"compile" in a and b"--offline" not in a]:
        return "harness: uv's online resolution was not seen"
    return None


class _Hang(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(60)

    def log_message(self, *_a: object) -> None:
        pass


def install_check_inherits_index_variables(box: Box) -> str | None:
    watch = Watch()
    env = {"TORCHFIT_TORCH_INDEX_URL": f"https://ci:{SEK}6@mirror.example/whl/{{variant}}",
           "UV_EXTRA_INDEX_URL": f"https://mirror.example/simple?token={SEK}6"}
    res = box.tf("install", *CPU, "--prefix", str(box.work / "env"), "--torch-index-url", box.torch_index,
                 env=env, timeout=600, during=watch)
    if res.code != 0:
        return f"install failed ({res.code}): {res.err.strip().splitlines()[-1][:120]}"
    envs = watch.env_of(b"build_worker") + watch.env_of(b"closure")
    if not envs:
        return "harness: the build check was not seen"
    return "the env's Python (install's check) inherits the index credentials" if any(SEK.encode() in e for e in envs) else None


def _env_python_inherits(box: Box, *args: str, word: bytes) -> str | None:
    watch = Watch()
    env = {"TORCHFIT_TORCH_INDEX_URL": f"https://mirror.example/whl/{{variant}}?private_token={SEK}7",
           "PIP_FIND_LINKS": f"https://ci:{SEK}7@mirror.example/wheels/"}
    res = box.tf(*args, env=env, timeout=300, during=watch)
    envs = watch.env_of(word)
    if not envs:
        return f"harness: no {word.decode()} process seen (exit {res.code})"
    return f"the env's Python ({args[0]}) inherits PIP_FIND_LINKS/TORCHFIT_TORCH_INDEX_URL" if any(
        SEK.encode() in e for e in envs) else None


def doctor_worker_inherits(box: Box) -> str | None:
    return _env_python_inherits(box, "doctor", "--env", str(box.cpu_env()), word=b"doctor_worker")


def verify_worker_inherits(box: Box) -> str | None:
    return _env_python_inherits(box, "verify", "--env", str(box.cpu_env()), "--nproc", "1", "--backend", "gloo",
                                word=b"inspect_worker")


def probe_sends_basic_auth_over_http(box: Box) -> str | None:
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization") or "")
            self.send_response(404)
            self.end_headers()

        def log_message(self, *_a: object) -> None:
            pass

    url = box.serve(Handler)
    res = box.tf("matrix", "probe", url.replace("://", f"://u:{SEK}8@") + "/" + WHEEL, "--no-cache", timeout=60)
    if any(s.startswith("Basic ") for s in seen):
        return f"Basic credentials sent over plain http (exit {res.code})"
    return _leak(res.out + res.err, "probe")


CASES = [
    Case("5-progress-query-token", 5, "install: ?token= in --torch-index-url shown in progress lines and the error",
         progress_and_error_show_query_token),
    Case("5-json-private-token", 5, "install --json: ?private_token= in the JSON error", json_error_shows_private_token),
    Case("5-log-lock-token", 5, "install from an http mirror with ?token=: the install log and pylock.toml keep it",
         install_log_and_lock_keep_token),
    Case("5-export-token", 5, "export --format requirements|uv: ?private_token= written out", export_writes_token),
    Case("5-find-links-argv", 5, "install --find-links URL?private_token=: uv's argv (ps) holds the token",
         find_links_token_in_uv_argv),
    Case("5-install-check-env", 5, "install: the env's Python (the build check) inherits TORCHFIT_TORCH_INDEX_URL",
         install_check_inherits_index_variables),
    Case("5-doctor-env", 5, "doctor: its worker inherits PIP_FIND_LINKS/TORCHFIT_TORCH_INDEX_URL", doctor_worker_inherits),
    Case("5-verify-env", 5, "verify: the inspection inherits PIP_FIND_LINKS/TORCHFIT_TORCH_INDEX_URL",
         verify_worker_inherits),
    Case("5-probe-basic-http", 5, "matrix probe http://u:TOKEN@...: Basic credentials over plain http",
         probe_sends_basic_auth_over_http),
]


# --- class 4: paths ----------------------------------------------------------------------------

RAW = ("\x1b", "\u202e", "\udcff")


def _odd_prefix(box: Box, name: str) -> tuple[Path, object]:
    parent = box.work / "p"
    parent.mkdir(exist_ok=True)
    prefix = parent / name
    res = box.tf("install", *CPU, "--torch-index-url", box.torch_index, "--prefix", str(prefix), timeout=600)
    return prefix, res


def _refused_cleanly(res: object, parent: Path) -> str | None:
    """None when the refusal is one line, exit 2, nothing raw, nothing made; else what is wrong."""
    text = res.out + res.err  # type: ignore[attr-defined]
    lines = [ln for ln in res.err.splitlines() if ln.strip()]  # type: ignore[attr-defined]
    if res.traceback or "internal error" in text:  # type: ignore[attr-defined]
        return "a traceback: " + next((ln for ln in lines if "Error" in ln), lines[-1] if lines else "")[:140]
    if res.code != 2 or len(lines) != 1:  # type: ignore[attr-defined]
        return f"exit {res.code}, {len(lines)} lines: {lines[-1][:120] if lines else ''}"  # type: ignore[attr-defined]
    if any(r in text for r in RAW):
        return "the refusal prints the path raw"
    left = os.listdir(parent)
    return f"left beside the prefix: {left}" if left else None


def _script_starts(prefix: Path) -> str | None:
    try:
        res = subprocess.run([str(prefix / "bin" / "torchrun"), "--help"], capture_output=True, text=True, timeout=300)
    except OSError as exc:
        return f"bin/torchrun cannot start ({exc.strerror})"
    return None if res.returncode == 0 else f"bin/torchrun cannot start: {res.stderr.strip()[-100:]}"


def _shebang_case(name: str) -> Callable[[Box], str | None]:
    def fn(box: Box) -> str | None:
        prefix, res = _odd_prefix(box, name)
        if res.code == 0:  # type: ignore[attr-defined]
            return _script_starts(prefix) or "accepted (the env works)"
        return _refused_cleanly(res, prefix.parent)
    return fn


def colon_prefix(box: Box) -> str | None:
    prefix, res = _odd_prefix(box, "a:b")
    if res.code == 0:  # type: ignore[attr-defined]
        act = subprocess.run(["bash", "-c", f"source '{prefix}/bin/activate'; command -v python"],
                             capture_output=True, text=True, timeout=60)
        if act.stdout.strip() != str(prefix / "bin" / "python"):
            return f"activate does not put the env first: python is {act.stdout.strip() or 'not found'}"
        return None
    return _refused_cleanly(res, prefix.parent)


def _raw_case(name: str) -> Callable[[Box], str | None]:
    def fn(box: Box) -> str | None:
        prefix, res = _odd_prefix(box, name)
        text = res.out + res.err  # type: ignore[attr-defined]
        raw = [ln for ln in text.splitlines() if any(r in ln for r in RAW)]
        if raw:
            return f"{len(raw)} lines carry the raw characters to the terminal: {ascii(raw[0])[:120]}"
        if res.code != 0:  # type: ignore[attr-defined]
            return f"refused, though such an env works (exit {res.code})"  # type: ignore[attr-defined]
        return _script_starts(prefix)
    return fn


def non_utf8_prefix(box: Box) -> str | None:
    prefix, res = _odd_prefix(box, os.fsdecode(b"caf\xe9\xff"))
    if res.code == 0:  # type: ignore[attr-defined]
        return _script_starts(prefix)
    return _refused_cleanly(res, prefix.parent)


def long_name_prefix(box: Box) -> str | None:
    prefix, res = _odd_prefix(box, "x" * 240)
    if res.code == 0:  # type: ignore[attr-defined]
        return _script_starts(prefix)
    return _refused_cleanly(res, prefix.parent)


CASES += [
    Case("4-newline-prefix", 4, "install --prefix 'a<newline>b': bin/torchrun's #! line", _shebang_case("a\nb")),
    Case("4-tab-prefix", 4, "install --prefix 'a<tab>b': bin/torchrun's #! line", _shebang_case("a\tb")),
    Case("4-colon-prefix", 4, "install --prefix a:b: activate and PATH", colon_prefix),
    Case("4-ansi-prefix", 4, "install --prefix with an ANSI escape: raw to the terminal", _raw_case("\x1b[31mred")),
    Case("4-rlo-prefix", 4, "install --prefix with U+202E: raw to the terminal", _raw_case("evil\u202etxt")),
    Case("4-non-utf8-prefix", 4, "install --prefix with bytes that are not UTF-8", non_utf8_prefix),
    Case("4-long-name-prefix", 4, "install --prefix with a 240-byte name", long_name_prefix),
]


# --- class 7: shared machines ------------------------------------------------------------------

COLLEAGUE = "tfcolleague"
DEPS = ("packaging", "resolvelib", "rich", "pygments", "markdown_it", "mdurl", "requests", "urllib3", "idna",
        "charset_normalizer", "certifi", "elftools")


def _shared_world(box: Box) -> tuple[Path, str]:
    """A world-readable copy of the checkout's src and torchfit's imports, for the second user's
    /usr/bin/python3 (this interpreter may live under /root)."""
    import importlib
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="tf-attack3-", dir="/tmp"))
    box.on_exit(lambda: shutil.rmtree(base, ignore_errors=True))
    base.chmod(0o1777)
    for name in DEPS:
        src = Path(importlib.import_module(name).__file__ or "").parent
        shutil.copytree(src, base / "site" / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(box.src, base / "src", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "a+rX", str(base / "site"), str(base / "src")], check=True)
    if subprocess.run(["id", COLLEAGUE], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", COLLEAGUE], check=True)
    return base, f"{base / 'src'}:{base / 'site'}"


def _umask077_env(base: Path) -> Path:
    prefix = base / "env"
    subprocess.run(["bash", "-c", f"umask 077 && /usr/bin/python3 -m venv --without-pip '{prefix}' "
                    f"&& touch '{prefix}/bin/torchfit-env' '{prefix}/pylock.toml'"], check=True, timeout=120)
    return prefix


def _colleague_case(*command: str) -> Callable[[Box], str | None]:
    def fn(box: Box) -> str | None:
        base, pythonpath = _shared_world(box)
        prefix = _umask077_env(base)
        args = [command[0], "--env", str(prefix), *command[1:]]
        env = ["PATH=/usr/bin:/bin", f"HOME={base}", f"PYTHONPATH={pythonpath}", "LANG=C.UTF-8"]
        res = subprocess.run(["runuser", "-u", COLLEAGUE, "--", "env", "-i", *env, "/usr/bin/python3", "-m",
                              "torchfit", *args], capture_output=True, text=True, timeout=120, cwd="/")
        line = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr.strip()[-120:])
        if "permission denied" in res.stderr and "drwx------" in res.stderr and res.returncode == 1:
            return None
        return f"exit {res.returncode}: {line[:150]}"
    return fn


def install_warns_unshared(box: Box) -> str | None:
    import grp

    subprocess.run(["groupadd", "-f", "tfteam"], check=True, capture_output=True)
    team = box.work / "team"
    team.mkdir()
    os.chown(team, -1, grp.getgrnam("tfteam").gr_gid)
    team.chmod(0o2775)
    res = box.tf("install", *CPU, "--torch-index-url", box.torch_index, "--prefix", str(team / "env"),
                 timeout=600, preexec_fn=lambda: os.umask(0o077))
    if res.code != 0:
        return f"install failed ({res.code})"
    if not any("umask" in ln and "tfteam" in ln for ln in res.err.splitlines()):
        return "no warning: the env is drwx------ in a directory shared with group tfteam"
    return None


CASES += [
    Case("7-umask077-verify", 7, "verify --env of an env built under umask 077, by another user",
         _colleague_case("verify", "--nproc", "1")),
    Case("7-umask077-doctor", 7, "doctor --env of an env built under umask 077, by another user",
         _colleague_case("doctor")),
    Case("7-umask077-run", 7, "run --env of an env built under umask 077, by another user",
         _colleague_case("run", "--", "python", "-c", "pass")),
    Case("7-install-umask-warning", 7, "install under umask 077 into a setgid group directory: a warning",
         install_warns_unshared),
]
