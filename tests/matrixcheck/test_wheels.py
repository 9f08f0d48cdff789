"""matrixcheck/wheels.py: what a wheel's file name says (tags, glibc floor, variant, Pythons) and the pins
its METADATA carries, following their markers."""

from __future__ import annotations

from tests.support.indexes import body
from torchfit.matrixcheck.wheels import parse_pins, parse_wheel


def test_wheel_tags_and_glibc_floors() -> None:
    from torchfit.index.pages import IndexFile

    def w(name: str):  # type: ignore[no-untyped-def]
        return parse_wheel(IndexFile(name, f"https://h/whl/cpu/{name}"))

    legacy = w("torch-2.0.0-cp311-cp311-manylinux1_x86_64.whl")
    assert str(legacy.glibc) == "2.5"  # the tag's floor; the matrix knows the real one (2.17)
    multi = w("m-1.0-cp311-cp311-manylinux2014_aarch64.manylinux_2_17_aarch64.whl")
    assert multi.arch == "aarch64" and str(multi.glibc) == "2.17"
    plain = w("torch-2.0.1+cu118-cp38-cp38-linux_x86_64.whl")
    assert plain.glibc is None and plain.variant == "cu118" and plain.pythons == {(3, 8)}
    unlabeled = w("torch-2.8.0-cp311-cp311-manylinux_2_28_aarch64.whl")
    assert unlabeled.variant == "cpu"  # from its directory, /whl/cpu/
    anyw = w("torchaudio-2.11.1-py3-none-any.whl")
    assert anyw.covers((3, 14), "aarch64") and anyw.arch == "any"
    assert w("torch-2.8.0-cp313-cp313t-manylinux_2_28_x86_64.whl") is None  # free-threaded only
    assert w("torch-2.8.0.tar.gz") is None and w("garbage.whl") is None


def test_pins_follow_markers() -> None:
    meta = body("pypi.org/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata")
    assert parse_pins(meta) == {"cudnn": "9.10.2.21", "nccl": "2.27.3"}
    assert parse_pins(meta, "aarch64") == {}  # the 2.8.0 pins are marked platform_machine == "x86_64"
    assert parse_pins("Metadata-Version: 2.1\nName: x\n") == {}
