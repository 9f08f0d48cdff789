"""cli/settings.py: one precedence rule for the site's settings (flag > environment >
$TORCHFIT_CONFIG > user file > system files > pip's configuration > default), through real
`torchfit` processes (issue 26, item 2), and `torchfit config` showing each origin."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli
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
