"""compat/wheelfit.py: the host fact (glibc, Python ABI, machine, OS) that rules out every
wheel of a release, judged from real filenames (PyPI's xformers file lists, recorded in
tests/data/projects/pypi/xformers/files.txt), and uv's words read for the releases it names."""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version

from torchfit.compat.wheelfit import (
    WheelTarget,
    judge_wheels,
    misfits,
    no_wheel_releases,
    wanted_by,
)

FILES = (Path(__file__).resolve().parents[1] / "data" / "projects" / "pypi" / "xformers" / "files.txt") \
    .read_text("utf-8").split()
X32 = [f for f in FILES if "0.0.32.post2" in f]
X29 = [f for f in FILES if "0.0.29.post3" in f]
# uv 0.13.9's refusal for xformers==0.0.32.post2 on a glibc 2.17 target (measured: tests/test_planning.py)
UV_GLIBC = ("Because xformers==0.0.32.post2 has no wheels with a matching platform tag (e.g., "
            "`manylinux_2_17_x86_64`) and torchfit-env depends on xformers==0.0.32.post2, we can conclude that "
            "your requirements are unsatisfiable.")


def test_a_glibc_below_every_manylinux_floor_is_named_with_the_floor() -> None:
    got = judge_wheels("xformers", "0.0.32.post2", X32, WheelTarget((3, 11), "x86_64", (2, 17)), "your requirement")
    assert got is not None
    assert got.line == ("xformers 0.0.32.post2 (your requirement): its wheels need glibc >= 2.28 "
                        "(manylinux_2_28_x86_64); this host has glibc 2.17")
    assert "glibc >= 2.28" in got.hint
    # glibc 2.28 exactly meets the floor: nothing to say
    assert judge_wheels("xformers", "0.0.32.post2", X32, WheelTarget((3, 11), "x86_64", (2, 28))) is None


def test_a_python_without_a_wheel_is_named_with_the_abis_there_are() -> None:
    got = judge_wheels("xformers", "0.0.29.post3", X29, WheelTarget((3, 13), "x86_64", (2, 36), pythons=((3, 13),)))
    assert got is not None
    assert got.line == ("xformers 0.0.29.post3: its x86_64 wheels are only for cp39, cp310, cp311, cp312; "
                        "this host's only Python is 3.13 (cp313)")
    several = judge_wheels("xformers", "0.0.29.post3", X29, WheelTarget((3, 13), "x86_64", (2, 36),
                                                                         pythons=((3, 11), (3, 13))))
    assert several is not None and "the Python tried is 3.13 (cp313) (this host also has 3.11)" in several.line
    assert judge_wheels("xformers", "0.0.29.post3", X29, WheelTarget((3, 12), "x86_64", (2, 36))) is None
    # abi3 serves every later CPython, never a free-threaded one (packaging.tags)
    assert judge_wheels("xformers", "0.0.32.post2", X32, WheelTarget((3, 13), "x86_64", (2, 36))) is None
    ft = judge_wheels("xformers", "0.0.32.post2", X32, WheelTarget((3, 13), "x86_64", (2, 36), True))
    assert ft is not None and "only for cp39-abi3" in ft.line and "cp313t, free-threaded" in ft.line


def test_another_machine_or_os_is_named() -> None:
    aarch = judge_wheels("x", "1.0", ["x-1.0-cp39-abi3-manylinux_2_28_aarch64.whl"],
                         WheelTarget((3, 11), "x86_64", (2, 36)))
    assert aarch is not None and aarch.line == "x 1.0: its Linux wheels are only for aarch64; this host is x86_64"
    win = judge_wheels("x", "1.0", [f for f in X32 if "win" in f], WheelTarget((3, 11), "x86_64", (2, 36)))
    assert win is not None and "only for win_amd64; this host is Linux x86_64" in win.line
    musl = judge_wheels("x", "1.0", ["x-1.0-py3-none-musllinux_1_2_x86_64.whl"], WheelTarget((3, 11), "x86_64"))
    assert musl is not None and "musl libc" in musl.line
    # a pure wheel fits anywhere; an sdist alone is not a wheel-fit refusal
    assert judge_wheels("x", "1.0", ["x-1.0-py3-none-any.whl"], WheelTarget((3, 11), "aarch64", (2, 17))) is None
    assert judge_wheels("x", "1.0", ["x-1.0.tar.gz"], WheelTarget((3, 11), "x86_64", (2, 17))) is None


def test_uvs_words_name_the_release_and_who_wanted_it() -> None:
    assert no_wheel_releases(UV_GLIBC) == [("xformers", "==0.0.32.post2")]
    assert wanted_by(UV_GLIBC, "xformers") == ["torchfit-env"]
    down = ("Because xformers==0.0.32.post2 has no wheels with a matching platform tag and all versions of appx "
            "depend on xformers==0.0.32.post2, we can conclude that all versions of appx cannot be used.")
    assert wanted_by(down, "xformers") == ["appx"]
    assert no_wheel_releases("Because nosuchpkg was not found in the package registry") == []
    # an sdist beside the wheels under --no-build (uv 0.13.9), and a range
    assert no_wheel_releases("Because xformers==0.0.32.post2 has no usable wheels and ...") == [
        ("xformers", "==0.0.32.post2")]
    assert no_wheel_releases("all versions of xformers>=0.0.30,<0.1 have no wheels with a matching platform tag") == [
        ("xformers", ">=0.0.30,<0.1")]
    files = [(Version("0.0.32.post2"), f) for f in X32]
    got = misfits(UV_GLIBC, lambda name: files if name == "xformers" else [], WheelTarget((3, 11), "x86_64", (2, 17)),
                  lambda name, who: "your requirement" if who == "torchfit-env" else who)
    assert [m.line.split(":")[0] for m in got] == ["xformers 0.0.32.post2 (your requirement)"]
