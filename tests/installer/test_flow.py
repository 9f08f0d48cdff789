"""installer/flow.py, the install job, end to end: `install --lock` refuses a lock missing a
dependency (#6 of the 2026-11 attack, issue 13; the closure check) or contradicting itself (#28),
and the hint it prints to use the env works when pasted. Real installs with uv from the local
CPU torch wheel."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.installer.conftest import CPU_ARGS, needs_uv, one_line_error, run_tf

# Real installs (cpu_env, torch_index) throughout: the slow tier.
pytestmark = pytest.mark.slow


def _without(lock_text: str, name: str) -> str:
    """The lock text with the [[packages]] entry of `name` removed (the defect file's repro)."""
    blocks = lock_text.split("[[packages]]")
    keep = [b for b in blocks if f'name = "{name}"' not in b.split("[[packages.wheels]]")[0]]
    assert len(keep) == len(blocks) - 1
    return "[[packages]]".join(keep)


@needs_uv
def test_install_lock_missing_a_dependency_fails_naming_it(cpu_env: dict[str, Any], tmp_path: Path,
                                                               state_home: Path) -> None:
    """Defect #6 of the 2026-11 attack (issue 13)."""
    lock = tmp_path / "l.toml"
    lock.write_text(_without((cpu_env["prefix"] / "pylock.toml").read_text(), "sympy"))
    prefix = tmp_path / "env"
    proc = run_tf("install", "--lock", str(lock), "--prefix", str(prefix), state=state_home)
    assert proc.returncode == 1, proc.stderr
    assert "is not whole" in proc.stderr and "sympy" in proc.stderr, proc.stderr
    assert "[check-deps]" in proc.stderr
    assert "the full log:" in proc.stderr  # the error names the install log where it is built
    assert not prefix.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".env")] == []


@needs_uv
def test_a_whole_lock_still_installs_after_its_closure_check(cpu_env_relocked: dict[str, Any]) -> None:
    """Defect #6 of the 2026-11 attack (issue 13)."""
    assert "[check-deps]" in cpu_env_relocked["stderr"]


@needs_uv
def test_duplicate_package_in_a_lock_is_refused(cpu_env: dict[str, Any], tmp_path: Path,
                                                     state_home: Path) -> None:
    """Defect #28 of the 2026-11 attack (issue 13)."""
    text = (cpu_env["prefix"] / "pylock.toml").read_text()
    blocks = text.split("[[packages]]")
    torch = next(b for b in blocks if 'name = "torch"' in b.split("[[packages.wheels]]")[0])
    lock = tmp_path / "dup.toml"
    lock.write_text(text.rstrip("\n") + "\n\n[[packages]]" + torch)
    line = one_line_error(run_tf("install", "--lock", str(lock), "--prefix", str(tmp_path / "env"),
                                 state=state_home))
    assert "torch is locked twice" in line


@needs_uv
def test_requires_python_contradicting_the_plan_is_refused(cpu_env: dict[str, Any], tmp_path: Path,
                                                               state_home: Path) -> None:
    """Defect #28 of the 2026-11 attack (issue 13)."""
    text = (cpu_env["prefix"] / "pylock.toml").read_text()
    lock = tmp_path / "py39.toml"
    lock.write_text(re.sub(r'^requires-python = ".*"$', 'requires-python = "==3.9.*"', text, flags=re.M))
    line = one_line_error(run_tf("install", "--lock", str(lock), "--prefix", str(tmp_path / "env"),
                                 state=state_home))
    assert "requires-python" in line and "3.11" in line


@needs_uv
def test_ux_use_hint_works_when_pasted(torch_index: str, tmp_path: Path, state_home: Path) -> None:
    prefix = tmp_path / "my env $(touch pwned)"
    proc = run_tf("install", *CPU_ARGS, "--torch-index-url", torch_index, "--prefix", str(prefix),
                  state=state_home)
    assert proc.returncode == 0, proc.stderr
    use = next(ln for ln in proc.stderr.splitlines() if ln.strip().startswith("use:"))
    source_cmd = use.split("use:", 1)[1].split("   or   ")[0].strip()
    assert shlex.split(source_cmd) == ["source", f"{prefix}/bin/activate"]
    out = subprocess.run(["bash", "-c", f"{source_cmd} && echo \"$VIRTUAL_ENV\""], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "pwned").exists()


