"""`torchfit resolve` for a whole project (issue 18): real wheels with real METADATA on
local PEP 503 indexes served over HTTP on 127.0.0.1, the real uv for the whole set.

The project index holds packages that pin torch the way vllm and xformers do
(`Requires-Dist: torch==2.8.0`); the torch index holds tiny stand-in torch wheels
(real METADATA, no code) for the builds uv must find once the pin is chosen.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.wheels import make_wheel, serve_dir, write_index

CPU_HOST = ("--assume", "gpu=none", "--assume", "python=3.12", "--assume", "glibc=2.35", "--assume", "arch=x86_64")
H100_HOST = ("--assume", "gpu=sm_90", "--assume", "driver=570.124.06", "--assume", "glibc=2.35",
             "--assume", "python=3.12", "--assume", "arch=x86_64")
RTX5090_HOST = ("--assume", "gpu=sm_120", "--assume", "driver=570.124.06", "--assume", "glibc=2.35",
                "--assume", "python=3.12", "--assume", "arch=x86_64")


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("project-indexes")
    wheels = root / "wheels"
    project = [
        make_wheel(wheels, "pinlib", "1.0", ["torch==2.8.0", "purelib>=1"]),
        make_wheel(wheels, "pinlib", "2.0", ["torch==2.9.0", "purelib>=1"]),
        make_wheel(wheels, "xfm", "0.1", ["torch==2.9.0"]),
        make_wheel(wheels, "oldpin", "0.3", ["torch==2.5.1"]),
        make_wheel(wheels, "visionpin", "1.0", ["torchvision==0.23.0", "torch>=2.0"]),
        make_wheel(wheels, "purelib", "1.0"),
        make_wheel(wheels, "purelib", "1.1"),
        make_wheel(wheels, "pyonly", "1.0", ["torch>=2.0"], requires_python=">=3.13"),
        make_wheel(wheels, "torch-scatter", "2.1.2"),  # PyG: no torch in METADATA, one binary per torch
        # "PyPI's" xformers: its METADATA readable, its binary for no Python here (PyPI's is a cu128 build)
        make_wheel(wheels, "xformers", "0.0.32.post2", ["torch==2.8.0"], tag="cp99-cp99-manylinux_2_28_x86_64"),
    ]
    torch_wheels = root / "torch-wheels"
    family = {
        "cpu": [("torch", "2.8.0"), ("torch", "2.9.0"), ("torch", "2.5.1"), ("torchvision", "0.23.0"),
                ("torch", "2.13.0"), ("torch", "2.14.1"), ("torch", "2.15.0")],
        "cu128": [("torch", "2.8.0"), ("torch", "2.9.0"), ("torchvision", "0.23.0")],
        "cu129": [("torch", "2.8.0")],
        "cu126": [("torch", "2.8.0")],
    }
    for variant, items in family.items():
        built = [make_wheel(torch_wheels / variant, n, f"{v}+{variant}") for n, v in items]
        if variant == "cu126":  # the torch index's own xformers build, as download.pytorch.org has
            built.append(make_wheel(torch_wheels / variant, "xformers", "0.0.32.post2", ["torch==2.8.0"]))
        write_index(root / "torch" / variant, built)
    write_index(root / "pypi", project)
    with serve_dir(root) as url:
        yield {"url": url, "root": root, "pypi": f"{url}/pypi/simple",
               "torch": f"{url}/torch/{{variant}}/simple"}


def resolve(indexes: dict[str, Any], *args: str) -> tuple[int, dict[str, Any], str]:
    out = run_cli("resolve", "--json", "--index-url", indexes["pypi"], "--torch-index-url", indexes["torch"],
                  "--allow-insecure-index", *args, env={"PIP_CONFIG_FILE": "/dev/null"}, timeout=300)
    try:
        data = json.loads(out.stdout)
    except ValueError:
        data = {}
    return out.returncode, data, out.stderr


def test_a_package_pinning_an_older_torch_gets_that_release_in_the_hosts_best_variant(indexes: dict[str, Any]) -> None:
    code, plan, err = resolve(indexes, *H100_HOST, "pinlib==1.0", "--explain")  # --explain: who holds torch
    assert code == 0, err
    assert plan["torch"] == "2.8.0" and plan["variant"] == "cu128", plan
    assert plan["project"] == ["pinlib==1.0"]
    assert plan["resolved"]["torch"].startswith("2.8.0") and plan["resolved"]["pinlib"] == "1.0"
    assert plan["resolved"]["purelib"] == "1.1"  # uv resolved the rest
    assert any("required by pinlib 1.0 (torch==2.8.0)" in r for r in plan["reasons"]), plan["reasons"]


def test_an_unpinned_package_gets_its_newest_release_the_host_runs(indexes: dict[str, Any]) -> None:
    code, plan, err = resolve(indexes, *CPU_HOST, "pinlib")
    assert code == 0, err
    assert (plan["torch"], plan["variant"], plan["resolved"]["pinlib"]) == ("2.9.0", "cpu", "2.0"), plan


def test_a_torch_range_of_the_user_picks_the_package_release_that_meets_it(indexes: dict[str, Any]) -> None:
    code, plan, err = resolve(indexes, *CPU_HOST, "pinlib", "torch<2.9")
    assert code == 0, err
    assert (plan["torch"], plan["resolved"]["pinlib"]) == ("2.8.0", "1.0"), plan


def test_a_torchvision_pin_brings_torchvision_from_the_torch_index(indexes: dict[str, Any]) -> None:
    code, plan, err = resolve(indexes, *CPU_HOST, "visionpin")
    assert code == 0, err
    assert plan["torch"] == "2.8.0" and plan["torchvision"] == "0.23.0" and "torchvision" in plan["packages"]
    assert plan["resolved"]["torchvision"].startswith("0.23.0")


def test_two_incompatible_pins_are_named_together(indexes: dict[str, Any]) -> None:
    code, data, err = resolve(indexes, *CPU_HOST, "pinlib==1.0", "xfm")
    assert code == 1, err
    text = "\n".join(data["conflicts"])
    assert "pinlib 1.0 requires torch==2.8.0 and xfm 0.1 requires torch==2.9.0" in text, text


def test_a_pin_no_host_build_meets_is_named_with_the_arch_fact(indexes: dict[str, Any]) -> None:
    code, data, err = resolve(indexes, *RTX5090_HOST, "oldpin")
    assert code == 1, err
    text = "\n".join(data["conflicts"])
    assert "oldpin 0.3 requires torch==2.5.1" in text and "sm_120" in text, text


def test_requires_python_of_a_package_chooses_the_interpreter(indexes: dict[str, Any], tmp_path: Path) -> None:
    facts = json.loads(run_cli("detect", "--json").stdout)
    # The host's Pythons as given: uv's downloads list is whatever the installed uv knows
    facts.update(pythons=[{"version": "3.12.1", "path": "/usr/bin/python3.12"}], uv_pythons=None)
    with_pyenv = tmp_path / "with-pyenv.json"
    pyenv = {"path": "/opt/pyenv/bin/pyenv", "version": "2.4.0", "installable": ["3.12.1", "3.13.0"]}
    with_pyenv.write_text(json.dumps({**facts, "pyenv": pyenv}))
    code, plan, err = resolve(indexes, "--facts", str(with_pyenv), "--assume", "gpu=none", "pyonly")
    assert code == 0, err
    assert (plan["python"], plan["python_source"]) == ("3.13", "pyenv"), plan
    # uv's managed Pythons beside pyenv: at the same minor, uv's prebuilt one (no compiler; issue 35)
    with_uv = tmp_path / "with-uv.json"
    with_uv.write_text(json.dumps({**facts, "pyenv": pyenv, "uv_pythons": {
        "path": "/usr/bin/uv", "installable": ["3.13.9", "3.12.12"], "source": "uv's default"}}))
    code, plan, err = resolve(indexes, "--facts", str(with_uv), "--assume", "gpu=none", "pyonly")
    assert code == 0, err
    assert (plan["python_version"], plan["python_source"]) == ("3.13.9", "uv"), plan
    no_pyenv = tmp_path / "no-pyenv.json"
    no_pyenv.write_text(json.dumps({**facts, "pyenv": None}))
    code, data, err = resolve(indexes, "--facts", str(no_pyenv), "--assume", "gpu=none", "pyonly")
    assert code == 1, err
    assert "Requires-Python >=3.13 admits none of the Pythons here (3.12.1)" in "\n".join(data["conflicts"]), data


def test_requirements_file_with_constraints_markers_and_an_index_line(indexes: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "constraints.txt").write_text("purelib==1.0\n")
    req = tmp_path / "requirements.txt"
    req.write_text(
        "# the project\n"
        f"--extra-index-url {indexes['pypi']}\n"
        "-c constraints.txt\n"
        "pinlib \\\n"
        "  ==1.0   # pinned for the cluster\n"
        "purelib ; python_version >= '3.8'\n"
        "xfm ; sys_platform == 'win32'\n"
    )
    code, plan, err = resolve(indexes, *CPU_HOST, "-r", str(req))
    assert code == 0, err
    assert plan["torch"] == "2.8.0" and plan["resolved"]["purelib"] == "1.0", plan
    assert "xfm" not in plan["resolved"]  # its marker is false on Linux
    assert plan["constraints"] == ["purelib==1.0"]


def test_project_with_an_extra(indexes: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "myapp"\nversion = "0.1"\ndependencies = ["purelib"]\n'
        '[project.optional-dependencies]\ngpu = ["pinlib==1.0"]\nall = ["myapp[gpu]"]\n')
    code, plan, err = resolve(indexes, *CPU_HOST, "--project", str(tmp_path), "--extra", "all")
    assert code == 0, err
    assert plan["torch"] == "2.8.0" and plan["resolved"]["pinlib"] == "1.0", plan
    code, plan, err = resolve(indexes, *CPU_HOST, "--project", str(tmp_path))
    assert code == 0, err
    assert "pinlib" not in plan["resolved"]


@pytest.mark.parametrize(
    ("files", "args", "needle"),
    [
        ({}, ["-r", "/nonexistent/requirements.txt"], "cannot read"),
        ({"pyproject.toml": '[tool.x]\na = 1\n'}, ["--project", "{d}"], "has no [project] table"),
        ({"pyproject.toml": '[project]\nname="a"\nversion="1"\n'}, ["--project", "{d}", "--extra", "nope"],
         "no optional-dependencies group 'nope'"),
        ({}, ["vllm>>1"], "is not a PEP 508 requirement"),
        ({"r.txt": "-e .\n"}, ["-r", "{d}/r.txt"], "editable"),
        ({"r.txt": "-r r.txt\n"}, ["-r", "{d}/r.txt"], "a cycle"),
        ({"r.txt": "pinlib==\n"}, ["-r", "{d}/r.txt"], "r.txt:1"),
        ({}, ["--extra", "gpu"], "give --project"),
    ],
)
def test_bad_project_input_is_one_line_exit_2(tmp_path: Path, files: dict[str, str], args: list[str],
                                              needle: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    out = run_cli("resolve", *CPU_HOST, *[a.replace("{d}", str(tmp_path)) for a in args])
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr


def test_companions_data_names_where_an_abi_bound_binary_lives(indexes: dict[str, Any]) -> None:
    """torch-scatter's METADATA names no torch; companions.toml knows its binaries are per torch build."""
    code, plan, err = resolve(indexes, *CPU_HOST, "torch-scatter", "torch==2.8.0")
    assert code == 0, err
    assert any("https://data.pyg.org/whl/torch-2.8.0+cpu.html" in w for w in plan["warnings"]), plan["warnings"]
    code, plan, err = resolve(indexes, *CPU_HOST, "torch-scatter", "torch==2.13.0")
    assert code == 0, err
    # No binary for torch 2.13: PyPI's sdist would be compiled, and the warning says so before the build.
    assert any(w.startswith("torch-scatter 2.1.2 has only a source distribution on PyPI") for w in plan["warnings"]), \
        plan["warnings"]


