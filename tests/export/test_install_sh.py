"""install.sh, a standalone pack's entry point (issue 35, item 1), run by the real `sh` (dash
here: no bash-isms survive) against a pack whose Python is a stand-in: a tarball whose
python/bin/python3.11 is a shell script that makes a "venv" whose pip succeeds and whose
torchfit records its argv. The real Python, torchfit and torch: test_standalone_pack.py."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from tests.support.cli import clean_env, run_clean
from torchfit.export.standalone import render_install_sh

# python3.11 -c ...: runs; python3.11 -m venv DIR: DIR/bin/python (pip: ok) and DIR/bin/torchfit
# (its argv appended to $CALLS)
FAKE_PYTHON = """#!/bin/sh
case "$1" in
-c) exit 0 ;;
-m) [ "$2" = venv ] || exit 3
    mkdir -p "$3/bin"
    printf '#!/bin/sh\\nexit 0\\n' > "$3/bin/python"
    printf '#!/bin/sh\\necho "torchfit $*" >> "$CALLS"\\n' > "$3/bin/torchfit"
    chmod +x "$3/bin/python" "$3/bin/torchfit"
    echo venv >> "$CALLS" ;;
esac
"""


def _tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = FAKE_PYTHON.encode()
        info = tarfile.TarInfo("python/bin/python3.11")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _pack(root: Path, *, carried: bool = True, sha256: str | None = None) -> Path:
    pack = root / "the pack"  # a space in the path
    (pack / "python").mkdir(parents=True)
    (pack / "pylock.toml").write_text("lock-version = '1.0'\n")
    record = None
    if carried:
        data = _tarball()
        (pack / "python" / "cpython.tar.gz").write_bytes(data)
        record = {"tarball": "python/cpython.tar.gz", "sha256": sha256 or hashlib.sha256(data).hexdigest()}
    (pack / "install.sh").write_text(render_install_sh("3.11", record))
    return pack


def _sh(pack: Path, *args: str, calls: Path, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    env = clean_env(PATH=path, CALLS=str(calls))
    return subprocess.run(["/bin/sh", str(pack / "install.sh"), *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=str(pack.parent))


def test_it_unpacks_the_python_makes_the_tool_runs_install_and_resumes(tmp_path: Path) -> None:
    pack = _pack(tmp_path)
    calls = tmp_path / "calls"
    res = _sh(pack, "site/env", "--json", calls=calls)
    assert res.returncode == 0, res.stderr
    prefix = tmp_path / "site" / "env"
    assert (tmp_path / "site" / "env.torchfit" / "python" / "bin" / "python3.11").is_file()
    assert calls.read_text().splitlines() == [
        "venv", f"torchfit install --offline --pack {pack} --prefix {prefix} --json"]
    assert res.stderr.splitlines()[-1] == f"install.sh: next: {prefix}.torchfit/tool/bin/torchfit verify --env {prefix}"
    # run again: the Python and the tool are there, only torchfit install runs
    again = _sh(pack, str(prefix), calls=calls)
    assert again.returncode == 0, again.stderr
    assert "unpacking" not in again.stderr and calls.read_text().splitlines()[2:] == [
        f"torchfit install --offline --pack {pack} --prefix {prefix}"]
    # a tool venv cut short (no .complete): made again
    (prefix.parent / "env.torchfit" / "tool" / ".complete").unlink()
    third = _sh(pack, str(prefix), calls=calls)
    assert third.returncode == 0 and calls.read_text().splitlines()[3] == "venv", third.stderr
    assert not list(pack.rglob("*.torchfit*")), "install.sh wrote into the pack"


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    pack = _pack(tmp_path)
    calls = tmp_path / "calls"
    for args in ((), ("--help",), ("",)):
        res = _sh(pack, *args, calls=calls)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (args, res.stderr)
        assert res.stderr.startswith("install.sh: error: usage: sh ") and "install.sh PREFIX" in res.stderr
    # PREFIX.torchfit that install.sh did not make: a directory of someone's, a link
    theirs = tmp_path / "theirs.torchfit"
    theirs.mkdir()
    (theirs / "keep").write_text("mine")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link.torchfit").symlink_to(elsewhere)
    for prefix in ("theirs", "link"):
        res = _sh(pack, str(tmp_path / prefix), calls=calls)
        assert res.returncode == 2 and "not made by install.sh" in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1
    assert os.listdir(theirs) == ["keep"] and os.listdir(elsewhere) == [] and not calls.exists()


def test_a_python_tarball_that_is_not_the_packs_is_refused_unpacked(tmp_path: Path) -> None:
    pack = _pack(tmp_path, sha256="0" * 64)
    calls = tmp_path / "calls"
    res = _sh(pack, str(tmp_path / "env"), calls=calls)
    assert res.returncode == 1 and "is not the pack's " + "0" * 64 in res.stderr, res.stderr
    assert not (tmp_path / "env.torchfit" / "python").exists() and not calls.exists()


def test_without_a_carried_python_it_needs_one_on_path(tmp_path: Path) -> None:
    pack = _pack(tmp_path, carried=False)
    calls = tmp_path / "calls"
    tools = tmp_path / "tools"  # the node's tools, and no python of any version
    tools.mkdir()
    for tool in ("mkdir", "rm", "mv", "rmdir", "tar", "gzip", "sha256sum", "chmod"):
        (tools / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    res = _sh(pack, str(tmp_path / "env"), calls=calls, path=str(tools))
    assert res.returncode == 1 and "no python3.11 on PATH" in res.stderr and "--with-python" in res.stderr
    # with one on PATH (the stand-in): it is the one used
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3.11").write_text(FAKE_PYTHON)
    (bin_dir / "python3.11").chmod(0o755)
    ok = _sh(pack, str(tmp_path / "env"), calls=calls, path=f"{bin_dir}:{tools}")
    assert ok.returncode == 0, ok.stderr
    assert calls.read_text().splitlines()[0] == "venv" and not (tmp_path / "env.torchfit" / "python").exists()


def test_pack_with_python_where_uv_has_none_is_refused_before_any_wheel(tmp_path: Path) -> None:
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"not really a wheel")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lock = tmp_path / "pylock.toml"
    lock.write_text(f"""lock-version = "1.0"
