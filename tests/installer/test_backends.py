"""Which installer runs: uv beside torchfit's interpreter first, then PATH, pip where uv
cannot run; uv's cache first for a hash-pinned install. Real subprocesses: fake `uv`
scripts on PATH and beside a stand-in interpreter."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from torchfit.errors import BadInput
from torchfit.index.sources import PipConfig, make_sources
from torchfit.installer.backends import PipBackend, StepContext, UvBackend, pick_backend
from torchfit.installer.prefix import InstallLog
from torchfit.lock.uvbin import find_uv
from torchfit.progress import Progress
from torchfit.runner import Runner


class Recorder(Progress):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, name: str, detail: str) -> None:
        self.lines.append(f"[{name}] {detail}")

    def done(self, name: str, seconds: float, note: str = "") -> None:
        self.lines.append(f"[{name}] done")

    def info(self, text: str) -> None:
        self.lines.append(text)


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StepContext:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    sources = make_sources(torch_index="file:///nowhere/simple", index_url=None, extra_index_urls=[],
                           find_links=[], offline=False, allow_insecure=False, pip=PipConfig({}),
                           torch_index_flag="--torch-index-url")
    return StepContext(Runner(), InstallLog("t"), Recorder(), sources, 60.0, {})


def test_a_step_does_not_inherit_what_its_env_drops(ctx: StepContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step's env is the whole environment: a variable it leaves out (the user's
    PIP_INDEX_URL) is unset in the child (Runner.run's `unset`), one it sets is set."""
    monkeypatch.setenv("PIP_INDEX_URL", "https://user:secret@mirror.invalid/simple")
    env = {k: v for k, v in os.environ.items() if k != "PIP_INDEX_URL"}
    env["UV_NO_CONFIG"] = "1"
    code = "import os; print(os.environ.get('PIP_INDEX_URL'), os.environ.get('UV_NO_CONFIG'))"
    res = ctx.run("probe", [sys.executable, "-c", code], env, "the child's environment", show=False)
    assert res.stdout.split() == ["None", "1"]


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """torchfit running from an interpreter whose bin/ has no uv, and no `uv` wheel importable."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "tf" / "bin" / "python"))
    monkeypatch.setitem(sys.modules, "uv", None)  # `import uv` raises ImportError
    return tmp_path / "tf" / "bin"


def test_uv_beside_torchfits_interpreter_comes_before_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    beside = _script(tmp_path / "tf" / "bin" / "uv", 'echo "uv 0.9.1"')
    on_path = _script(tmp_path / "path" / "uv", 'echo "uv 0.9.2"')
    monkeypatch.setattr(sys, "executable", str(beside.parent / "python"))
    monkeypatch.setenv("PATH", f"{on_path.parent}{os.pathsep}{os.environ['PATH']}")
    assert find_uv(Runner()) == str(beside)


def test_this_test_venv_has_uv_beside_its_interpreter() -> None:
    """uv is a runtime dependency: installing torchfit (here: its test venv) put it there."""
    assert find_uv(Runner()) == os.path.join(os.path.dirname(sys.executable), "uv")


def test_uv_on_path_when_none_beside(elsewhere: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     ctx: StepContext) -> None:
    on_path = _script(tmp_path / "path" / "uv", 'echo "uv 0.9.2 (x86_64-unknown-linux-gnu)"')
    monkeypatch.setenv("PATH", f"{on_path.parent}{os.pathsep}/usr/bin:/bin")
    assert find_uv(Runner()) == str(on_path)
    backend = pick_backend("auto", ctx)
    assert isinstance(backend, UvBackend) and backend.label == "uv 0.9.2"
    assert f"installer: uv 0.9.2 ({on_path})" in ctx.observer.lines  # type: ignore[attr-defined]


def test_pip_is_the_fallback_where_uv_cannot_run(elsewhere: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, ctx: StepContext) -> None:
    broken = _script(tmp_path / "path" / "uv", "echo 'uv: cannot execute binary file' >&2; exit 126")
    monkeypatch.setenv("PATH", f"{broken.parent}{os.pathsep}/usr/bin:/bin")
    backend = pick_backend("auto", ctx)
    assert isinstance(backend, PipBackend)
    lines = ctx.observer.lines  # type: ignore[attr-defined]
    assert lines == [f"installer: pip (uv at {broken} does not run here (`uv --version` failed))"]
    with pytest.raises(BadInput, match=r"--installer uv: uv at .* does not run here"):
        pick_backend("uv", ctx)


def test_no_uv_anywhere(elsewhere: Path, monkeypatch: pytest.MonkeyPatch, ctx: StepContext) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert find_uv(Runner()) is None
    assert isinstance(pick_backend("auto", ctx), PipBackend)
    with pytest.raises(BadInput, match="found neither beside this torchfit nor on PATH"):
        pick_backend("uv", ctx)


def test_old_uv_is_not_used(elsewhere: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            ctx: StepContext) -> None:
    old = _script(tmp_path / "path" / "uv", 'echo "uv 0.4.30"')
    monkeypatch.setenv("PATH", f"{old.parent}{os.pathsep}/usr/bin:/bin")
    assert isinstance(pick_backend("auto", ctx), PipBackend)
    with pytest.raises(BadInput, match=r"0\.4\.30 is older than 0\.8\.0"):
        pick_backend("uv", ctx)


def _logging_uv(tmp_path: Path, offline_fails: bool) -> Path:
    """A uv that records each argv and fails `--offline` installs when told to (a cold cache)."""
    log = tmp_path / "calls.txt"
    fail = 'case " $* " in *" --offline "*) echo "error: Network connectivity is disabled" >&2; exit 2;; esac' \
        if offline_fails else ""
    return _script(tmp_path / "fakeuv" / "uv", f'echo "$*" >> {log}\n{fail}\nexit 0')


@pytest.mark.parametrize("cold", [False, True])
def test_locked_install_asks_uvs_cache_first(tmp_path: Path, ctx: StepContext, cold: bool) -> None:
    from torchfit.lock.model import Artifact, LockedDist

    uv = _logging_uv(tmp_path, offline_fails=cold)
    backend = UvBackend(ctx, str(uv), __import__("packaging.version").version.Version("0.9.0"))
    dists = [LockedDist("torch", "2.13.0+cpu", (Artifact("wheel", "a" * 64, "file:///w/torch.whl", None, "t.whl"),)),
             LockedDist("sympy", "1.14.0", (Artifact("wheel", "b" * 64, "file:///w/sympy.whl", None, "s.whl"),))]
    work = tmp_path / "work"
    work.mkdir()
    backend.install_locked(str(tmp_path / "env"), dists, str(work))
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    offline = [c for c in calls if " --offline" in f" {c}"]
    online = [c for c in calls if c not in offline]
    assert len(offline) == 2 and all("--require-hashes" in c for c in calls)
    assert len(online) == (2 if cold else 0)  # only a cache miss asks the indexes
    shown = ctx.observer.lines  # type: ignore[attr-defined]
    assert [ln for ln in shown if ln.endswith("done")] == ["[install-family] done", "[install-deps] done"]


def test_a_killed_offline_attempt_fails_the_step(tmp_path: Path, ctx: StepContext) -> None:
    """A signal is not a cache miss: no second, online attempt."""
    from packaging.version import Version

    from torchfit.errors import InstallFailed
    from torchfit.lock.model import Artifact, LockedDist

    log = tmp_path / "calls.txt"
    uv = _script(tmp_path / "fakeuv" / "uv", f'echo "$*" >> {log}\nkill -9 $$')
    backend = UvBackend(ctx, str(uv), Version("0.9.0"))
    dist = LockedDist("sympy", "1.14.0", (Artifact("wheel", "b" * 64, "file:///w/sympy.whl", None, "s.whl"),))
    (tmp_path / "work").mkdir()
    with pytest.raises(InstallFailed) as info:
        backend.install_locked(str(tmp_path / "env"), [dist], str(tmp_path / "work"))
    assert info.value.step == "install-deps" and info.value.code == -9
    assert len(log.read_text().splitlines()) == 1


# --- uv: one round of HTTP for the resolution, one install of its exact files -------------

_LOCK = """lock-version = "1.0"
created-by = "uv"
[[packages]]
name = "sympy"
version = "1.14.0"
wheels = [{{ url = "file:///w/sympy-1.14.0-py3-none-any.whl", hashes = {{ sha256 = "{b}" }} }}]
[[packages]]
name = "torch"
version = "2.13.0+cpu"
wheels = [{{ url = "file:///w/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl", hashes = {{ sha256 = "{a}" }} }}]
{extra}"""
_MPMATH = """[[packages]]
name = "mpmath"
version = "1.3.0"
wheels = [{ url = "file:///w/mpmath-1.3.0-py3-none-any.whl", hashes = { sha256 = "%s" } }]
""" % ("c" * 64)
_PIP = _MPMATH.replace("mpmath", "pip").replace("1.3.0", "26.3").replace("c" * 64, "e" * 64)


def _compiling_uv(tmp_path: Path, *, offline_fails: bool = False, online_torch: str = "a",
                  cached_extra: bool = False, early_install_fails: bool = False,
                  cached_unhashed: bool = False, pip: bool = False) -> Path:
    """A uv that records each argv. `pip compile -o OUT` writes a lock: `--offline` (uv's cache)
    torch + sympy (+ mpmath with `cached_extra`), or fails when told (a cold cache); online
    torch (sha256 `online_torch` * 64) + sympy; both + pip with `pip`. The early install fails when told."""
    cached = tmp_path / "lock-cached.toml"
    cached.write_text(_LOCK.format(a="a" * 64, b="b" * 64, extra=(_MPMATH if cached_extra else "") + (_PIP if pip else "")))
    if cached_unhashed:  # a remote file the index gave no hash for: the cached answer is no hint
        cached.write_text(cached.read_text().replace('file:///w/sympy-1.14.0-py3-none-any.whl", hashes = { sha256 = "'
                                                     + "b" * 64 + '" }', 'https://f/sympy-1.14.0-py3-none-any.whl"'))
    online = tmp_path / "lock-online.toml"
    online.write_text(_LOCK.format(a=online_torch * 64, b="b" * 64, extra=_PIP if pip else ""))
    log = tmp_path / "calls.txt"
    body = f"""echo "$*" >> {log}
echo "${{UV_FIND_LINKS:-}}" >> {log}.find-links
out=""; prev=""
for x in "$@"; do [ "$prev" = "-o" ] && out="$x"; prev="$x"; done
case " $* " in *" --offline "*)
  {'echo "error: Network connectivity is disabled" >&2; exit 2' if offline_fails else ':'};;