def test_an_index_that_does_not_answer_is_bounded_and_named(indexes: dict[str, Any]) -> None:
    """A project index that accepts connections and never answers: uv's HTTP timeout (or
    torchfit's stall limit) ends the read, exit 1 naming the URL (never a hang, never a traceback)."""
    from tests.support.servers import serve

    with serve() as url:
        out = run_cli("resolve", *CPU_HOST, "pinlib", "--index-url", f"{url}/simple", "--allow-insecure-index",
                      "--torch-index-url", indexes["torch"],
                      env={"PIP_CONFIG_FILE": "/dev/null", "TORCHFIT_INDEX_DEADLINE": "3", "UV_HTTP_TIMEOUT": "3"},
                      timeout=120)
    assert out.returncode == 1, out.stderr
    assert "127.0.0.1" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_an_abi_bound_package_comes_from_the_torch_index_when_pypis_binary_is_another_build(
        indexes: dict[str, Any]) -> None:
    """Driver 560 runs cu126 fully: torch 2.8.0 cu126. PyPI's xformers 0.0.32.post2 is a cu128 build
    (companions.toml, measured); the cu126 one is on the torch index, and uv is sent there."""
    host = ("--assume", "gpu=sm_90", "--assume", "driver=560.35.05", "--assume", "glibc=2.35",
            "--assume", "python=3.12", "--assume", "arch=x86_64")
    code, plan, err = resolve(indexes, *host, "xformers==0.0.32.post2")
    assert code == 0, err
    assert (plan["torch"], plan["variant"], plan["routed"]) == ("2.8.0", "cu126", ["xformers"]), plan
    assert plan["resolved"]["xformers"] == "0.0.32.post2"  # found only on the torch index
    assert any("its cu126 binary comes from the torch index" in r for r in plan["reasons"]), plan["reasons"]


