"""Attack round 3 (issue 21, class 2): a tampered lock cannot pass options to uv or pip.

A pylock.toml entry whose version carries a newline and `--extra-index-url URL` (or
`-r /etc/shadow`) made uv and pip read that option from the requirements file torchfit
wrote: the index at URL was asked, the first line of /etc/shadow reached the install log,
and the new env's lock kept the text. The lock's reader refuses it (exit 2, one line)
before any installer runs; a real HTTP server on 127.0.0.1 records whether it was asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import one_line_error, run_tf
from tests.support.servers import http_server, reply


@pytest.fixture
def recording_index() -> Iterator[dict[str, Any]]:
    """http://127.0.0.1:PORT/simple that answers 404 and records every request."""
    with http_server(lambda h: reply(h, 404)) as srv:
        yield {"url": f"{srv.url}/simple", "seen": srv.seen}


def _tamper(lock: Path, out: Path, package: str, injected: str) -> None:
    """`out`: `lock` with `injected` appended to `package`'s version (TOML-escaped)."""
    text = lock.read_text()
    pattern = re.compile(rf'(name = "{package}"\nversion = ")([^"]*)(")')
    assert pattern.search(text), text[:400]
    escaped = injected.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    out.write_text(pattern.sub(lambda m: m.group(1) + m.group(2) + escaped + m.group(3), text, count=1))


@pytest.mark.parametrize("installer", ["uv", "pip"])
@pytest.mark.parametrize("option", ["--extra-index-url", "--index-url", "--find-links"])
def test_attack3_an_injected_index_option_is_refused_and_never_asked(
        cpu_env: dict[str, Any], recording_index: dict[str, Any], tmp_path: Path, state_home: Path,
        installer: str, option: str) -> None:
    lock = cpu_env["prefix"] / "pylock.toml"
    sha = re.search(r'name = "mpmath"\nversion = "[^"]*"\n\n\[\[packages.wheels\]\]\n(?:.*\n)*?hashes = '
                    r'\{ sha256 = "([0-9a-f]{64})" \}', lock.read_text())
    assert sha, "the shared env's lock has no mpmath wheel"
    # The whole line a requirements file would take: the real hash first, so the rest is an option line.
    injected = f" --hash=sha256:{sha.group(1)}\n{option} {recording_index['url']}"
    work = tmp_path / "work"
    work.mkdir()
    bad = work / "pylock.toml"
    _tamper(lock, bad, "mpmath", injected)
    prefix = work / "env"
    proc = run_tf("install", "--lock", str(bad), "--prefix", str(prefix), "--installer", installer,
                  "--allow-insecure-index", state=state_home, timeout=300)
    line = one_line_error(proc)
    assert "packages[" in line and "(mpmath)" in line and "is not a version" in line, line
    assert recording_index["seen"] == []
    assert not prefix.exists() and [p.name for p in work.iterdir()] == ["pylock.toml"]


def test_attack3_an_injected_requirements_file_is_never_read(cpu_env: dict[str, Any], tmp_path: Path,
                                                              state_home: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:$6$not-a-real-hash-but-a-secret:20228:0:99999:7:::\n")
    secret.chmod(0o600)
    bad = tmp_path / "pylock.toml"
    _tamper(cpu_env["prefix"] / "pylock.toml", bad, "mpmath", f"\n-r {secret}")
    proc = run_tf("install", "--lock", str(bad), "--prefix", str(tmp_path / "env"), "--installer", "pip",
                  state=state_home, timeout=300)
    one_line_error(proc)
    assert "not-a-real-hash" not in proc.stderr + proc.stdout
    logs = list((state_home / "torchfit" / "logs").glob("install-env-*")) if (state_home / "torchfit").exists() else []
    assert not any("not-a-real-hash" in p.read_text(errors="replace") for p in logs)
