"""index/sources.py: pip's configuration as pip reads it, and the sources each install step sees."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from torchfit.errors import BadInput
from torchfit.index.sources import (
    PipConfig,
    load_pip_config,
    make_sources,
    parse_pip_config,
)


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


def test_no_build_replaces_the_configured_binary_choices_in_every_step(tmp_path: object) -> None:
    """uv refuses `--no-build` beside `--only-binary` ("cannot be used with", uv 0.13.9): with a
    pip.conf's only-binary, the planning's wheels-only pass failed and fell back to builds.
    `no_build` (install/add/resolve --no-build, the planning's first pass) is the one choice."""
    pip = PipConfig({"only-binary": "numpy", "no-binary": "foo", "timeout": "60"})
    s = _sources(pip=pip)
    assert s.uv_args(family=False)[1:5] == ["--only-binary", "numpy", "--no-binary", "foo"]
    for args in (s.uv_args(family=False, no_build=True), s.uv_compile({}, str(tmp_path), no_build=True)[0],
                 _sources(pip=pip, no_build=True).uv_args(family=True, no_build=True)):
        assert args.count("--no-build") == 1 and "--only-binary" not in args and "--no-binary" not in args, args
    env = _sources(pip=pip, no_build=True).pip_env({}, family=False)
    assert env["PIP_ONLY_BINARY"] == ":all:" and "PIP_NO_BINARY" not in env and env["PIP_TIMEOUT"] == "60"
    assert _sources(pip=pip).pip_env({}, family=False)["PIP_ONLY_BINARY"] == "numpy"


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

