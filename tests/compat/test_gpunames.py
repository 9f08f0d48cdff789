"""compat/gpunames.py: the GPU-name table (data/gpus.toml) for drivers without compute_cap."""

from __future__ import annotations

import pytest

from torchfit.compat.gpunames import find_capability, load_gpu_names, parse_gpu_names
from torchfit.compat.versions import Arch
from torchfit.errors import MatrixError


def test_gpu_table_covers_the_common_parts() -> None:
    table = load_gpu_names()
    for cc in table.values():
        Arch.parse(cc)
    expect = {
        "Tesla K80": "3.7",
        "Tesla P100-SXM2-16GB": "6.0",
        "Tesla V100-SXM2-32GB": "7.0",
        "Tesla T4": "7.5",
        "NVIDIA A100-SXM4-80GB": "8.0",
        "NVIDIA A100 80GB PCIe": "8.0",
        "NVIDIA A10": "8.6",
        "NVIDIA A10G": "8.6",
        "NVIDIA A30": "8.0",
        "NVIDIA A40": "8.6",
        "NVIDIA L4": "8.9",
        "NVIDIA L40S": "8.9",
        "NVIDIA H100 80GB HBM3": "9.0",
        "NVIDIA H200": "9.0",
        "NVIDIA GH200 480GB": "9.0",
        "NVIDIA B200": "10.0",
        "NVIDIA GB200": "10.0",
        "NVIDIA GeForce RTX 2080 Ti": "7.5",
        "NVIDIA GeForce RTX 3090": "8.6",
        "NVIDIA GeForce RTX 4090": "8.9",
        "NVIDIA GeForce RTX 5090": "12.0",
        "GeForce GTX 1080 Ti": "6.1",
        "TITAN V": "7.0",
        "NVIDIA RTX A6000": "8.6",
        "NVIDIA RTX 6000 Ada Generation": "8.9",
        "Quadro RTX 6000": "7.5",
        "Orin (nvgpu)": "8.7",
        "NVIDIA Thor": "11.0",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition": "12.0",
        "NVIDIA GB10": "12.1",
    }
    got = {name: find_capability(name, table) for name in expect}
    assert got == expect
    assert find_capability("NVIDIA A1000", table) is None  # "A10" must not cover it
    assert find_capability("", table) is None


def test_gpu_table_bad_entry_names_its_line() -> None:
    with pytest.raises(MatrixError) as err:
        parse_gpu_names('[capability]\n"NVIDIA H200" = "9.0"\n"Bad GPU" = "ninety"\n', "gpus.toml")
    assert err.value.line == 3 and "Bad GPU" in err.value.what

