"""Round 4 repros (issue 25), "Requirements files and pyproject" and the input checks of the other
sections: a FIFO named as an input file, the cost of -r, secrets of -r lines and URL requirements,
plain http for `name @ URL`, pyproject's types, REQ among the options, a lock's plan table and
lock-version, user paths shown escaped."""

from __future__ import annotations

import os
import re
from pathlib import Path

from _common import Box, Case, Result

CPU = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "glibc=2.35", "--assume", "arch=x86_64",
       "--variant", "cpu")
SECRET = "S3CRET-attack4-value"


def _local(box: Box) -> tuple[str, ...]:
    """The host above and the local torch mirror, offline: nothing leaves the machine."""
    return (*CPU, "--torch-index-url", box.torch_index, "--offline")


def _one_line_exit_2(res: Result, what: str) -> str | None:
    if res.timed_out:
        return f"{what}: still running after {res.seconds} s (killed)"
    if res.traceback or "internal error" in res.text:
        return f"{what}: {res.err.strip().splitlines()[-1][:160] if res.err.strip() else 'traceback'}"
    if res.code != 2:
        return f"{what}: exit {res.code}, not 2: {(res.err.strip().splitlines() or [''])[0][:160]}"
    if len(res.err.strip().splitlines()) != 1:
        return f"{what}: {len(res.err.strip().splitlines())} lines on stderr, not one"
    return None


# --- class 1: hangs / unbounded cost ----------------------------------------------------------


def _fifo(box: Box, *args: str) -> str | None:
    fifo = box.work / "pipe"
    os.mkfifo(fifo)
    res = box.tf(*[a.replace("{fifo}", str(fifo)) for a in args], timeout=20)
    return _one_line_exit_2(res, " ".join(args[:2]))


def fanout(box: Box) -> str | None:
    """17 small files (20 requirements each) each naming the next four: ~37,000 paths through them;
    the last line of the first is bad, so the whole walk comes before the answer."""
    for i in range(17):
        body = "".join(f"-r r{j}.txt\n" for j in range(i + 1, min(i + 5, 17)))
        body += "".join(f"pkg{i}-{k}==1.0\n" for k in range(20))
        (box.work / f"r{i}.txt").write_text(body + ("bad==\n" if i == 0 else ""))
    res = box.tf("resolve", *_local(box), "-r", str(box.work / "r0.txt"), timeout=60)
    if res.timed_out or res.seconds > 20:
        return f"-r fan-out of 17 files: {res.seconds} s" + (" (killed)" if res.timed_out else "")
    return _one_line_exit_2(res, "-r fan-out")


def big_file(box: Box) -> str | None:
    """3,000 lines over 30 names (every tenth a duplicate): O(n^2) in project_spec and the explanation."""
    lines: list[str] = []
    for i in range(3000):
        lines.append(lines[-1] if i % 10 == 9 else f"pkg{i % 30}!=0.{i}")
    (box.work / "big.txt").write_text("\n".join(lines) + "\n")
    res = box.tf("resolve", *_local(box), "-r", str(box.work / "big.txt"), timeout=120)
    if res.timed_out or res.seconds > 30:
        return f"a 3,000-line requirements file: {res.seconds} s" + (" (killed)" if res.timed_out else "")
    if res.traceback:
        return "traceback"
    return None


def too_many_files(box: Box) -> str | None:
    """1,000 files in a chain of includes, each of 16 siblings: no bound said."""
    top = "".join(f"-r f{i}.txt\n" for i in range(1000))
    for i in range(1000):
        (box.work / f"f{i}.txt").write_text(f"pkg{i}\n")
    (box.work / "top.txt").write_text(top)
    res = box.tf("resolve", *_local(box), "-r", str(box.work / "top.txt"), timeout=120)
    if res.code == 2 and re.search(r"more than \d+ files", res.err):
        return None
    return f"1,000 -r files: exit {res.code} in {res.seconds} s, no bound said: {res.err.strip()[-120:]}"


def duplicates(box: Box) -> str | None:
    """The same requirement on 3 lines and through 2 files: kept 5 times in the plan."""
    (box.work / "b.txt").write_text("mpmath\n")
    (box.work / "a.txt").write_text("mpmath\nmpmath\n-r b.txt\n-r b.txt\nmpmath\n")
    res = box.tf("resolve", *CPU, "--torch-index-url", box.torch_index, "-r", str(box.work / "a.txt"), "torch==2.13.0",
                 "--json", timeout=120)
    m = re.search(r'"project": \[([^\]]*)\]', res.out)
    if not m:
        return f"no plan (exit {res.code}): {res.err.strip()[-160:]}"
    n = m.group(1).count("mpmath")
    return None if n == 1 else f"mpmath kept {n} times in the plan's project"


# --- class 2: secret leaks ---------------------------------------------------------------------