@needs_uv
def test_no_build_refuses_a_lock_with_a_source_distribution_and_a_plan_that_needs_one(
        cpu_env: dict[str, Any], torch_index: str, tmp_path: Path, state_home: Path) -> None:
    """install --no-build (as resolve and add have it): a lock that installs a package from an
    sdist is refused up front (one line, exit 2, the file named); a plan that needs a build is
    refused by the planning step. Neither runs the package's build backend or creates PREFIX."""
    from tests.support.wheels import hostile_sdist, sha256_file

    links = tmp_path / "links"
    marker = tmp_path / "pids"
    sdist = hostile_sdist(links, marker, daemon=False)
    text = (cpu_env["prefix"] / "pylock.toml").read_text()
    entry = (f'[[packages]]\nname = "hangpkg"\nversion = "1.0"\n'
             f'sdist = {{ name = "{sdist.name}", path = "{sdist}", hashes = {{ sha256 = "{sha256_file(sdist)}" }} }}\n\n')
    lock = tmp_path / "with-sdist.toml"
    lock.write_text(text.replace("[[packages]]", entry + "[[packages]]", 1))
    prefix = tmp_path / "env"
    line = one_line_error(run_tf("install", "--lock", str(lock), "--no-build", "--prefix", str(prefix),
                                 state=state_home))
    assert f"--no-build: {lock} installs hangpkg 1.0 from a source distribution ({sdist.name})" in line, line
    proc = run_tf("install", *CPU_ARGS, "hangpkg", "--no-build", "--offline", "--find-links", str(links),
                  "--torch-index-url", torch_index, "--prefix", str(prefix), "--json", state=state_home)
    assert proc.returncode == 1, proc.stderr
    assert "hangpkg" in proc.stdout and "no usable wheels" in proc.stdout, proc.stdout
    assert not marker.exists(), "--no-build ran the package's build backend"
    assert not prefix.exists()


@needs_uv
def test_a_locked_file_that_redirects_from_https_to_plain_http_is_refused(
        cpu_env: dict[str, Any], tmp_path: Path, state_home: Path) -> None:
    """Issue 25's redirect check, for `install --lock` too: uv follows an https -> http redirect
    of a file silently; the lock's https files are asked first (exit 1, the file and the hop
    named) and PREFIX is not created."""
    from tests.support.tls import make_certs, redirecting_index, trust_bundle
    from tests.support.wheels import make_wheel, serve_dir, sha256_file

    certs = make_certs(tmp_path / "tls")
    bundle = trust_bundle(certs)
    wheel = make_wheel(tmp_path / "files", "redirected-pkg", "1.0")
    text = (cpu_env["prefix"] / "pylock.toml").read_text()
    lock = tmp_path / "redirected.toml"
    prefix = tmp_path / "env"
    with serve_dir(tmp_path) as plain, serve_dir(tmp_path / "secure", redirecting_index(
            tmp_path / "secure", wheel, plain), tls=(certs["cert"], certs["key"])) as secure:
        url = f"{secure}/files/{wheel.name}"
        entry = (f'[[packages]]\nname = "redirected-pkg"\nversion = "1.0"\n'
                 f'wheels = [{{ name = "{wheel.name}", url = "{url}", hashes = {{ sha256 = "{sha256_file(wheel)}" }} }}]\n\n')
        lock.write_text(text.replace("[[packages]]", entry + "[[packages]]", 1))
        proc = run_tf("install", "--lock", str(lock), "--prefix", str(prefix), "--json", state=state_home,
                      env={"REQUESTS_CA_BUNDLE": bundle, "SSL_CERT_FILE": bundle})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)
    assert err["reference"] == "index-unavailable", err
    assert err["error"].startswith(f"{url}: redirected from https to plain http ({plain}/files/{wheel.name})"), err
    assert not prefix.exists()
