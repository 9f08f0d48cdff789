"""The pure and file-level parts of install: pip's configuration, the sources of an install, the build check, NCCL helpers, the PREFIX
lock, relocation and the atomic swap."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchfit.compat.plan import Plan
from torchfit.compat.versions import decode_nccl_code, version_text
from torchfit.errors import BadInput, PrefixBusy
from torchfit.installer.buildcheck import compare_build, parse_probe
from torchfit.installer.nccl import (
    NcclPin,
    check_nccl_lib,
    render_env_script,
)
from torchfit.installer.prefix import PrefixLock, relocate, swap_into_place
from torchfit.installer.sources import (
    PipConfig,
    load_pip_config,
    make_sources,
    parse_pip_config,
)
from torchfit.redact import strip_credentials

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass


# --- pip's configuration and the sources ----------------------------------------------------------


def test_pip_config_precedence() -> None:
    files = [
        ("/etc/pip.conf", "[global]\nindex-url = https://global.example/simple\n"
                          "[install]\nextra_index_url = https://install.example/simple\n"),
        ("/home/u/.config/pip/pip.conf", "[global]\nextra-index-url = https://user.example/simple\n"
                                         "timeout = 60\nfind-links =\n"),
    ]
    cfg = parse_pip_config(files, {"PIP_TIMEOUT": "90", "PIP_FIND_LINKS": "", "HOME": "/home/u"})
    # [install] beats [global] whatever the file; the environment beats both; empty values are ignored
    assert cfg.get("extra-index-url") == "https://install.example/simple"
    assert cfg.get("index-url") == "https://global.example/simple"
    assert cfg.get("timeout") == "90" and cfg.origins["timeout"] == "environment PIP_TIMEOUT"
    assert cfg.get("find-links") is None


def test_pip_config_matches_pip_on_this_machine() -> None:
    """Our reading of the configuration agrees with `pip config list` (its merged keys)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        pytest.skip("pip config list failed")
    ours = load_pip_config()
    pips: dict[str, str] = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section in ("global", "install", ":env:"):
            pips[name] = value.strip().strip("'")
    assert pips, "this machine has no pip configuration to compare"
    for name, value in pips.items():
        assert (ours.get(name) or "").split() == value.split(), name


def _sources(**kw: object) -> object:
    args: dict[str, object] = {"torch_index": "https://download.pytorch.org/whl/cu130", "index_url": None,
                                   "extra_index_urls": [], "find_links": [], "offline": False, "allow_insecure": False,
                                   "pip": PipConfig({"extra-index-url": "file:///opt/pypi/simple https://x.example/simple",
                                                  "find-links": "/opt/wheels", "constraint": "/etc/c.txt",
                                                  "timeout": "60"})}
    args.update(kw)
    return make_sources(**args)  # type: ignore[arg-type]


def test_family_step_sees_only_the_torch_index() -> None:
    s = _sources(extra_index_urls=["https://extra.example/simple"], find_links=["/more/wheels"])
    env = s.pip_env({"PIP_FIND_LINKS": "/opt/wheels", "PIP_EXTRA_INDEX_URL": "https://y", "PATH": "/bin"},
                    family=True)
    assert env["PIP_INDEX_URL"] == "https://download.pytorch.org/whl/cu130"
    assert "PIP_EXTRA_INDEX_URL" not in env and "PIP_FIND_LINKS" not in env
    assert env["PIP_CONFIG_FILE"] == os.devnull and env["PIP_CONSTRAINT"] == "/etc/c.txt"
    deps = s.pip_env({}, family=False)
    assert deps["PIP_EXTRA_INDEX_URL"].split() == ["file:///opt/pypi/simple", "https://x.example/simple",
                                                   "https://extra.example/simple"]
    assert deps["PIP_FIND_LINKS"].split() == ["/opt/wheels", "/more/wheels"]
    uv = s.uv_env({"UV_INDEX": "https://z", "UV_FIND_LINKS": "/w"}, family=True)
    assert uv["UV_DEFAULT_INDEX"] == "https://download.pytorch.org/whl/cu130" and "UV_INDEX" not in uv
    assert "UV_FIND_LINKS" not in uv
    # find-links reach uv through its environment, never its argv (public, in `ps`)
    assert not any("wheels" in a for a in s.uv_args(family=True) + s.uv_args(family=False))
    assert s.uv_env({}, family=False, find_links=True)["UV_FIND_LINKS"] == "/opt/wheels,/more/wheels"
    assert "UV_FIND_LINKS" not in s.uv_env({"UV_FIND_LINKS": "/w"}, family=False)