def test_a_url_requirement_over_plain_http_is_refused_and_its_credentials_never_shown(indexes: dict[str, Any]) -> None:
    """Issue 25: `pkg @ http://user:secret@host/...?token=...` was fetched over plain http without
    --allow-insecure-index, and its credentials were printed by `resolve --json`, the text plan
    and `export --format requirements`. Refused like an http:// index; allowed, the URL appears
    without its credentials (as every index URL torchfit writes down)."""
    host = indexes["url"].split("://", 1)[1]
    req = f"purelib @ http://alice:S3CRET-PW@{host}/wheels/purelib-1.0-py3-none-any.whl?token=S3CRET-TOK"
    refused = run_cli("resolve", *CPU_HOST, "--index-url", indexes["pypi"].replace("http://", "https://"), req)
    assert refused.returncode == 2, refused.stderr
    line = refused.stderr.strip()
    assert "plain http://" in line and "--allow-insecure-index" in line and len(line.splitlines()) == 1, line
    assert "S3CRET" not in refused.stdout + refused.stderr
    code, plan, err = resolve(indexes, *CPU_HOST, req, "torch==2.8.0")
    assert code == 0, err
    assert plan["project"] == [f"purelib@ http://{host}/wheels/purelib-1.0-py3-none-any.whl"] or \
        plan["project"] == [f"purelib @ http://{host}/wheels/purelib-1.0-py3-none-any.whl"], plan["project"]
    assert "S3CRET" not in json.dumps(plan) + err
    common = ("--index-url", indexes["pypi"], "--torch-index-url", indexes["torch"], "--allow-insecure-index",
              *CPU_HOST, req, "torch==2.8.0")
    for out in (run_cli("resolve", *common, env={"PIP_CONFIG_FILE": "/dev/null"}, timeout=300),
                run_cli("export", "--format", "requirements", *common, env={"PIP_CONFIG_FILE": "/dev/null"},
                        timeout=300)):
        assert out.returncode == 0, out.stderr
        assert "S3CRET" not in out.stdout + out.stderr
        assert "purelib" in out.stdout


