"""host/pythons.py through the start-up cache: asked once, asked again when what decides the answer changes.

Real processes throughout: a copy of this machine's interpreter (an ELF file), fake
python scripts and the fake pyenv of test_pythons.py, which logs every call.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.host.test_pythons import _fake_pyenv, _fake_python
from tests.support.fakehost import FakeHost
from torchfit import cache
from torchfit.host.pythons import probe_pyenv, probe_pythons
from torchfit.runner import Runner


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    h = FakeHost(tmp_path)
    # The fake tools append to a log beside bin/, and $XDG_CACHE_HOME is under
    # tmp_path too: both made now, so that their first writes are not a change in the
    # directory the pyenv record watches (the fake pyenv's parent, like ~/.pyenv).
    (tmp_path / "pyenv.argv").write_text("")
    Path(cache.cache_dir()).mkdir(parents=True, mode=0o700)
    return h


def _interpreters() -> dict[str, list[object]]:
    data = cache.read_record("interpreters", "realpath -> [fingerprint, version]")
    return data if isinstance(data, dict) else {}


def _elf_python(where: Path) -> Path:
    """A copy of the interpreter running the tests (a native executable) as where/python3.X."""
    real = os.path.realpath(sys.executable)
    with open(real, "rb") as fh:
        if fh.read(4) != b"\x7fELF":
            pytest.skip("this interpreter is not an ELF file")
    where.mkdir(parents=True, exist_ok=True)
    dest = where / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    shutil.copy2(real, dest)
    return dest


def test_an_interpreters_version_is_asked_once_per_file(tmp_path: Path) -> None:
    exe = _elf_python(tmp_path / "bin")
    runner = Runner(env_overrides={"PATH": str(exe.parent)})
    want = ".".join(str(n) for n in sys.version_info[:3])
    found, _ = probe_pythons(runner)
    assert [(p.version, p.path) for p in found] == [(want, str(exe))]
    record = _interpreters()
    assert record[str(exe)][1] == want

    # The record is what the second probe reads: a version planted under the same
    # fingerprint comes back without the interpreter being run.
    planted = {str(exe): [record[str(exe)][0], "3.99.0"]}
    assert cache.write_record("interpreters", "realpath -> [fingerprint, version]", planted)
    found, _ = probe_pythons(runner)
    assert [p.version for p in found] == ["3.99.0"]

    # The file changes (an upgrade in place): its fingerprint differs, it is asked again.
    st = exe.stat()
    os.utime(exe, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    found, _ = probe_pythons(runner)
    assert [p.version for p in found] == [want]
    assert _interpreters()[str(exe)][1] == want


def test_a_script_named_python_is_asked_every_time(host: FakeHost) -> None:
    # A wrapper (a shim) may answer differently per directory or environment.
    script = _fake_python(host, host.tmp / "b" / "python3.12", "3.12.9")
    counter = host.tmp / "runs"
    body = script.read_text().replace("import sys, time", f"import sys, time\nopen({str(counter)!r}, 'a').write('x')")
    script.write_text(body)
    runner = Runner(env_overrides={"PATH": str(script.parent)})
    for _ in range(3):
        found, _ = probe_pythons(runner)
        assert [p.version for p in found] == ["3.12.9"]
    assert counter.read_text() == "xxx"
    assert str(script) not in _interpreters()


def _pyenv_runner(host: FakeHost, shims: Path) -> Runner:
    return Runner(env_overrides={"PATH": f"{shims}{os.pathsep}{host.bin}", "HOME": str(host.home),
                                 "PYENV_ROOT": str(host.home / ".pyenv")})


def test_pyenv_is_asked_once_until_something_it_reads_changes(host: FakeHost) -> None:
    shims = _fake_pyenv(host)
    runner = _pyenv_runner(host, shims)
    first = probe_pyenv(runner)
    assert len(host.calls("pyenv")) == 4
    assert probe_pyenv(runner) == first  # the same answer, from the record
    assert len(host.calls("pyenv")) == 4

    # `pyenv install 3.13.1` adds an entry to versions/: asked again.
    time.sleep(0.02)  # past the file system's timestamp granularity
    (host.home / ".pyenv" / "versions" / "3.13.1").mkdir()
    assert probe_pyenv(runner)[0] == first[0]
    assert len(host.calls("pyenv")) == 8
    probe_pyenv(runner)
    assert len(host.calls("pyenv")) == 8

    # A pyenv update brings a new python-build definition: asked again.
    definitions = host.home / ".pyenv" / "plugins" / "python-build" / "share" / "python-build"
    time.sleep(0.02)
    definitions.mkdir(parents=True)
    probe_pyenv(runner)
    assert len(host.calls("pyenv")) == 12
    time.sleep(0.02)
    (definitions / "3.14.9").write_text("")
    probe_pyenv(runner)
    assert len(host.calls("pyenv")) == 16

    # Another PYENV_ROOT is another record.
    other = Runner(env_overrides={**runner.env_overrides, "PYENV_ROOT": str(host.home / "elsewhere")})
    probe_pyenv(other)
    assert len(host.calls("pyenv")) == 20


def test_pyenv_answers_older_than_a_day_are_asked_again(host: FakeHost) -> None:
    shims = _fake_pyenv(host)
    runner = _pyenv_runner(host, shims)
    probe_pyenv(runner)
    (path,) = Path(cache.cache_dir()).glob("pyenv-*.json")
    head, body = path.read_text().split("\n", 1)
    data = json.loads(body)
    data["time"] -= 2 * 24 * 3600
    assert cache.write_record(path.stem, json.loads(head)["key"], data)
    probe_pyenv(runner)
    assert len(host.calls("pyenv")) == 8


def test_a_failed_pyenv_call_is_not_kept(host: FakeHost) -> None:
    _fake_pyenv(host, install_list="")
    host.tool("pyenv", [{"argv": ["root"], "stdout": f"{host.home / '.pyenv'}\n"},
                        {"argv": None, "stderr": "pyenv: no such command\n", "rc": 1}])
    runner = host.runner()
    for n in (1, 2):
        pyenv, _, _ = probe_pyenv(runner)
        assert pyenv is not None and pyenv.installable == ()
        assert len(host.calls("pyenv")) == 4 * n
    assert not list(Path(cache.cache_dir()).glob("pyenv-*.json"))


def _pyenv_shim(root: Path, version_bin: Path, counter: Path) -> Path:
    """pyenv's shim template (pyenv-rehash) for python3.X, and a `pyenv exec` that runs
    version_bin's program (#!/bin/bash: the PATH of these probes holds no bash)."""
    pyenv = root / "libexec" / "pyenv"
    pyenv.parent.mkdir(parents=True)
    pyenv.write_text('#!/bin/bash\n[ "$1" = exec ] || exit 1\nprogram="$2"\nshift 2\n'
                     f'echo x >> "{counter}"\nexec "{version_bin}/$program" "$@"\n')
    name = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    shim = root / "shims" / name
    shim.parent.mkdir(parents=True)
    shim.write_text('#!/bin/bash\nset -e\n[ -n "$PYENV_DEBUG" ] && set -x\n\nprogram="${0##*/}"\n\n'
                    f'export PYENV_ROOT="{root}"\nexec "{pyenv}" exec "$program" "$@"\n')
    for f in (pyenv, shim):
        f.chmod(0o755)
    return shim