def test_http_and_offline_rules() -> None:
    with pytest.raises(BadInput, match="allow-insecure-index"):
        _sources(torch_index="http://u:pw@mirror.example/simple")
    ok = _sources(torch_index="http://mirror.example/simple", allow_insecure=True)
    assert ok.pip_env({}, family=True)["PIP_TRUSTED_HOST"] == "mirror.example"  # type: ignore[attr-defined]
    with pytest.raises(BadInput, match="remote"):
        _sources(offline=True)
    off = _sources(torch_index="file:///mirror/simple", offline=True)
    assert off.index_url == "file:///opt/pypi/simple" and off.extra_index_urls == ()  # type: ignore[attr-defined]
    assert "https://x.example/simple" in off.notes[0]  # type: ignore[attr-defined]


def test_strip_credentials() -> None:
    assert strip_credentials("https://u:p@h.example:8443/a?b") == "https://h.example:8443/a?b"
    assert strip_credentials("file:///x") == "file:///x"


# --- the build check ---------------------------------------------------------------------------


def _plan(**kw: object) -> Plan:
    base: dict[str, object] = {
        "python": "3.11", "python_version": "3.11.7", "python_source": "installed", "python_path": None, "torch": "2.14.1",
        "variant": "cu130", "cuda": "13.0", "rocm": None, "cudnn": "9.24.0.43", "nccl": "2.30.7", "torchvision": "0.29.1",
        "torchaudio": None, "index_url": "", "packages": ("torch",), "reasons": (), "warnings": ()}
    base.update(kw)
    return Plan(**base)  # type: ignore[arg-type]


def _probe(version: str, cuda: str | None, **dists: str) -> dict[str, object]:
    return {"python": "3.11.7", "torch": {"__version__": version, "cuda": cuda, "hip": None},
            "dists": {"torch": version, **dists}}


def test_cpu_build_slipping_in_fails() -> None:
    report = compare_build(_plan(), _probe("2.14.1+cpu", None), NcclPin("wheel", "nvidia-nccl-cu13", "2.30.7"))
    assert any("CPU build" in f and "wrong build" in f for f in report.failures)


def test_matching_cuda_build_passes_and_records_runtime() -> None:
    probe = _probe("2.14.1", "13.0", **{"nvidia-nccl-cu13": "2.30.7", "nvidia_cudnn_cu13": "9.24.0.43"})
    probe["nccl"] = {"library": "/env/nvidia/nccl/lib/libnccl.so.2", "code": 23007, "rc": 0}
    report = compare_build(_plan(), probe, NcclPin("wheel", "nvidia-nccl-cu13", "2.30.7"))
    assert report.failures == () and report.warnings == ()
    assert report.runtime["nccl"] == "2.30.7" and report.runtime["cudnn"] == "9.24.0.43"


@pytest.mark.parametrize("probe,pin,expect", [
    (_probe("2.13.0", "13.0"), NcclPin("none"), "plan is torch 2.14.1"),
    (_probe("2.14.1", "12.8"), NcclPin("none"), "CUDA 12.8"),
    (_probe("2.14.1", "13.0", **{"nvidia-nccl-cu13": "2.30.7"}), NcclPin("wheel-override", "nvidia-nccl-cu13", "2.28.9"),
     "expected 2.28.9"),
])
def test_mismatches_fail(probe: dict[str, object], pin: NcclPin, expect: str) -> None:
    assert any(expect in f for f in compare_build(_plan(), probe, pin).failures)


def test_parse_probe_takes_the_last_build_record() -> None:
    out = (
        'warning: x\n{"python": "noise"}\n'
        'TORCHFIT-RECORD {"t": 1.0, "kind": "stage", "stage": "x"}\n'
        'TORCHFIT-RECORD {"t": 2.0, "kind": "build", "python": "3.11.7"}\n'
    )
    assert parse_probe(out) == {"python": "3.11.7"}
    assert parse_probe("garbage") == {}
    assert parse_probe('{"python": "3.11.7"}') == {}  # not a record


# --- NCCL --------------------------------------------------------------------------------------


def test_nccl_version_codes() -> None:
    assert nccl_text(23007) == "2.30.7"
    assert nccl_text(22809) == "2.28.9"
    assert nccl_text(2708) == "2.7.8"