def var_echo(box: Box) -> str | None:
    found = []
    for k, line in enumerate(("foo==${TOKEN}bad", "-e ${TOKEN}", "--bogus=${TOKEN}", "./${TOKEN}/x",
                              "pkg ${TOKEN}", "foo @ ${TOKEN}", "foo[${TOKEN}", "torch[${TOKEN}]")):
        (box.work / f"r{k}.txt").write_text(line + "\n")
        res = box.tf("resolve", *_local(box), "-r", str(box.work / f"r{k}.txt"), env={"TOKEN": SECRET}, timeout=60)
        if SECRET in res.text:
            found.append(line)
    return f"${{TOKEN}}'s value printed for {len(found)} of 8 lines: {found[:3]}" if found else None


def symlink_secret(box: Box) -> str | None:
    secret = box.work / "credentials"
    secret.write_text(f"machine example.org login me password {SECRET}\n")
    secret.chmod(0o600)
    (box.work / "requirements.txt").symlink_to(secret)
    res = box.tf("resolve", *_local(box), "-r", str(box.work / "requirements.txt"), timeout=60)
    return "the linked file's first line printed" if SECRET in res.text else None


def _wheel_server(box: Box) -> str:
    """A real wheel (urlpkg 1.0) served over plain http on 127.0.0.1; the server's URL."""
    import http.server
    import zipfile

    www = box.work / "www"
    www.mkdir()
    name = "urlpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(www / name, "w") as zf:
        zf.writestr("urlpkg/__init__.py", "")
        zf.writestr("urlpkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: urlpkg\nVersion: 1.0\n\n")
        zf.writestr("urlpkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: true\n"
                                                  "Tag: py3-none-any\n")
        zf.writestr("urlpkg-1.0.dist-info/RECORD", "")
    root = str(www)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: object, **k: object) -> None:
            super().__init__(*a, directory=root, **k)  # type: ignore[arg-type]

        def log_message(self, *_a: object) -> None:
            pass

    return box.serve(Handler)


def _url_req(box: Box) -> str:
    url = _wheel_server(box)
    return f"urlpkg @ {url.replace('http://', f'http://alice:{SECRET}@')}/urlpkg-1.0-py3-none-any.whl?token={SECRET}"


def _url_leak(box: Box, *args: str) -> str | None:
    res = box.tf(*args, *CPU, "--torch-index-url", box.torch_index, "torch==2.13.0", _url_req(box), "--allow-insecure-index",
                 timeout=180)
    if res.code != 0:
        return f"exit {res.code}: {res.err.strip()[-160:]}" if SECRET in res.text else None
    return f"{' '.join(args[:3])}: the URL's credentials printed" if SECRET in res.text else None


def url_json(box: Box) -> str | None:
    return _url_leak(box, "resolve", "--json")


def url_text(box: Box) -> str | None:
    return _url_leak(box, "resolve", "--explain")


def url_export(box: Box) -> str | None:
    return _url_leak(box, "export", "--format", "requirements")


# --- class 6: trusts what it should check ------------------------------------------------------


def http_url(box: Box) -> str | None:
    req = _url_req(box).replace(f"alice:{SECRET}@", "").replace(f"?token={SECRET}", "")
    res = box.tf("resolve", *CPU, "--torch-index-url", box.torch_index, "torch==2.13.0", req, timeout=180)
    if res.code == 2 and "--allow-insecure-index" in res.err:
        return None
    return f"`urlpkg @ http://...` without --allow-insecure-index: exit {res.code}"


def _pyproject(box: Box, body: str, *extra: str) -> Result:
    (box.work / "pyproject.toml").write_text(body)
    return box.tf("resolve", *_local(box), "--project", str(box.work), *extra, timeout=60)


def pyproject_int_deps(box: Box) -> str | None:
    return _one_line_exit_2(_pyproject(box, '[project]\nname = "a"\ndependencies = [5]\n'), "dependencies = [5]")


def pyproject_list_name(box: Box) -> str | None:
    res = _pyproject(box, '[project]\nname = ["a"]\ndependencies = ["numpy"]\n')
    return _one_line_exit_2(res, "name = [...]")


def pyproject_groups(box: Box) -> str | None:
    res = _pyproject(box, '[project]\nname = "a"\n[project.optional-dependencies]\nGpu = ["numpy"]\ngpu = ["scipy"]\n',
                     "--extra", "gpu")
    return _one_line_exit_2(res, "groups Gpu and gpu")


def _lock_with(box: Box, edit: str, repl: str) -> Path:
    text = (box.cpu_env() / "pylock.toml").read_text()
    new = re.sub(edit, repl, text, count=1, flags=re.M)
    if new == text:
        raise RuntimeError(f"the shared env's lock has no {edit!r}")
    out = box.work / "pylock.toml"
    out.write_text(new)
    return out