created-by = "torchfit"
requires-python = "==3.11.*"
[[packages]]
name = "torch"
version = "2.13.0+cpu"
index = "{tmp_path.as_uri()}/simple"
wheels = [{{ name = "{wheel.name}", url = "{wheel.as_uri()}", hashes = {{ sha256 = "{digest}" }} }}]

[tool.torchfit]
schema = 1
[tool.torchfit.plan]
ok = true
python = "3.11"
torch = "2.13.0"
variant = "cpu"
""")
    env = clean_env(UV_PYTHON_DOWNLOADS="never", UV_PYTHON_INSTALL_DIR=str(tmp_path / "no-pythons"),
                    XDG_CACHE_HOME=str(tmp_path / "cache"))
    res = run_clean("pack", "--lock", str(lock), "-o", str(tmp_path / "pack"), "--with-python", env=env)
    assert res.returncode == 1, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("torchfit: error:")]
    assert len(errors) == 1 and "--with-python: no uv-managed Python 3.11 for x86_64" in errors[0], res.stderr
    assert "UV_PYTHON_DOWNLOADS=never" in errors[0] and "Traceback" not in res.stderr
    assert not (tmp_path / "pack" / "torchfit-wheels").exists()


def _uv_tree(root: Path, name: str) -> Path:
    """A tree shaped as uv's store keeps a Python: NAME/bin/python3.11 (a link to it too), NAME/lib."""
    tree = root / name
    (tree / "bin").mkdir(parents=True)
    (tree / "lib" / "python3.11").mkdir(parents=True)
    (tree / "bin" / "python3.11").write_text(FAKE_PYTHON)
    (tree / "bin" / "python3").symlink_to("python3.11")
    return tree


def test_the_packs_python_is_kept_when_there_and_a_stale_one_is_dropped(tmp_path: Path) -> None:
    import json

    from torchfit.export.standalone import write_python

    out = tmp_path / "pack"
    out.mkdir()
    said: list[str] = []
    first = write_python(str(out), str(_uv_tree(tmp_path, "cpython-3.11.7-linux-x86_64-gnu")), said.append)
    assert first["version"] == "3.11.7" and first["tarball"] == "python/cpython-3.11.7-linux-x86_64-gnu.tar.gz"
    with tarfile.open(out / first["tarball"]) as tar:
        names = tar.getnames()
        assert tar.getmember("python/bin/python3").issym() and "python/lib/python3.11" in names
    assert json.loads((out / "python" / "python.json").read_text())["sha256"] == first["sha256"]
    # again: kept, not made again
    assert write_python(str(out), str(tmp_path / "cpython-3.11.7-linux-x86_64-gnu"), said.append) == first
    assert sum("carrying" in line for line in said) == 1
    # another patch release now: the earlier tarball goes, and with --no-python all of python/
    from torchfit.export.standalone import drop_stale_python

    second = write_python(str(out), str(_uv_tree(tmp_path, "cpython-3.11.9-linux-x86_64-gnu")), said.append)
    drop_stale_python(str(out), second)
    assert sorted(os.listdir(out / "python")) == ["cpython-3.11.9-linux-x86_64-gnu.tar.gz", "python.json"]
    drop_stale_python(str(out), None)
    assert os.listdir(out / "python") == []