esac
case " $* " in
  *" compile "*" --offline "*) cp {cached} "$out";;
  *" compile "*) cp {online} "$out";;
  *"pylock.early.toml"*) {'exit 2' if early_install_fails else ':'};;
esac
exit 0"""
    return _script(tmp_path / "fakeuv" / "uv", body)


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.txt").read_text().splitlines()


def _uv(ctx: StepContext, uv: Path) -> UvBackend:
    from packaging.version import Version

    return UvBackend(ctx, str(uv), Version("0.13.9"))


def _build(tmp_path: Path, ctx: StepContext, uv: Path) -> list[Any]:
    work = tmp_path / "work"
    work.mkdir()
    return _uv(ctx, uv).build("/usr/bin/python3", str(tmp_path / "env"), False, ["torch==2.13.0"], None, str(work))


def test_one_online_resolution_decides_after_uvs_cached_answer(tmp_path: Path, ctx: StepContext) -> None:
    uv = _compiling_uv(tmp_path, online_torch="d")
    locked = _build(tmp_path, ctx, uv)
    compiles = [c.split() for c in _calls(tmp_path) if c.startswith("pip compile ")]
    assert len(compiles) == 2 and "--offline" in compiles[0] and "--offline" not in compiles[1]
    # the online answer is the result, not the cached one
    assert next(d for d in locked if d.name == "torch").artifacts[0].sha256 == "d" * 64
    # all of it is one step for the user
    shown = ctx.observer.lines  # type: ignore[attr-defined]
    assert [ln for ln in shown if ln.startswith("[resolve]")][1:] == ["[resolve] done"]


@pytest.mark.parametrize("case", ["cold", "unhashed"])
def test_no_cached_answer_no_early_install(tmp_path: Path, ctx: StepContext, case: str) -> None:
    uv = _compiling_uv(tmp_path, offline_fails=case == "cold", cached_unhashed=case == "unhashed")
    _build(tmp_path, ctx, uv)
    calls = _calls(tmp_path)
    assert not [c for c in calls if "pylock.early.toml" in c]
    assert "--offline" not in [c for c in calls if c.startswith("pip compile ")][-1].split()
    # cold: uv's cache could not resolve, so the install goes straight to the URLs
    installs = [c.split() for c in calls if "pylock.install.toml" in c]
    assert len(installs) == 1 and ("--offline" in installs[0]) == (case == "unhashed")


def test_local_sources_resolve_once(tmp_path: Path, ctx: StepContext) -> None:
    """No remote source: no HTTP wait to fill, so one resolution and nothing installed early."""
    from dataclasses import replace

    ctx.sources = replace(ctx.sources, index_url="file:///opt/pypi/simple", extra_index_urls=("/opt/wheels",))
    uv = _compiling_uv(tmp_path)
    _build(tmp_path, ctx, uv)
    compiles = [c for c in _calls(tmp_path) if c.startswith("pip compile ")]
    assert len(compiles) == 1 and "--offline" not in compiles[0].split()
    assert not [c for c in _calls(tmp_path) if "pylock.early.toml" in c]


def test_a_find_links_directory_is_read_by_one_resolution(tmp_path: Path, ctx: StepContext) -> None:
    """uv's cached answer is asked without the find-links directories (a hint needs none); the
    online resolution, the one that decides, reads them; `uv venv` without --seed gets no sources."""
    from dataclasses import replace

    ctx.sources = replace(ctx.sources, find_links=("/opt/wheels", "/more/wheels"))
    uv = _compiling_uv(tmp_path)
    _build(tmp_path, ctx, uv)
    calls = _calls(tmp_path)
    # find-links reach uv through UV_FIND_LINKS, never its argv (public, in `ps`: issue 21)
    links = dict(zip(calls, (tmp_path / "calls.txt.find-links").read_text().splitlines()))
    compiles = [c for c in calls if c.startswith("pip compile ")]
    assert len(compiles) == 2 and "--offline" in compiles[0].split()
    assert links[compiles[0]] == "" and links[compiles[1]] == "/opt/wheels,/more/wheels"
    assert not [c for c in calls if "--find-links" in c.split()]
    assert [c for c in calls if c.startswith("venv ")] and not [
        c for c in calls if links[c] and not c.startswith("pip compile ")]


def test_seed_is_resolved_with_the_plan(tmp_path: Path, ctx: StepContext) -> None:
    """--seed: uv's seed packages are requirements of the one resolution (from the user's sources,
    never routed to the torch index) and go in with the plan; `uv venv` itself seeds nothing."""
    from torchfit._backports import tomllib

    uv = _compiling_uv(tmp_path, pip=True)
    work = tmp_path / "work"
    work.mkdir()
    locked = _uv(ctx, uv).build("/usr/bin/python3", str(tmp_path / "env"), True, ["torch==2.13.0"], None, str(work))
    assert "pip" in [d.name for d in locked]  # in the lock with the rest
    venv = [c.split() for c in _calls(tmp_path) if c.startswith("venv ")]
    assert len(venv) == 1 and "--seed" not in venv[0]
    project = tomllib.loads((work / "project" / "pyproject.toml").read_text())
    assert project["project"]["dependencies"] == ["torch==2.13.0", "pip", 'setuptools; python_version < "3.12"',
                                                  'wheel; python_version < "3.12"']
    assert list(project["tool"]["uv"]["sources"]) == ["torch"]


@pytest.mark.parametrize("case", ["same", "other-torch-file", "early-install-failed", "cached-had-more"])
def test_the_cached_answer_goes_in_early_and_the_resolution_corrects_it(tmp_path: Path, ctx: StepContext,
                                                                          case: str) -> None:
    """uv's cached answer is installed (offline) while the indexes answer; the install of the
    resolution reinstalls what differs, and what the resolution does not name is removed."""
    uv = _compiling_uv(tmp_path, online_torch="d" if case == "other-torch-file" else "a",
                       early_install_fails=case == "early-install-failed", cached_extra=case == "cached-had-more")
    _build(tmp_path, ctx, uv)
    calls = _calls(tmp_path)
    early = [c for c in calls if "pylock.early.toml" in c]
    final = [c for c in calls if "pylock.install.toml" in c]
    assert len(early) == 1 and "--offline" in early[0].split()
    # after uv's cached answer; the install of the resolution after it
    offline_compile = next(i for i, c in enumerate(calls) if c.startswith("pip compile ") and "--offline" in c)
    assert offline_compile < calls.index(early[0]) < calls.index(final[0])
    reinstalled = sorted(final[0].split()[i + 1] for i, a in enumerate(final[0].split()) if a == "--reinstall-package")
    assert reinstalled == {"same": [], "other-torch-file": ["torch"], "early-install-failed": ["sympy", "torch"],
                           "cached-had-more": []}[case]
    removed = [c for c in calls if c.startswith("pip uninstall ")]
    assert [c.split()[-1] for c in removed] == (["mpmath"] if case == "cached-had-more" else [])


@pytest.mark.parametrize("cold", [False, True])
def test_the_env_is_one_install_of_the_resolved_files(tmp_path: Path, ctx: StepContext, cold: bool) -> None:
    from torchfit._backports import tomllib
    from torchfit.lock.model import Artifact, LockedDist

    uv = _logging_uv(tmp_path, offline_fails=cold)
    work = tmp_path / "work"
    work.mkdir()
    dists = [LockedDist("torch", "2.13.0+cpu", (Artifact("wheel", "a" * 64, "file:///w/torch.whl", None, "t.whl"),)),
             LockedDist("sympy", "1.14.0", (Artifact("wheel", "b" * 64, "https://f/sympy.whl", None, "s.whl"),))]
    _uv(ctx, uv).install_resolved(str(tmp_path / "env"), dists, str(work))
    calls = _calls(tmp_path)
    assert len(calls) == (2 if cold else 1) and "--offline" in calls[0].split()
    assert all(c.startswith("pip install ") and "-r" in c.split() for c in calls)
    lock = tomllib.loads((work / "pylock.install.toml").read_text())
    by_name = {p["name"]: p for p in lock["packages"]}
    assert by_name["torch"]["wheels"][0] == {"name": "t.whl", "url": "file:///w/torch.whl",
                                             "hashes": {"sha256": "a" * 64}}
    assert by_name["torch"]["index"] == "file:///nowhere/simple" and "index" not in by_name["sympy"]
    assert by_name["sympy"]["wheels"][0]["hashes"] == {"sha256": "b" * 64}
    shown = ctx.observer.lines  # type: ignore[attr-defined]
    assert [ln for ln in shown if ln.endswith("done")] == ["[install] done"]


def test_a_file_without_sha256_is_never_installed(tmp_path: Path, ctx: StepContext) -> None:
    from torchfit.errors import InstallFailed
    from torchfit.lock.model import Artifact, LockedDist

    uv = _logging_uv(tmp_path, offline_fails=False)
    (tmp_path / "work").mkdir()
    dist = LockedDist("sympy", "1.14.0", (Artifact("wheel", None, "https://f/sympy.whl", None, "s.whl"),))
    with pytest.raises(InstallFailed):
        _uv(ctx, uv).install_resolved(str(tmp_path / "env"), [dist], str(tmp_path / "work"))
    assert not (tmp_path / "calls.txt").exists()


def test_a_step_failure_names_the_install_log_when_it_is_built(ctx: StepContext, tmp_path: Path) -> None:
    """Every InstallFailed of a step is complete when raised (no clone adds the log later): the
    runner's failures through StepContext, and the readers' own through their `log_path`."""
    from torchfit.errors import InstallFailed
    from torchfit.installer.backends import uv_answer
    from torchfit.lock.uv import Compiled, read_uv_lock

    assert ctx.log.path
    with pytest.raises(InstallFailed) as info:
        ctx.run("probe", [sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ), "exit 3")
    assert info.value.code == 3 and info.value.hint == f"the full log: {ctx.log.path}"
    garbage = tmp_path / "pylock.resolved.toml"
    garbage.write_text("lock-version = [unclosed\n")
    with pytest.raises(InstallFailed) as info:
        uv_answer(lambda: Compiled(True, tuple(read_uv_lock(str(garbage))), "", (), 0.0), str(garbage),
                  log_path=ctx.log.path)
    assert info.value.step == "resolve" and info.value.hint == f"the full log: {ctx.log.path}"
