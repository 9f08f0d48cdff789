"""lock.uv, the one uv adapter: the routing both install and `export --format uv` write, the
`uv pip compile` argv, and uv's pylock output read through the one PEP 751 reader (issue 17:
two generators of the routing, two readers of uv's output whose sdist rules differed)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.support.wheels import make_wheel
from torchfit._backports import tomllib
from torchfit.errors import BadInput
from torchfit.lock.uv import (
    TORCH_INDEX_NAME,
    compile_argv,
    dumps_routing,
    read_uv_lock,
    uv_project,
    uv_routing,
)
from torchfit.lock.uvbin import find_uv
from torchfit.runner import Runner

SHA = "1e61c37477a1626458e36f7b1d82aa5c9b094fa4802892072e49de9c60c4c926"
WHL = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"
# What uv 0.13.9 wrote for `six==1.16.0` from PyPI (uv pip compile --format pylock.toml,
# --python-version 3.11 --python-platform x86_64-manylinux_2_28): the sdist beside the wheel.
UV_SIX = f"""lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "six"
version = "1.16.0"
sdist = {{ url = "https://files.pythonhosted.org/packages/71/39/six-1.16.0.tar.gz", upload-time = 2021-05-05T14:18:18Z, size = 34041, hashes = {{ sha256 = "{SHA}" }} }}
wheels = [{{ url = "https://files.pythonhosted.org/packages/d9/5a/six-1.16.0-py2.py3-none-any.whl", upload-time = 2021-05-05T14:18:17Z, size = 11053, hashes = {{ sha256 = "{WHL}" }} }}]
"""


def test_uv_writes_the_sdist_beside_the_wheel_and_the_lock_keeps_the_wheel_it_installs(tmp_path: Path) -> None:
    path = tmp_path / "pylock.toml"
    path.write_text(UV_SIX + '\n[[packages]]\nname = "only-sdist"\nversion = "1"\n'
                    f'sdist = {{ url = "https://f/only_sdist-1.tar.gz", hashes = {{ sha256 = "{SHA}" }} }}\n')
    six, only = read_uv_lock(str(path))
    assert [(a.kind, a.sha256, a.filename) for a in six.artifacts] == [
        ("wheel", WHL, "six-1.16.0-py2.py3-none-any.whl")]
    assert [(a.kind, a.filename) for a in only.artifacts] == [("sdist", "only_sdist-1.tar.gz")]


def test_a_local_file_without_sha256_is_hashed_a_remote_one_is_left_to_the_caller(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "links", "pure-pkg", "1.0")
    path = tmp_path / "pylock.toml"
    path.write_text('lock-version = "1.0"\n'
                    '[[packages]]\nname = "pure-pkg"\nversion = "1.0"\n'
                    f'archive = {{ path = "links/{wheel.name}" }}\n'
                    '[[packages]]\nname = "remote"\nversion = "2"\n'
                    'wheels = [{ url = "https://f/remote-2-py3-none-any.whl" }]\n')
    local, remote = read_uv_lock(str(path))
    assert local.artifacts[0].kind == "wheel"
    assert local.artifacts[0].sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert remote.artifacts[0].sha256 is None


@pytest.mark.parametrize("body,expect", [
    ('[[packages]]\nname = "x"\nwheels = [{ url = "https://f/x-1-py3-none-any.whl" }]\n', "x has no version"),
    ('[[packages]]\nname = "x"\nversion = "1"\n', "no file for x"),
])
def test_an_unusable_answer_is_one_line(tmp_path: Path, body: str, expect: str) -> None:
    path = tmp_path / "pylock.toml"
    path.write_text('lock-version = "1.0"\n' + body)
    with pytest.raises(BadInput, match=expect):
        read_uv_lock(str(path))


def test_the_routing_is_one_set_of_tables_for_install_and_export() -> None:
    doc = tomllib.loads(uv_project(["torch==2.13.0", "xformers", "pure-pkg"], "https://idx/cu126", ["xformers"]))
    assert doc["tool"]["uv"] == {
        "index": [{"name": TORCH_INDEX_NAME, "url": "https://idx/cu126", "explicit": True}],
        "sources": {"torch": {"index": TORCH_INDEX_NAME}, "xformers": {"index": TORCH_INDEX_NAME}},
    }
    # `export --format uv` appends the same tables after its own [tool.uv] keys.
    text = '[tool.uv]\nenvironments = ["x"]\n\n' + dumps_routing(
        uv_routing("pytorch-cu126", "https://idx/cu126", ["torch"], default_index="https://mirror/simple"))
    assert tomllib.loads(text)["tool"]["uv"] == {
        "environments": ["x"],
        "index": [{"name": "pytorch-cu126", "url": "https://idx/cu126", "explicit": True},
                  {"name": "default", "url": "https://mirror/simple", "default": True}],
        "sources": {"torch": {"index": "pytorch-cu126"}},
    }


def test_a_wheel_page_is_an_explicit_flat_index_for_its_packages_alone() -> None:
    """Issue 33, class 7: PyG's page for the chosen torch build serves torch-scatter and
    torch-sparse only (a page's wheels name no torch: nothing else may come from it)."""
    page = "https://data.pyg.org/whl/torch-2.8.0+cu128.html"
    doc = tomllib.loads(uv_project(["torch==2.8.0", "torch-scatter", "torch-sparse", "pure-pkg"], "https://idx/cu128",
                                   pages={"torch-scatter": page, "torch-sparse": page, "not-asked": page}))
    assert doc["tool"]["uv"] == {
        "index": [{"name": TORCH_INDEX_NAME, "url": "https://idx/cu128", "explicit": True},
                  {"name": "torchfit-page-0", "url": page, "explicit": True, "format": "flat"}],
        "sources": {"torch": {"index": TORCH_INDEX_NAME}, "torch-scatter": {"index": "torchfit-page-0"},
                    "torch-sparse": {"index": "torchfit-page-0"}},
    }


def test_the_compile_argv_is_what_uv_runs(tmp_path: Path) -> None:
    """The argv every `uv pip compile` of torchfit's is built with, run by the real uv over a
    find-links directory: uv resolves through the routing and read_uv_lock reads its answer."""
    uv = find_uv(Runner())
    assert uv is not None, "uv is a dependency of torchfit: it is beside this interpreter"
    links = tmp_path / "links"
    wheel = make_wheel(links, "pure-pkg", "1.0", requires=["helper-dep<2"])
    make_wheel(links, "helper-dep", "1.5")
    make_wheel(links, "helper-dep", "1.2")
    (tmp_path / "torch-index").mkdir()
    project = tmp_path / "project" / "pyproject.toml"
    project.parent.mkdir()
    project.write_text(uv_project(["pure-pkg==1.0"], (tmp_path / "torch-index").as_uri()))
    (tmp_path / "c.txt").write_text("helper-dep<1.5\n")
    out = tmp_path / "pylock.resolved.toml"
    argv = compile_argv(uv, str(project), str(out), python_version="3.11",
                        python_platform="x86_64-manylinux_2_28",
                        options=["--no-config", "--no-index", "--find-links", str(links)],
                        constraints=str(tmp_path / "c.txt"), quiet=True)
    assert argv[:6] == [uv, "pip", "compile", "--format", "pylock.toml", "--no-header"]
    assert argv[-3:] == ["-o", str(out), str(project)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    locked = {d.name: d for d in read_uv_lock(str(out))}
    assert locked["helper-dep"].version == "1.2"  # the constraint reached uv
    assert locked["pure-pkg"].artifacts[0].sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()


# uv 0.13.9's words, measured 2026-12-02 (uv pip compile of each requirement, a local index on 127.0.0.1)
UV_SAID = {
    "404": "error: Failed to download `foo @ http://127.0.0.1:38307/nonexist/foo-1.0-py3-none-any.whl`\n"
           "  cause: Failed to fetch: http://127.0.0.1:38307/nonexist/foo-1.0-py3-none-any.whl\n"
           "  cause: HTTP status client error (404 File not found) for url "
           "(http://127.0.0.1:38307/nonexist/foo-1.0-py3-none-any.whl)\n",
    "missing": "error: Distribution not found at: file:///nonexistent/foo-1.0-py3-none-any.whl\n",
    "not-found": "error: No solution found when resolving dependencies\n  cause: Because needsfl was not found in "
                 "the package registry and x depends on needsfl, we can conclude that your requirements are "
                 "unsatisfiable.\n",
    "torch": "error: No solution found when resolving dependencies\n  cause: Because all versions of bigmeta depend "
             "on torch==9.9 and torchfit-env depends on torch<=2.13.0, we can conclude that your requirements and "
             "all versions of bigmeta are incompatible.\n",
}


def test_classify_failure_puts_a_bad_reference_first_and_knows_when_torch_is_the_cause() -> None:
    from torchfit.lock.uv import classify_failure, names_family, not_found

    assert classify_failure(UV_SAID["404"]) == ("reference", "http://127.0.0.1:38307/nonexist/foo-1.0-py3-none-any.whl")
    assert classify_failure(UV_SAID["missing"]) == ("reference", "file:///nonexistent/foo-1.0-py3-none-any.whl")
    assert classify_failure(UV_SAID["not-found"]) == ("no-solution", None)
    assert not names_family(UV_SAID["not-found"]) and not_found(UV_SAID["not-found"]) == ["needsfl"]
    assert names_family(UV_SAID["torch"]) and not not_found(UV_SAID["torch"])
    assert not names_family("torchfit-env depends on torch-scatter and torchmetrics")
