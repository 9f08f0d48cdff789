"""`compat.wheelonly.passed_over`: which release a wheels-only answer passed over (issue 33).

File lists as PyPI's (tests/data/projects/pypi/deepspeed/index.json, recorded) and small ones
that isolate one rule each: uv's pre-release rule, the user's specifier, Requires-Python, a
newer wheel the graph holds back.
"""

from __future__ import annotations

import json
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from torchfit.compat.tags import target_tags
from torchfit.compat.wheelonly import ReleaseFile, exact_torch_pin, passed_over

DEEPSPEED = Path(__file__).resolve().parents[1] / "data" / "projects" / "pypi" / "deepspeed" / "index.json"
TAGS = target_tags("3.11", "x86_64", (2, 36))


def files(*names: str, requires_python: str | None = None) -> list[ReleaseFile]:
    out: list[ReleaseFile] = []
    for n in names:
        version = parse_wheel_filename(n)[1] if n.endswith(".whl") else parse_sdist_filename(n)[1]
        out.append((version, n, requires_python))
    return out


def test_deepspeeds_recorded_file_list_passes_over_its_newest_release_for_a_2020_dev_wheel() -> None:
    page = json.loads(DEEPSPEED.read_text())
    listed: list[ReleaseFile] = [(Version(f["filename"].split("-")[1].removesuffix(".tar.gz")), f["filename"],
                                  f.get("requires-python")) for f in page["files"] if not f["yanked"]]
    got = passed_over("deepspeed", Version("0.3.1.dev5"), listed, TAGS, "3.11")
    assert got is not None and got.newer == Version("0.19.8") and got.unasked_pre, got
    # a pin the user wrote holds: the newest it allows
    got = passed_over("deepspeed", Version("0.3.1.dev5"), listed, TAGS, "3.11", SpecifierSet("<0.17"))
    assert got is not None and got.newer == Version("0.16.9"), got


def test_a_newer_wheel_that_fits_means_the_graph_held_it_not_the_wheels() -> None:
    listed = files("x-1.0-py3-none-any.whl", "x-2.0-py3-none-any.whl", "x-2.0.tar.gz")
    assert passed_over("x", Version("1.0"), listed, TAGS, "3.11") is None
    # a wheel for another platform is no wheel here
    listed = files("x-1.0-py3-none-any.whl", "x-2.0-cp311-cp311-win_amd64.whl", "x-2.0.tar.gz")
    got = passed_over("x", Version("1.0"), listed, TAGS, "3.11")
    assert got is not None and got.newer == Version("2.0") and not got.unasked_pre


def test_pre_releases_count_only_as_uv_counts_them() -> None:
    listed = files("x-1.0-py3-none-any.whl", "x-2.0b1.tar.gz")
    assert passed_over("x", Version("1.0"), listed, TAGS, "3.11") is None  # not asked for
    got = passed_over("x", Version("1.0"), listed, TAGS, "3.11", SpecifierSet(">=2.0b1"))  # asked for
    assert got is not None and got.newer == Version("2.0b1")
    assert passed_over("x", Version("1.0"), listed, TAGS, "3.11", allow_pre=True) is not None  # --pre
    # a pre-release wheel taken over an older final sdist: plain uv takes the final release
    got = passed_over("x", Version("2.0b1"), files("x-1.0.tar.gz", "x-2.0b1-py3-none-any.whl"), TAGS, "3.11")
    assert got is not None and got.newer == Version("1.0") and got.unasked_pre


def test_a_source_distribution_for_another_python_is_not_a_release_for_this_one() -> None:
    listed = [*files("x-1.0-py3-none-any.whl"), *files("x-2.0.tar.gz", requires_python=">=3.12")]
    assert passed_over("x", Version("1.0"), listed, TAGS, "3.11") is None
    assert passed_over("x", Version("1.0"), listed, target_tags("3.12", "x86_64", (2, 36)), "3.12") is not None


def test_an_exact_torch_pin_binds_a_binary_to_one_torch() -> None:
    assert exact_torch_pin(["torch==2.12.0", "numpy"]) == "torch==2.12.0"
    assert exact_torch_pin(["torch (==2.3.1)"]) == "torch==2.3.1"
    assert exact_torch_pin(["torch>=2.0.0", "torchvision==0.20.0"]) is None
    assert exact_torch_pin(["torch==2.*", "not a requirement ("]) is None
