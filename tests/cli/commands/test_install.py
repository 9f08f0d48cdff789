"""Bad input to `torchfit install` (cli/commands/install.py): exit 2, one line, no traceback,
nothing created."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.installer.conftest import CPU_ARGS, leftovers, one_line_error, run_tf

pytestmark = pytest.mark.filterwarnings("ignore")


def _install(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tf("install", *args, state=tmp_path / "state", timeout=120)


def test_http_index_needs_the_flag(tmp_path: Path) -> None:
    line = one_line_error(_install(tmp_path, *CPU_ARGS, "--torch-index-url", "http://user:pw@mirror.example/simple",
                                   "--prefix", str(tmp_path / "env")))
    assert "--torch-index-url http://user:***@mirror.example/simple" in line and "--allow-insecure-index" in line
    assert "pw" not in line.replace("pw@", "") or ":pw@" not in line
    line = one_line_error(_install(tmp_path, *CPU_ARGS, "--extra-index-url", "http://mirror.example/simple",
                                   "--prefix", str(tmp_path / "env")))
    assert "--extra-index-url" in line
    assert not (tmp_path / "env").exists() and leftovers(tmp_path) == []


def test_http_index_from_the_environment_variable(tmp_path: Path) -> None:
    proc = run_tf("install", *CPU_ARGS, "--prefix", str(tmp_path / "env"), state=tmp_path,
                  TORCHFIT_TORCH_INDEX_URL="http://mirror.example/whl/{variant}")
    assert "TORCHFIT_TORCH_INDEX_URL" in one_line_error(proc)


def test_existing_prefix_needs_force(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    line = one_line_error(_install(tmp_path, *CPU_ARGS, "--prefix", str(prefix)))
    assert "exists" in line and "--force" in line
    assert sorted(p.name for p in prefix.iterdir()) == ["pyvenv.cfg"]


def test_force_never_replaces_a_directory_that_is_not_an_env(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious\n")
    line = one_line_error(_install(tmp_path, *CPU_ARGS, "--prefix", str(home), "--force"))
    assert "not a virtual environment" in line
    assert (home / "thesis.tex").read_text() == "precious\n"


@pytest.mark.parametrize(
    ("make", "expect"),
    [
        (lambda d: d / "missing.so.2", "no such file"),
        (lambda d: d, "not a file"),
        (lambda d: (d / "notes.txt", (d / "notes.txt").write_text("hello"))[0], "no ELF header"),
        (lambda d: Path("/bin/true"), "no ncclGetVersion"),
    ],
)
def test_bad_nccl_lib(tmp_path: Path, make: object, expect: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    line = one_line_error(_install(tmp_path, *CPU_ARGS, "--nccl-lib", str(path), "--prefix", str(tmp_path / "env")))
    assert "--nccl-lib" in line and expect in line


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("--nccl", "two.28"), "not a version"),
        (("--nccl", "2.28.3", "--nccl-lib", "/bin/true"), "not allowed with"),
        (("--nccl", "2.28.3"), "has no NCCL to pin"),
        (("--installer", "conda"), "invalid choice"),
        (("--wait", "-1"), "--wait"),
        (("--index-url", "ftp://mirror.example/simple"), "unsupported scheme"),
    ],
)
def test_bad_flags(tmp_path: Path, args: tuple[str, ...], expect: str) -> None:
    # A torch source that exists (the plan reads it) and holds no torch: every flag is judged before anything
    # is installed (--nccl needs the plan's variant, which --variant cpu gives).
    from tests.support.wheels import make_wheel, write_index

    index = write_index(tmp_path / "index", [make_wheel(tmp_path / "wheels", "torch", "2.13.0+cpu",
                                                        tag="cp311-cp311-manylinux_2_28_x86_64")])
    line = one_line_error(_install(tmp_path, *CPU_ARGS, "--torch-index-url", index.as_uri(),
                                   *args, "--prefix", str(tmp_path / "env")))
    assert expect in line
    assert not (tmp_path / "env").exists()


def test_bad_lock_files(tmp_path: Path) -> None:
    env = str(tmp_path / "env")
    assert "no such file" in one_line_error(_install(tmp_path, "--lock", str(tmp_path / "nope.toml"), "--prefix", env))
    garbage = tmp_path / "garbage.toml"
    garbage.write_text("lock-version = [unclosed\n")
    assert "not a TOML file" in one_line_error(_install(tmp_path, "--lock", str(garbage), "--prefix", env))
    foreign = tmp_path / "pylock.toml"
    foreign.write_text('lock-version = "1.0"\ncreated-by = "uv"\n[[packages]]\nname = "x"\nversion = "1"\n')
    assert "[tool.torchfit]" in one_line_error(_install(tmp_path, "--lock", str(foreign), "--prefix", env))
    line = one_line_error(_install(tmp_path, "--lock", str(foreign), "torch==2.13.0", "--prefix", env))
    assert "REQ" in line


def test_a_lock_of_40000_packages_is_refused_at_once(tmp_path: Path) -> None:
    """Issue 34, T1: `install --lock` of a PEP 751 lock listing 40,000 packages (7.6 MB: under the
    size limit) ran past 300 s: ~6 s parsing it twice, then a redirect probe of each file URL. It is
    refused at once, in one line, naming the count and the documented limit (inputs.MAX_LOCK_PACKAGES)."""
    import time

    sha = "a" * 64
    entries = [f'[[packages]]\nname = "p{i}"\nversion = "1"\nwheels = [{{ url = "https://h/p{i}-1-py3-none-any.whl", '
               f'hashes = {{ sha256 = "{sha}" }} }}]' for i in range(40000)]
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\ncreated-by = "torchfit"\n' + "\n".join(entries)
                    + '\n[tool.torchfit]\nschema = 1\n[tool.torchfit.plan]\ntorch = "2.13.0"\nvariant = "cpu"\n'
                      'python = "3.11.7"\npython_version = "3.11"\n')
    start = time.monotonic()
    proc = run_tf("install", "--lock", str(lock), "--prefix", str(tmp_path / "env"), state=tmp_path / "state",
                  timeout=60)
    took = time.monotonic() - start
    from torchfit.inputs import MAX_LOCK_PACKAGES

    assert one_line_error(proc).endswith(f"{lock}: 40000 packages; torchfit reads locks of at most "
                                         f"{MAX_LOCK_PACKAGES} packages (an env's lock holds a few hundred)  "
                                         "[bad-input]"), proc.stderr
    assert took < 15, took
    assert not (tmp_path / "env").exists() and leftovers(tmp_path) == []