def test_each_group_of_a_fleet_gets_uvs_answer_for_the_project(indexes: dict[str, Any], tmp_path: Path) -> None:
    """`resolve --each-group` plans each group through the planning step `resolve` takes
    (architecture review 4, change 3): with a project, uv's resolved set for each group, not
    the matrix's family-only answer (which has no `resolved` and ignores pinlib's torch pin)."""
    from tests.support.fleets import fleet_file

    code, data, err = resolve(indexes, "--facts", str(fleet_file(tmp_path, 4, 2)), "--each-group", "pinlib==1.0")
    assert code == 0, err
    assert data["ok"] and len(data["groups"]) == 2, data
    for group in data["groups"]:
        assert group["torch"] == "2.8.0", group
        assert group["resolved"]["pinlib"] == "1.0" and group["resolved"]["torch"].startswith("2.8.0"), group
        assert group["project"] == ["pinlib==1.0"]


def test_uv_is_given_the_interpreter_and_searches_path_for_none(indexes: dict[str, Any], tmp_path: Path) -> None:
    """Without `--python`, `uv pip compile --python-version` runs each `python3.X` it meets on
    PATH to find one of that version: a pyenv shim is ~45 programs (bash, pyenv-exec, pyenv-which,
    ...) before uv reads an index, in every compile (issue 37). torchfit gives uv the interpreter:
    a PATH of logging stand-ins (each records the program that ran it) shows uv ran none."""
    shims, ran = tmp_path / "shims", tmp_path / "ran.log"
    shims.mkdir()
    for name in ("python", "python3", "python3.11", "python3.12"):
        shim = shims / name
        shim.write_text(f'#!/bin/sh\necho "$(cat /proc/$PPID/comm) {name}" >> {ran}\nexec {sys.executable} "$@"\n')
        shim.chmod(0o755)
    out = run_cli("resolve", "--json", "--index-url", indexes["pypi"], "--torch-index-url", indexes["torch"],
                  "--allow-insecure-index", *CPU_HOST, "pinlib",
                  env={"PIP_CONFIG_FILE": "/dev/null", "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"},
                  timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["resolved"]["pinlib"] == "2.0"
    by_uv = [line for line in (ran.read_text().splitlines() if ran.exists() else []) if line.startswith("uv ")]
    assert by_uv == []


def test_one_source_for_every_variant_is_asked_once_when_the_answer_already_fits(tmp_path: Path) -> None:
    """pypi.org's way: one index, one unlabelled torch per release. uv's first answer (torch
    2.8.0, the package's pin, under the variant the newest release asked for) already holds the
    better variant's constraints (cu128 for 2.8.0 on driver 570): not asked again (issue 37: 0.7 s
    of a 1.5 s project resolve against pypi.org), and the plan is the better variant's."""
    wheels = tmp_path / "w"
    write_index(tmp_path / "idx", [make_wheel(wheels, "pinlib", "1.0", ["torch==2.8.0"]),
                                      *(make_wheel(wheels, "torch", v) for v in ("2.8.0", "2.9.0"))])
    with serve_dir(tmp_path) as url:
        out = run_cli("resolve", "--json", "--index-url", f"{url}/idx/simple", "--torch-index-url", f"{url}/idx/simple",
                      "--allow-insecure-index", *H100_HOST, "pinlib==1.0", env={"PIP_CONFIG_FILE": "/dev/null"},
                      timeout=300)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert (plan["torch"], plan["variant"], plan["resolved"]["pinlib"]) == ("2.8.0", "cu128", "1.0"), plan
    asked = [line for line in out.stderr.splitlines() if "uv: the whole project" in line]
    assert len(asked) == 1, out.stderr
