"""`torchfit matrix check` against a site's `file://` mirror (the recorded download.pytorch.org
pages written as a PEP 503 tree, tests/support/indexes.py), the site configuration, and the
known findings a site accepts (`--known FILE`, matrixcheck/known.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.indexes import SMALL_MATRIX, write_pypi_tree, write_pytorch_tree
from torchfit.matrixcheck.known import load_known

CHECK = ("matrix", "check", "--matrix", str(SMALL_MATRIX), "--backoff", "0", "--timeout", "5")
REPO = Path(__file__).resolve().parents[2]
CP312 = "torch-2.8.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64"
REAL = ("matrix", "check", "--backoff", "0", "--timeout", "5")


def _drop_cp312(page: str) -> str:
    return "\n".join(line for line in page.splitlines() if CP312 not in line) + "\n"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return tmp_path


def check(site: Path, *args: str, matrix: tuple[str, ...] = CHECK, **env: str) -> tuple[int, str, str]:
    """`torchfit matrix check ARGS` (of the small matrix, or `matrix=REAL` the package's) as a real
    process; no site configuration of this machine's or user's reaches it (its HOME and XDG
    directories are the test's), `env` laid over."""
    base = {k: v for k, v in os.environ.items() if k not in ("TORCHFIT_CONFIG", "TORCHFIT_TORCH_INDEX_URL")}
    base.update(HOME=str(site / "home"), XDG_CONFIG_HOME=str(site / "home" / ".config"),
                XDG_CONFIG_DIRS=str(site / "etc-xdg"), XDG_CACHE_HOME=str(site / "cache"), **env)
    done = run_cli(*matrix, *args, base_env=base)
    return done.returncode, done.stdout, done.stderr


def test_a_file_mirror_is_read_and_agrees(site: Path) -> None:
    url = write_pytorch_tree(site / "mirror")
    code, out, err = check(site, "--index-url", url, "--json")
    assert code == 0, out + err
    data = json.loads(out)
    assert data["ok"] is True and data["builds_checked"] == 2
    assert f"file://{site}/mirror/cu128/torch/" in data["pages"] and f"file://{site}/mirror/torch/" in data["pages"]
    # cu128's cuDNN/NCCL pins were read from the METADATA file on disk and agreed: no note says unchecked
    assert not [f for f in data["findings"] if f["fact"] in ("cudnn", "nccl", "metadata")], data["findings"]


def test_the_site_configuration_names_the_mirror(site: Path) -> None:
    url = write_pytorch_tree(site / "mirror", edit={"cu128-torch": _drop_cp312})
    config = site / "etc-xdg" / "torchfit" / "config.toml"
    config.parent.mkdir(parents=True)
    # a path, as a site writes it: read as file://, as install reads it
    config.write_text(f'torch-index-url = "{site}/mirror/{{variant}}"\n')
    code, out, _ = check(site)
    assert code == 1, out
    assert "DRIFT torch 2.8.0 cu128" in out and "CPython 3.12 on x86_64" in out
    assert f"against file://{site}/mirror/{{variant}}" in out
    # the environment outranks the files, as for every command
    code, out, _ = check(site, TORCHFIT_TORCH_INDEX_URL=url.replace("/mirror/", "/elsewhere/"))
    assert code == 1 and "has no torch page" in out and f"{site}/elsewhere/cu128/torch/" in out


def test_pypi_is_the_site_configurations_index_url(site: Path) -> None:
    """--pypi reads the files' index-url (the site's PyPI mirror) unless --pypi-url names another."""
    url = write_pypi_tree(site / "pypi")
    config = site / "site.toml"
    config.write_text(f'index-url = "{url}"\n')
    code, out, err = check(site, "--pypi", "--json", TORCHFIT_CONFIG=str(config))
    assert code == 0, out + err
    data = json.loads(out)
    assert data["ok"] is True and data["builds_checked"] == 1 and data["target"].startswith(f"{url} (PyPI-default")
    assert f"{url}/torch/" in data["pages"]
    # the METADATA file on disk was read and its pins agreed with the matrix
    assert not [f for f in data["findings"] if f["fact"] in ("cudnn", "nccl", "metadata")], data["findings"]
    code, out, _ = check(site, "--pypi", "--pypi-url", f"file://{site}/elsewhere", TORCHFIT_CONFIG=str(config))
    assert code == 1 and f"file://{site}/elsewhere/torch/" in out, out


def _known(path: Path, *entries: dict[str, str]) -> str:
    path.write_text("".join("[[finding]]\n" + "".join(f'{k} = "{v}"\n' for k, v in e.items()) + "\n"
                            for e in entries))
    return str(path)


CP312_KNOWN = {"fact": "python", "package": "torch", "version": "2.8.0", "variant": "cu128",
               "reason": "the mirror keeps no cp312 build"}


def test_a_known_finding_is_reported_and_does_not_fail(site: Path) -> None:
    url = write_pytorch_tree(site / "mirror", edit={"cu128-torch": _drop_cp312})
    known = _known(site / "known.toml", CP312_KNOWN)
    code, out, err = check(site, "--index-url", url, "--known", known)
    assert code == 0, out + err
    assert "known torch 2.8.0 cu128: the matrix claims CPython 3.12" in out and "(the mirror keeps no cp312 build)" in out
    assert "DRIFT" not in out and ", 1 known)" in out
    code, out, _ = check(site, "--index-url", url, "--known", known, "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["drift"] == 0
    assert [(k["fact"], k["package"], k["version"], k["reason"]) for k in data["known"]] == [
        ("python", "torch", "2.8.0", "the mirror keeps no cp312 build")]


def test_new_drift_still_fails_beside_a_known_one(site: Path) -> None:
    def drop_vision(page: str) -> str:
        return "\n".join(line for line in page.splitlines() if "torchvision-0.23.0" not in line) + "\n"

    url = write_pytorch_tree(site / "mirror", edit={"cu128-torch": _drop_cp312, "cu128-torchvision": drop_vision})
    known = _known(site / "known.toml", CP312_KNOWN)
    code, out, _ = check(site, "--index-url", url, "--known", known, "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and len(data["known"]) == 1
    assert [(f["fact"], f["package"], f["version"]) for f in data["findings"] if f["level"] == "drift"] == [
        ("torchvision", "torchvision", "0.23.0")]


def test_a_known_finding_that_no_longer_occurs_is_stale(site: Path) -> None:
    url = write_pytorch_tree(site / "mirror")  # the cp312 wheel is back
    other = {"fact": "python", "package": "torch", "version": "2.1.0", "reason": "not checked this run"}
    known = _known(site / "known.toml", CP312_KNOWN, other)
    code, out, _ = check(site, "--index-url", url, "--known", known)
    assert code == 0, out
    assert f"STALE {site}/known.toml:finding[0]: python torch 2.8.0 no longer occurs" in out
    assert "2.1.0" not in out  # a release the run did not check is not called stale
    code, out, _ = check(site, "--index-url", url, "--known", known, "--json")
    assert [s["version"] for s in json.loads(out)["stale"]] == ["2.8.0"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[[finding]]\nfact = "python"\npackage = "torch"\nversion = "2.8.0"\n', "reason must be a non-empty string"),
        ('[[finding]]\nfact = "python"\npackage = "torch"\nversion = "2.8.0"\nreason = "x"\nwhy = "y"\n',
         "unknown key 'why'"),
        ("finding = 3\n", "finding must be a list"),
        ("[[finding]\n", "known.toml"),
    ],
)
def test_a_bad_known_file_is_one_line_exit_2(site: Path, text: str, needle: str) -> None:
    path = site / "known.toml"
    path.write_text(text)
    code, _, err = check(site, "--known", str(path))
    assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_the_repos_known_findings_are_the_documented_four() -> None:
    """The nightly's file (.github/workflows/nightly.yml passes it) loads, and names the companions
    docs/matrix-maintenance.md lists, each the pairing of a PyPI-default 2.5 row of the matrix."""
    from torchfit.cache import load_matrix

    known = load_known(str(REPO / ".github" / "matrix-known-findings.toml"))
    assert {(k.package, k.version) for k in known} == {
        ("torchvision", "0.20.0"), ("torchvision", "0.20.1"), ("torchaudio", "2.5.0"), ("torchaudio", "2.5.1")}
    pairs = {(n, v) for b in load_matrix(None).builds if b.pypi_default
             for n, v in (("torchvision", b.torchvision), ("torchaudio", b.torchaudio))}
    assert {(k.package, k.version) for k in known} <= pairs
    assert all(k.fact == k.package and k.reason for k in known)
    assert "--known .github/matrix-known-findings.toml" in (REPO / ".github" / "workflows" / "nightly.yml").read_text()


def _pypi_25_tree(root: Path) -> str:
    """A PyPI mirror (PEP 503 on disk) as PyPI is for the matrix's 2.5 rows: torch 2.5.0/2.5.1
    wheels for every CPython the matrix claims, with METADATA pinning its cuDNN and NCCL;
    torchvision 0.20.x and torchaudio 2.5.x without cp313 wheels (what docs/matrix-maintenance.md
    reports of the real PyPI on 2026-11-30). Built from the matrix itself."""
    from torchfit.cache import load_matrix

    builds = [b for b in load_matrix(None).builds if b.pypi_default and str(b.torch).startswith("2.5.")]
    assert {str(b.torch) for b in builds} == {"2.5.0", "2.5.1"}
    pages: dict[str, list[str]] = {"torch": [], "torchvision": [], "torchaudio": []}
    (root / "files").mkdir(parents=True)
    for b in builds:
        for major, minor in b.pythons_for("x86_64"):
            tag = f"cp{major}{minor}"
            name = f"torch-{b.torch}-{tag}-{tag}-manylinux1_x86_64.whl"
            pages["torch"].append(name)
            marker = 'platform_system == "Linux" and platform_machine == "x86_64"'
            (root / "files" / f"{name}.metadata").write_text(
                f"Metadata-Version: 2.1\nName: torch\nVersion: {b.torch}\n"
                f"Requires-Dist: nvidia-cudnn-cu12=={b.cudnn}; {marker}\n"
                f"Requires-Dist: nvidia-nccl-cu12=={b.nccl}; {marker}\n")
            if (major, minor) != (3, 13):
                pages["torchvision"].append(f"torchvision-{b.torchvision}-{tag}-{tag}-manylinux1_x86_64.whl")
                pages["torchaudio"].append(f"torchaudio-{b.torchaudio}-{tag}-{tag}-manylinux1_x86_64.whl")
    for project, names in pages.items():
        (root / project).mkdir()
        (root / project / "index.html").write_text(
            "".join(f'<a href="../files/{n}#sha256={"0" * 64}">{n}</a><br/>\n' for n in names))
    return f"file://{root}"


def test_the_nightlys_known_file_accepts_exactly_the_four_findings(site: Path) -> None:
    """The identities in .github/matrix-known-findings.toml are the ones `matrix check --pypi` gives
    the documented findings: all four known, nothing stale, exit 0; without the file, exit 1 on them."""
    args = ("--pypi", "--torch", "2.5", "--pypi-url", _pypi_25_tree(site / "pypi"), "--json")
    code, out, err = check(site, *args, matrix=REAL)
    assert code == 1, out + err
    drift = [(f["fact"], f["package"], f["version"]) for f in json.loads(out)["findings"] if f["level"] == "drift"]
    assert sorted(drift) == [("torchaudio", "torchaudio", "2.5.0"), ("torchaudio", "torchaudio", "2.5.1"),
                             ("torchvision", "torchvision", "0.20.0"), ("torchvision", "torchvision", "0.20.1")]
    code, out, err = check(site, *args, "--known", str(REPO / ".github" / "matrix-known-findings.toml"), matrix=REAL)
    data = json.loads(out)
    assert code == 0, out + err
    assert data["ok"] is True and data["drift"] == 0 and len(data["known"]) == 4 and data["stale"] == []
