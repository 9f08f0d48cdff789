"""`compat.served.variant_from_metadata`: what an unlabelled torch wheel is, from its recorded
METADATA (tests/data/projects/pypi/torch, PyPI's torch 2.8.0: README there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchfit.compat.served import variant_from_metadata

TORCH = Path(__file__).resolve().parents[1] / "data" / "projects" / "pypi" / "torch"


@pytest.mark.parametrize(("arch", "variant"), [("x86_64", "cu128"), ("aarch64", "cpu")])
def test_pypis_torch_2_8_0_is_cu128_on_x86_64_and_cpu_on_aarch64(arch: str, variant: str) -> None:
    text = (TORCH / f"torch-2.8.0-cp311-cp311-manylinux_2_28_{arch}.whl.metadata").read_text("utf-8")
    assert variant_from_metadata(text, arch) == variant


@pytest.mark.parametrize(("lines", "said"), [
    (["nvidia-cuda-runtime==13.0.96"], "cu130"),
    (["nvidia-cuda-runtime-cu12==12.6.77; platform_machine == 'x86_64'"], "cu126"),
    (["nvidia-cudnn-cu12==9.10.2.21"], None),  # a CUDA package, no runtime pin: not known, never "cpu"
    (["nvidia-cuda-runtime-cu12>=12"], None),
    (["pytorch-triton-rocm==3.4.0"], None),
    (["filelock", "nvidia-cuda-runtime-cu12==12.8.90; extra == 'cuda'"], "cpu"),  # an extra's lines never count
])
def test_the_cuda_runtime_pin_names_the_variant_and_nothing_else_is_guessed(lines: list[str], said: str | None) -> None:
    text = "Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n" + "".join(f"Requires-Dist: {x}\n" for x in lines)
    assert variant_from_metadata(text, "x86_64") == said