def test_env_script_is_idempotent_and_undoable(tmp_path: Path) -> None:
    lib = tmp_path / "it's lib" / "libnccl.so.2"
    script = tmp_path / "torchfit-env"
    script.write_text(render_env_script("/p", NcclPin("ld-preload", None, "2.28.9", str(lib))))
    res = subprocess.run(["sh", "-c", f'. "{script}"; . "{script}"; echo "$LD_PRELOAD"; _torchfit_env_off; '
                                      'echo "${LD_PRELOAD-unset}"'], capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ["PATH"], "LD_PRELOAD": "/x.so"})
    assert res.stdout.splitlines() == [f"{lib}:/x.so", "/x.so"], res.stderr


def test_check_nccl_lib_rejects_non_libraries(tmp_path: Path) -> None:
    fake = tmp_path / "libnccl.so.2"
    fake.write_bytes(b"\x7fELF" + b"\0" * 100)
    with pytest.raises(BadInput, match="ncclGetVersion"):
        check_nccl_lib(str(fake))
    fake.write_bytes(b"\x7fELF" + b"\0" * (5 << 20) + b"ncclGetVersion")  # found across a chunk border
    assert check_nccl_lib(str(fake)) == str(fake)


# --- PREFIX lock, relocation, swap -------------------------------------------------------------------


def test_prefix_lock_is_exclusive_and_removed(tmp_path: Path) -> None:
    prefix = str(tmp_path / "env")
    with PrefixLock(prefix):
        assert (tmp_path / "env.lock").read_text().strip() == str(os.getpid())
        with pytest.raises(PrefixBusy, match=f"pid {os.getpid()}"):
            with PrefixLock(prefix):
                pass
        start = time.monotonic()
        with pytest.raises(PrefixBusy):
            with PrefixLock(prefix, wait=0.5):
                pass
        assert time.monotonic() - start >= 0.5
    assert not (tmp_path / "env.lock").exists()
    with PrefixLock(prefix):
        pass


def test_relocate_rewrites_scripts_not_symlinks(tmp_path: Path) -> None:
    built = tmp_path / ".env.torchfit-1-abc"
    (built / "bin").mkdir(parents=True)
    (built / "bin" / "tool").write_text(f"#!{built}/bin/python\nprint(1)\n")
    (built / "bin" / "tool").chmod(0o755)
    os.symlink("/usr/bin/python3", built / "bin" / "python")
    (built / "pyvenv.cfg").write_text(f"home = /usr/bin\ncommand = /usr/bin/python3 -m venv {built}\n")
    changed = relocate(str(built), str(tmp_path / "env"))
    assert sorted(os.path.basename(p) for p in changed) == ["pyvenv.cfg", "tool"]
    assert (built / "bin" / "tool").read_text().startswith(f"#!{tmp_path / 'env'}/bin/python\n")
    assert os.access(built / "bin" / "tool", os.X_OK)
    assert os.readlink(built / "bin" / "python") == "/usr/bin/python3"


def test_swap_replaces_atomically_and_removes_the_old(tmp_path: Path) -> None:
    prefix, built = tmp_path / "env", tmp_path / ".env.torchfit-2-def"
    prefix.mkdir()
    (prefix / "old").write_text("old")
    built.mkdir()
    (built / "new").write_text("new")
    swap_into_place(str(built), str(prefix))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]
    assert (prefix / "new").read_text() == "new"
    fresh = tmp_path / ".fresh.torchfit-3-ghi"
    fresh.mkdir()
    swap_into_place(str(fresh), str(tmp_path / "fresh"))
    assert (tmp_path / "fresh").is_dir() and not fresh.exists()


def nccl_text(code: int) -> str | None:
    return version_text(decode_nccl_code(code))


def test_attack3_install_log_never_writes_through_a_planted_symlink(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A symlink at the log's name (pid and stamp are predictable) is refused, never written
    through (82c371b opened it with open(path, "w"), truncating the target)."""
    from torchfit.installer.prefix import InstallLog, state_dir

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    logs = Path(state_dir())
    logs.mkdir(parents=True, mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    now = time.time()
    for dt in range(4):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + dt))
        os.symlink(victim, logs / f"install-env-{stamp}-{os.getpid()}.log")
    said: list[str] = []
    log = InstallLog("env", on_error=said.append)
    log.write("secret-free text")
    assert victim.read_text() == "precious\n"
    assert log.path is None and len(said) == 1 and "exists already" in said[0] and "continuing without it" in said[0]