def lock_version_newline(box: Box) -> str | None:
    lock = _lock_with(box, r'^lock-version = "1\.0"', r'lock-version = "1.0\\nrm -rf ~"')
    res = box.tf("export", "--format", "requirements", "--lock", str(lock), timeout=60)
    return _one_line_exit_2(res, "lock-version with a newline")


# --- class 3: tracebacks -----------------------------------------------------------------------


def pyproject_dynamic_int(box: Box) -> str | None:
    return _one_line_exit_2(_pyproject(box, '[project]\nname = "a"\ndynamic = 5\n'), "dynamic = 5")


def lock_plan_shell(box: Box) -> str | None:
    lock = _lock_with(box, r'(\[tool\.torchfit\.plan\][^\[]*?\ntorch = ")[^"]*"', r'\g<1>2.13.0; echo pwned"')
    res = box.tf("install", "--lock", str(lock), "--installer", "uv", "--prefix", str(box.work / "env"), timeout=300)
    return _one_line_exit_2(res, "a lock's plan torch with shell text")


# --- class 4: wrong exits ----------------------------------------------------------------------


def intermixed(box: Box) -> str | None:
    res = box.tf("resolve", *CPU, "--torch-index-url", box.torch_index, "torch==2.13.0", "--json", "mpmath", timeout=120)
    return None if res.code == 0 else f"REQ after an option: exit {res.code}: {res.err.strip()[-120:]}"


# --- class 5: misleading messages --------------------------------------------------------------


def path_escaped(box: Box) -> str | None:
    d = box.work / "d\x1b[31mx"
    d.mkdir()
    (d / "r.txt").write_text("foo==\n")
    bad = []
    for args in (["resolve", *_local(box), "-r", str(d / "r.txt")], ["verify", "--env", str(d / "no\nenv")],
                 ["install", "--lock", str(d / "r.txt"), "--prefix", str(box.work / "e")]):
        res = box.tf(*args, timeout=60)
        if "\\x1b[31m" not in res.err and "no\\nenv" not in res.err:
            bad.append(args[0] + " " + next(a for a in args if a.startswith("-") and a != "--assume"))
    return f"path not shown escaped by: {', '.join(bad)}" if bad else None


CASES = [
    Case("r4-req-fifo-r", 1, "-r of a FIFO blocks forever", lambda b: _fifo(b, "resolve", *CPU, "-r", "{fifo}")),
    Case("r4-req-fifo-facts", 1, "--facts of a FIFO blocks forever", lambda b: _fifo(b, "resolve", "--facts", "{fifo}")),
    Case("r4-req-fifo-lock", 1, "--lock of a FIFO blocks forever",
         lambda b: _fifo(b, "install", "--lock", "{fifo}", "--prefix", str(b.work / "env"))),
    Case("r4-req-fifo-log", 1, "--log of a FIFO blocks forever", lambda b: _fifo(b, "doctor", "--log", "{fifo}")),
    Case("r4-req-fanout", 1, "17 files each naming the next four never finish", fanout),
    Case("r4-req-3000", 1, "a 3,000-line requirements file is O(n^2)", big_file),
    Case("r4-req-files-cap", 1, "no bound on the files -r reads", too_many_files),
    Case("r4-req-dupes", 1, "duplicate requirements are kept", duplicates),
    Case("r4-req-var-echo", 2, "${VAR} expanded and echoed in errors", var_echo),
    Case("r4-req-symlink", 2, "a requirements file linked to a secret prints its first line", symlink_secret),
    Case("r4-req-url-json", 2, "URL requirement credentials in resolve --json", url_json),
    Case("r4-req-url-text", 2, "URL requirement credentials in the text plan", url_text),
    Case("r4-req-url-export", 2, "URL requirement credentials in export --format requirements", url_export),
    Case("r4-req-http-url", 6, "name @ http:// installs without --allow-insecure-index", http_url),
    Case("r4-pyproject-int-deps", 6, "integer dependencies resolve as packages", pyproject_int_deps),
    Case("r4-pyproject-list-name", 6, "a list name is accepted", pyproject_list_name),
    Case("r4-pyproject-groups", 6, "groups Gpu and gpu silently keep one", pyproject_groups),
    Case("r4-lock-version", 6, "a garbage lock-version with a newline is accepted", lock_version_newline),
    Case("r4-pyproject-dynamic", 3, "dynamic = 5 is an internal error", pyproject_dynamic_int),
    Case("r4-lock-plan-shell", 3, "shell text in a lock's plan torch is an internal error", lock_plan_shell),
    Case("r4-req-intermixed", 4, "a REQ after options is 'unrecognized arguments'", intermixed),
    Case("r4-paths-escaped", 5, "user paths stripped rather than shown escaped", path_escaped),
]