def test_a_pyenv_shim_is_resolved_once_to_the_interpreter_it_runs(tmp_path: Path) -> None:
    # pyenv did not answer (so its shims were not skipped): the shim is run once per probe, for
    # its version and the interpreter behind it, and that interpreter is what the probe names.
    root = tmp_path / "pyenv"
    exe = _elf_python(root / "versions" / "3.x" / "bin")
    counter = tmp_path / "runs"
    shim = _pyenv_shim(root, exe.parent, counter)
    want = ".".join(str(n) for n in sys.version_info[:3])
    found, _ = probe_pythons(Runner(env_overrides={"PATH": str(shim.parent)}))
    assert [(p.version, p.path, p.source) for p in found] == [(want, str(exe), "path")]
    assert counter.read_text() == "x\n"
    # the interpreter on PATH as well: listed once, by its own path
    found, _ = probe_pythons(Runner(env_overrides={"PATH": f"{shim.parent}{os.pathsep}{exe.parent}"}))
    assert [p.path for p in found] == [str(exe)]
    # a script that is not a shim keeps its own path
    wrapper = tmp_path / "wrap" / shim.name
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/bash\nexec "{exe}" "$@"\n')
    wrapper.chmod(0o755)
    found, _ = probe_pythons(Runner(env_overrides={"PATH": str(wrapper.parent)}))
    assert [p.path for p in found] == [str(wrapper)]
