"""cli/settings.py: one precedence rule for the site's settings (flag > environment >
$TORCHFIT_CONFIG > user file > system files > pip's configuration > default), through real
`torchfit` processes (issue 26, item 2), and `torchfit config` showing each origin."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.cli import bad_input, run_cli
from tests.support.wheels import make_wheel, write_index

CPU_HOST = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "glibc=2.36", "--assume", "arch=x86_64")
CP311 = "cp311-cp311-manylinux_2_28_x86_64"


def _site(tmp_path: Path, user: str | None, system: str | None) -> dict[str, str]:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "user"), "XDG_CONFIG_DIRS": str(tmp_path / "sys"),
           "TORCHFIT_TORCH_INDEX_URL": "", "PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": ""}
    for where, text in (("user", user), ("sys", system)):
        if text is not None:
            (tmp_path / where / "torchfit").mkdir(parents=True)
            (tmp_path / where / "torchfit" / "config.toml").write_text(text)
    return env


def _mirror(tmp_path: Path, name: str, version: str) -> str:
    wheel = make_wheel(tmp_path / f"w-{name}", "torch", f"{version}+cpu", tag=CP311)
    return write_index(tmp_path / name, [wheel]).as_uri()


def test_the_site_file_sets_the_mirror_once_and_resolve_uses_it(tmp_path: Path) -> None:
    system = _mirror(tmp_path, "system-mirror", "2.12.0")
    user = _mirror(tmp_path, "user-mirror", "2.13.0")
    flag = _mirror(tmp_path, "flag-mirror", "2.14.0")
    env = _site(tmp_path, None, f'torch-index-url = "{system}"\n')

    def plan(*args: str, **more: str) -> dict:
        proc = run_cli("resolve", "--json", *CPU_HOST, *args, env={**env, **more}, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    assert (plan()["torch"], plan()["index_url"]) == ("2.12.0", system)  # the system file
    (tmp_path / "user" / "torchfit").mkdir(parents=True)
    (tmp_path / "user" / "torchfit" / "config.toml").write_text(f'torch-index-url = "{user}"\n')
    assert plan()["torch"] == "2.13.0"  # the user file beats the system's
    named = tmp_path / "named.toml"
    named.write_text(f'torch-index-url = "{flag}"\n')
    assert plan(TORCHFIT_CONFIG=str(named))["torch"] == "2.14.0"  # $TORCHFIT_CONFIG beats the user's
    assert plan(TORCHFIT_TORCH_INDEX_URL=system)["torch"] == "2.12.0"  # the environment beats the files
    assert plan("--torch-index-url", flag)["torch"] == "2.14.0"  # the flag beats everything
    # and `torchfit config` says where each value came from
    proc = run_cli("config", "--json", env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {r["key"]: r for r in json.loads(proc.stdout)["settings"]}
    assert rows["torch-index-url"]["value"] == user
    assert rows["torch-index-url"]["origin"] == str(tmp_path / "user" / "torchfit" / "config.toml")
    assert rows["installer"] == {**rows["installer"], "value": "auto", "origin": "default"}
    proc = run_cli("config", env={**env, "TORCHFIT_TORCH_INDEX_URL": system}, timeout=60)
    assert "from environment TORCHFIT_TORCH_INDEX_URL" in proc.stdout, proc.stdout


def test_lists_add_up_and_the_stall_limit_reaches_the_steps(tmp_path: Path) -> None:
    links_a, links_b = tmp_path / "a", tmp_path / "b"
    make_wheel(links_a, "from-user", "1.0")
    make_wheel(links_b, "from-system", "1.0")
    mirror = _mirror(tmp_path, "mirror", "2.13.0")
    env = _site(tmp_path, f'torch-index-url = "{mirror}"\nfind-links = "{links_a}"\n',
                f'find-links = ["{links_b}"]\nstall-timeout = 45\ninstaller = "pip"\n')
    proc = run_cli("resolve", "--json", "--offline", *CPU_HOST, "from-user", "from-system", env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["resolved"]["from-system"] == "1.0"  # both files' find-links
    rows = {r["key"]: r for r in json.loads(run_cli("config", "--json", env=env).stdout)["settings"]}
    assert rows["find-links"]["value"] == [str(links_a), str(links_b)]
    assert rows["stall-timeout"]["value"] == 45 and rows["installer"]["value"] == "pip"
    assert rows["stall-timeout"]["origin"].endswith("sys/torchfit/config.toml")


def test_a_bad_configuration_file_is_one_line_exit_2(tmp_path: Path) -> None:
    for text, needle in (("bogus = 1\n", "unknown key 'bogus'"), ("installer = 'conda'\n", "installer must be"),
                         ("stall-timeout = -1\n", "seconds > 0"), ("find-links = [1]\n", "list of strings"),
                         ("torch-index-url = \n", "config.toml")):
        env = _site(tmp_path / str(abs(hash(text))), text, None)
        proc = run_cli("resolve", *CPU_HOST, env=env, timeout=60)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
    proc = run_cli("config", env={"TORCHFIT_CONFIG": str(tmp_path / "missing.toml")}, timeout=60)
    assert proc.returncode == 2 and "TORCHFIT_CONFIG" in proc.stderr, proc.stderr


def test_the_site_prefix_root_is_where_install_puts_an_env_without_prefix(tmp_path: Path) -> None:
    """`prefix-root` in the system file, then TORCHFIT_PREFIX_ROOT over it: install without --prefix
    builds ROOT/.venv (its default's name), and `torchfit config` says where the root came from."""
    from tests.installer.conftest import have_uv

    if not have_uv():
        import pytest

        pytest.skip("uv is not installed")
    torch = make_wheel(tmp_path / "w", "torch", "2.13.0+cpu", tag=CP311,
                       files={"torch/__init__.py": b"__version__ = '2.13.0+cpu'\n",
                              "torch/version.py": b"__version__ = '2.13.0+cpu'\ncuda = None\nhip = None\n"})
    mirror = write_index(tmp_path / "mirror", [torch]).as_uri()
    site_root, env_root = tmp_path / "site-envs", tmp_path / "env-envs"
    env = {**_site(tmp_path, None, f'torch-index-url = "{mirror}"\nprefix-root = "{site_root}"\n'),
           "UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_STATE_HOME": str(tmp_path / "state")}
    rows = {r["key"]: r for r in json.loads(run_cli("config", "--json", env=env, timeout=60).stdout)["settings"]}
    assert rows["prefix-root"]["value"] == str(site_root)
    assert rows["prefix-root"]["origin"] == str(tmp_path / "sys" / "torchfit" / "config.toml")
    work = tmp_path / "cwd"
    work.mkdir()
    proc = run_cli("install", "torch==2.13.0", *CPU_HOST, "--json", env=env, cwd=str(work), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["prefix"] == str(site_root / ".venv")
    assert (site_root / ".venv" / "pylock.toml").is_file() and not (work / ".venv").exists()
    env["TORCHFIT_PREFIX_ROOT"] = str(env_root)  # the environment beats the file
    rows = {r["key"]: r for r in json.loads(run_cli("config", "--json", env=env, timeout=60).stdout)["settings"]}
    assert (rows["prefix-root"]["value"], rows["prefix-root"]["origin"]) == (str(env_root),
                                                                             "environment TORCHFIT_PREFIX_ROOT")
    proc = run_cli("install", "torch==2.13.0", *CPU_HOST, "--json", env=env, cwd=str(work), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["prefix"] == str(env_root / ".venv")


def test_a_file_value_is_checked_as_its_flag_is(tmp_path: Path) -> None:
    """Issue 34 C4: `torch-index-url = "/nonexistent/x"` in a file was planned from (exit 1, "no
    compatible set") where the flag is refused (exit 2): the same check now, naming the file."""
    missing = tmp_path / "nonexistent" / "x"
    flag = bad_input(run_cli("resolve", *CPU_HOST, "--torch-index-url", str(missing),
                             env=_site(tmp_path / "flag", None, None), timeout=60))
    for key, value, needle in (("torch-index-url", str(missing), "no such directory"),
                               ("extra-index-url", "ftp://mirror.example/simple", "unsupported scheme"),
                               ("index-url", "http://mirror.example/simple", "plain http://"),
                               ("find-links", "https://mirror.example/{arch}/", "unknown placeholder")):
        env = _site(tmp_path / key, None, f'{key} = "{value}"\n')
        line = bad_input(run_cli("resolve", *CPU_HOST, env=env, timeout=60))
        assert line.startswith(f"torchfit: error: {tmp_path / key / 'sys' / 'torchfit' / 'config.toml'}: {key} ")
        assert needle in line, line
    # the same reason as the flag's, after the file and the key in place of the flag
    assert flag.split(f"{missing}: ", 1)[1] in bad_input(run_cli(
        "resolve", *CPU_HOST, env=_site(tmp_path / "same", None, f'torch-index-url = "{missing}"\n'), timeout=60))


def test_a_bad_torch_index_from_a_file_alone_is_refused_as_the_flag_is(tmp_path: Path) -> None:
    """Issue 36 change 7: export checked `--torch-index-url` and TORCHFIT_TORCH_INDEX_URL by hand,
    never the files: `torch-index-url = "ftp://..."` in a file was written into the export, and a
    plain http:// one was blamed on "the lock's torch index". The check now takes the run's answer
    (flag > environment > files): the file's bad value is refused, exit 2, one line, for the
    reason the flag's is, naming the file and key in place of the flag."""
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\n[[packages]]\nname = "torch"\nversion = "2.13.0+cpu"\n')
    export = ("export", "--format", "requirements", "--lock", str(lock))
    for n, (value, needle) in enumerate((("ftp://mirror.example/whl/{variant}", "not an http(s):// or file:// URL"),
                                         ("http://mirror.example/whl/{variant}", "plain http://"))):
        flag = bad_input(run_cli(*export, "--torch-index-url", value, env=_site(tmp_path / f"flag{n}", None, None),
                                 timeout=60))
        site = tmp_path / f"file{n}"
        line = bad_input(run_cli(*export, env=_site(site, None, f'torch-index-url = "{value}"\n'), timeout=60))
        assert line.startswith(f"torchfit: error: {site / 'sys' / 'torchfit' / 'config.toml'}: torch-index-url ")
        assert needle in line and flag.split("--torch-index-url ", 1)[1] == line.split(": torch-index-url ", 1)[1]
        if needle == "plain http://":  # resolve (one check for every command) refuses it in the same words
            assert bad_input(run_cli("resolve", *CPU_HOST, env=_site(site, None, None), timeout=60)) == line


def test_the_stall_limit_config_shows_is_the_one_in_force(tmp_path: Path) -> None:
    """Issue 34 C2: TORCHFIT_STALL_TIMEOUT=abc was shown by `config` as in force while the runner
    took its 120 s default (not even the file's 45). One reading (runner.parse_stall) for the
    environment and the files: a value it does not take is refused, exit 2, by `config` and by
    the commands; one it takes is what `config` shows."""
    env = _site(tmp_path, None, "stall-timeout = 45\n")
    for bad in ("abc", "-5", "nan", "inf", "0"):
        for args in (("config", "--json"), ("resolve", *CPU_HOST)):
            line = bad_input(run_cli(*args, env={**env, "TORCHFIT_STALL_TIMEOUT": bad}, timeout=60))
            assert f"TORCHFIT_STALL_TIMEOUT={bad}: give a number of seconds" in line, line
    rows = {r["key"]: r for r in json.loads(run_cli("config", "--json", env={**env, "TORCHFIT_STALL_TIMEOUT": "7.5"},
                                                    timeout=60).stdout)["settings"]}
    assert rows["stall-timeout"]["value"] == 7.5
    assert rows["stall-timeout"]["origin"] == "environment TORCHFIT_STALL_TIMEOUT"


def test_a_system_file_this_user_may_not_read_is_said_once_and_left_out(tmp_path: Path) -> None:
    """Issue 34 C1: a system file of mode 0600 (root's: it holds the mirror's token) made every
    command of every other user exit 2, `torchfit config` included. The choice (docs/install.md):
    that file is left out, said once on stderr with its owner and mode; the files this user may
    read still apply, and `config` lists it as unreadable. A file $TORCHFIT_CONFIG names is still
    refused when it cannot be read (it was asked for)."""
    from tests.support.mounts import as_nobody, need_root, readable_torchfit, shared_dir

    need_root()
    with shared_dir(0o755) as base:
        pythonpath = readable_torchfit(base)
        secret = base / "sys" / "torchfit" / "config.toml"
        secret.parent.mkdir(parents=True)
        secret.write_text('torch-index-url = "https://user:TOKEN@mirror.example/whl/{variant}"\n')
        secret.chmod(0o600)
        (base / "sys").chmod(0o755)
        (base / "sys" / "torchfit").chmod(0o755)
        user = base / "home" / ".config" / "torchfit" / "config.toml"
        user.parent.mkdir(parents=True)
        user.write_text('installer = "pip"\n')
        subprocess.run(["chown", "-R", "65534:65534", str(base / "home")], check=True)
        env = {"XDG_CONFIG_DIRS": str(base / "sys")}
        proc = as_nobody(pythonpath, "config", "--json", home=base / "home", env=env)
        assert proc.returncode == 0, proc.stderr
        warned = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(warned) == 1 and f"configuration file {secret} left out" in warned[0], proc.stderr
        assert "-rw------- (0600), owned by root:root" in warned[0] and "TOKEN" not in proc.stderr, warned[0]
        data = json.loads(proc.stdout)
        rows = {r["key"]: r for r in data["settings"]}
        assert rows["installer"]["value"] == "pip"  # the file this user may read still applies
        assert rows["torch-index-url"]["origin"] == "default"
        assert {"kind": "system", "path": str(secret), "found": True, "readable": False} in data["files"]
        from tests.cli.ui.test_jsonout import validate

        assert validate({**data}) == "config"
        text = as_nobody(pythonpath, "config", home=base / "home", env=env)
        assert text.returncode == 0 and f"unreadable system            {secret}" in text.stdout, text.stdout
        # a command that plans: the same one warning, then on with the readable files
        proc = as_nobody(pythonpath, "resolve", *CPU_HOST, "--offline", "--torch-index-url", str(base), "--json",
                         home=base / "home", env=env)
        assert proc.stderr.count("left out") == 1, proc.stderr
        # the file the user names is not optional: refused, naming it
        proc = as_nobody(pythonpath, "config", home=base / "home", env={**env, "TORCHFIT_CONFIG": str(secret)})
        assert proc.returncode == 2 and str(secret) in proc.stderr, proc.stderr


def test_config_escapes_what_a_terminal_would_obey(tmp_path: Path) -> None:
    """Issue 34 C3: `config` printed a value holding ESC[2J as is (the screen cleared)."""
    env = _site(tmp_path, 'index-url = "https://mirror.example/\\u001b[2J/simple"\n', None)
    env["TORCHFIT_TORCH_INDEX_URL"] = "https://x.example/\x1b]0;owned\x07/whl/{variant}"
    proc = run_cli("config", env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, proc.stdout
    assert "https://mirror.example/\\x1b[2J/simple" in proc.stdout
    assert "https://x.example/\\x1b]0;owned\\x07/whl/{variant}" in proc.stdout


def test_one_list_of_what_a_lock_makes_moot_serves_export_pack_and_install() -> None:
    """Issue 36 change 7: export's and pack's "--lock ... the lock as it is; drop ..." lists had
    different members (pack let --cuda, --assume and --strict-driver pass unsaid): one list now,
    in one order; install lets through the options that name the host it checks the lock on."""
    import pytest

    from torchfit.cli.options import build_parser
    from torchfit.cli.settings import lock_conflicts
    from torchfit.errors import BadInput

    argv = ["--lock", "L", "torch", "--cuda", "12.8", "--assume", "driver=580.0", "--strict-driver"]
    for verb in ("export", "pack"):
        extra = ["--format", "requirements"] if verb == "export" else ["-o", "D"]
        args = build_parser().parse_args([verb, *extra, *argv])
        with pytest.raises(BadInput) as err:
            lock_conflicts(args, verb=f"{verb}s")
        assert str(err.value) == f"--lock {verb}s the lock as it is; drop REQ, --cuda, --assume, --strict-driver"
    args = build_parser().parse_args(["install", *argv, "--facts", "F"])
    assert lock_conflicts(args, allowed=("--facts", "--assume")) == ["REQ", "--cuda", "--strict-driver"]
