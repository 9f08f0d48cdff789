"""The rules of issue 11, each on its own: cuDNN's GPU floor, the smallest CUDA gap under
minor-version compatibility, refusals grouped over releases, warnings for weak evidence."""

from __future__ import annotations

from typing import Any

import pytest
from packaging.version import Version

from tests.conftest import make_facts
from torchfit.compat.explain import _release_ranges
from torchfit.compat.matrix import parse_matrix
from torchfit.compat.provider import Context
from torchfit.compat.request import Request, parse_requirements
from torchfit.compat.resolver import resolve
from torchfit.compat.rules import check_cudnn, cuda_driver_fit, format_arch_span, host_checks
from torchfit.compat.versions import BuildArch, Dotted
from torchfit.errors import NoCompatibleSet


def _build(matrix: Any, torch: str, variant: str) -> Any:
    return next(b for b in matrix.builds if str(b.torch) == torch and b.variant == variant)


@pytest.mark.parametrize(
    ("torch", "variant", "gpu", "ok", "text"),
    [
        ("2.6.0", "cu124", "sm_37", False, "cuDNN 9.1.0.70 needs compute capability >= 5.0"),  # cuDNN 9 on Kepler
        ("2.0.1", "cu117", "sm_37", True, "cuDNN 8.5.0.96 supports compute capability >= 3.5"),  # cuDNN 8.5: SM 3.5+
        ("2.3.1", "cu118", "sm_37", False, "unknown in the matrix, so held to the strictest floor"),
        ("2.6.0", "cu124", "sm_52", True, "supports compute capability >= 5.0"),  # Maxwell is cuDNN 9's floor
    ],
)
def test_cudnn_gpu_floor(matrix: Any, torch: str, variant: str, gpu: str, ok: bool, text: str) -> None:
    check = check_cudnn(_build(matrix, torch, variant), make_facts(driver="470.82.01", gpus=[gpu]), matrix)
    assert check.ok is ok and text in check.text, check.text
    if not ok:
        assert check.category == "gpu" and "is below it" in check.group


def test_cudnn_floor_ignores_hosts_without_nvidia_gpus(matrix: Any) -> None:
    assert check_cudnn(_build(matrix, "2.6.0", "cu124"), make_facts(gpus=["gfx942"]), matrix).ok


def test_arch_span_says_whether_ptx_is_there() -> None:
    assert format_arch_span(tuple(BuildArch.parse(a) for a in "5.0;6.0;9.0".split(";"))) == "5.0\u20139.0, no PTX"
    assert format_arch_span((BuildArch.parse("7.5"), BuildArch.parse("12.0+PTX"))) == "7.5\u201312.0, PTX for 12.0"


def test_release_ranges_split_at_gaps() -> None:
    vs = [Version(v) for v in ("2.6.0", "2.7.0", "2.7.1", "2.8.0", "2.10.0", "2.12.0", "2.13.0")]
    assert _release_ranges(vs) == "2.6\u20132.8, 2.10, 2.12\u20132.13"


def test_mvc_only_variants_order_by_smallest_cuda_gap(matrix: Any) -> None:
    # 580.65.06 is below the 13.0 (580.95.05) and 13.2 (595.71.05) toolkit floors, above 12.6's.
    ctx = Context([make_facts(driver="580.65.06", gpus=["sm_90"])], Request(), matrix)
    order = [b.variant for b in ctx.ordered if str(b.torch) == "2.14.1" and b.kind == "cuda"]
    assert order == ["cu126", "cu130", "cu132"]  # full support first, then the smaller gap
    # With the full toolkit floor of both met, the newer CUDA comes first again.
    ctx = Context([make_facts(driver="600.10", gpus=["sm_90"])], Request(), matrix)
    order = [b.variant for b in ctx.ordered if str(b.torch) == "2.14.1" and b.kind == "cuda"]
    assert order == ["cu132", "cu130", "cu126"]


def test_no_gap_reason_when_the_driver_fully_supports_the_pick(matrix: Any) -> None:
    plan = resolve([make_facts(driver="600.10", gpus=["sm_120"])],
                   Request(requirements=parse_requirements(["torch<2.15"])), matrix)
    assert plan.variant == "cu132"
    assert not any("smallest CUDA gap" in r for r in plan.reasons)


def test_forced_variant_refusal_is_grouped_per_build_line(matrix: Any) -> None:
    host = make_facts(driver="580.159.04", gpus=["NVIDIA GeForce RTX 5080=sm_120"])
    with pytest.raises(NoCompatibleSet) as info:
        resolve([host], Request(variant="cu118"), matrix)
    lines = info.value.conflicts
    # cu118 of 2.7 has an unknown arch list, 2.0-2.6 lack sm_120: two groups, both named.
    assert any(line.startswith("cu118 builds of torch 2.0\u20132.6 have no sm_120 code: arch list 3.7\u20139.0")
               for line in lines), lines
    assert any("cu118 builds of torch 2.7 have an unknown x86_64 arch list" in line for line in lines), lines


WEAK = """\
schema = 1
[sources]
"X" = "a test source"
"S" = "2ry: a scrape"
[[series]]
torch = ["2.8.0"]
torchvision = ["0.23.0"]
torchaudio = ["2.8.0"]
python = ["3.12"]
glibc = "2.28"
source = { python = "X", glibc = "X", companions = "X" }
[[series.variant]]
name = "rocm6.4"
rocm = "6.4"
arch = "gfx942"
platforms = ["x86_64"]
source = { exists = "X", arch = "X" }
evidence = { arch = "LABEL" }
[[rocm]]
version = "6.4"
source = "X"
"""


@pytest.mark.parametrize(("label", "warned"), [("cycle", True), ("secondary", True), ("primary", False),
                                               ("measured", False)])
def test_weak_evidence_is_used_with_a_warning(label: str, warned: bool) -> None:
    m = parse_matrix(WEAK.replace("LABEL", label))
    plan = resolve([make_facts(driver=None, gpus=["gfx942"])], Request(), m)
    assert plan.variant == "rocm6.4"
    hits = [w for w in plan.warnings if "its gfx target list rests on" in w]
    assert bool(hits) is warned, plan.warnings
    if warned:
        assert "(X)" in hits[0] and {"cycle": "cycle-level", "secondary": "secondary evidence"}[label] in hits[0]


def test_describe_host_lists_pythons_in_numeric_order() -> None:
    """The host line reads 3.6 … 3.13, not text order (3.13 before 3.6)."""
    from torchfit.compat.explain import describe_host

    line = describe_host(make_facts(pythons=["3.13.0", "3.6.15", "3.9.18", "2.7.18", "3.10.13"]))
    assert "Python 2.7.18, 3.6.15, 3.9.18, 3.10.13, 3.13.0 " in line


def test_describe_host_names_every_source_of_a_missing_python() -> None:
    """issue 35: the host line said "(pyenv)" alone; uv's managed Pythons are a source too."""
    from dataclasses import replace

    from torchfit.compat.explain import describe_host
    from torchfit.compat.facts import UvPythons

    host = make_facts(pythons=["3.11.7"], pyenv=["3.12.1"])
    assert describe_host(host).endswith("Python 3.11.7 (pyenv; no uv Pythons)"), describe_host(host)
    offered = replace(host, pyenv=None, uv_pythons=UvPythons("/usr/bin/uv", ("3.14.0t", "3.9.23", "3.13.5", "3.10.18")))
    assert describe_host(offered).endswith("Python 3.11.7 (no pyenv; uv offers 3.9 to 3.14)"), describe_host(offered)


# --- #29: one judgement per GPU model ---------------------------------------------------------


def _cpu_seconds(fn):  # type: ignore[no-untyped-def]
    import time

    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


@pytest.mark.parametrize("driver", ["580.159.04", "535.54.03", "450.80.02"])
def test_1024_identical_gpus_resolve_as_fast_as_one_and_say_it_once(matrix, driver: str) -> None:  # type: ignore[no-untyped-def]
    """A 1024-GPU --facts file took ~15 s (every rule looped over every GPU, per build);
    now each distinct model is judged once. The answer is the one for a single GPU, and
    the text names the model once, counted (defect #29 of the 2026-11 attack, issue 13)."""
    one = make_facts(driver=driver, gpus=["NVIDIA H100 80GB HBM3=sm_90"])
    many = make_facts(driver=driver, gpus=["NVIDIA H100 80GB HBM3=sm_90"] * 1024)

    def run(facts):  # type: ignore[no-untyped-def]
        try:
            return resolve([facts], Request(), matrix)
        except NoCompatibleSet as exc:
            return exc

    run(one)  # warm the caches (the matrix's, not the host's)
    a, t_one = _cpu_seconds(lambda: run(one))
    b, t_many = _cpu_seconds(lambda: run(many))
    assert t_many < 1.0, f"{t_many:.2f} s of CPU for 1024 GPUs"
    assert t_many < 5 * t_one + 0.3, (t_one, t_many)
    assert type(a) is type(b)
    if isinstance(a, NoCompatibleSet):
        assert len(a.conflicts) == len(b.conflicts)  # type: ignore[union-attr]
        text = str(b)
        assert "1024\u00d7 NVIDIA H100 80GB HBM3 (sm_90)" in text or "1024" in text
        assert text.count("NVIDIA H100 80GB HBM3") < 40, text[:500]
    else:
        assert (a.torch, a.variant) == (b.torch, b.variant)  # type: ignore[union-attr]
        assert len(a.warnings) == len(b.warnings)  # type: ignore[union-attr]


def test_mixed_gpus_are_judged_per_model(matrix) -> None:  # type: ignore[no-untyped-def]
    """512 Kepler + 512 Hopper: the Kepler GPUs still rule out what they rule out (cuDNN 9
    needs sm_50+), named once with their count (defect #29 of the 2026-11 attack, issue 13)."""
    facts = make_facts(gpus=["Tesla K80=sm_37", "NVIDIA H100=sm_90"] * 512)
    with pytest.raises(NoCompatibleSet) as err:
        _cpu_seconds(lambda: resolve([facts], Request(), matrix))
    text = str(err.value) + " ".join(str(c) for c in err.value.conflicts)
    assert "512\u00d7 Tesla K80 (sm_37)" in text


# --- host_warnings: a host kind's caveats beside its refusals (issue 28, item 9) ---------------


def test_host_warnings_say_wsl_for_a_cuda_build_only(matrix: Any) -> None:
    import dataclasses

    from torchfit.compat.rules import host_warnings

    wsl = dataclasses.replace(make_facts(gpus=["sm_90"]), wsl=True)
    cuda, cpu = _build(matrix, "2.6.0", "cu124"), _build(matrix, "2.6.0", "cpu")
    assert any(w.startswith("WSL 2: the NVIDIA driver is the Windows host's") for w in host_warnings(cuda, wsl, matrix))
    assert host_warnings(cpu, wsl, matrix) == []
    assert host_warnings(cuda, make_facts(gpus=["sm_90"]), matrix) == []


def test_host_warnings_say_minor_version_compatibility_and_ptx(matrix: Any) -> None:
    from torchfit.compat.rules import host_warnings

    old_driver = host_warnings(_build(matrix, "2.6.0", "cu124"), make_facts(driver="525.60.13", gpus=["sm_90"]), matrix)
    assert len(old_driver) == 1 and "only through CUDA minor-version compatibility" in old_driver[0]
    ptx = host_warnings(_build(matrix, "2.10.0", "cu130"), make_facts(gpus=["sm_130"]), matrix)
    assert any("through PTX JIT" in w for w in ptx), ptx


def test_cuda_driver_fit_on_a_cuda_version(matrix) -> None:  # type: ignore[no-untyped-def]
    info = matrix.cuda_info("12.8")
    assert info is not None and info.mvc_driver is not None and info.toolkit_driver is not None
    assert cuda_driver_fit(info, info.toolkit_driver) == "full"
    assert cuda_driver_fit(info, info.mvc_driver) == "mvc"
    assert cuda_driver_fit(info, Dotted.parse("400.1")) == "too-old"
    assert cuda_driver_fit(info, None) == "unknown"
    # A minor the matrix lacks falls back to its family's row.
    assert matrix.cuda_info("12.99") is not None and matrix.cuda_info("99.0") is None


def test_host_checks_is_the_resolvers_list(matrix) -> None:  # type: ignore[no-untyped-def]
    host = make_facts(driver="450.80.02", gpus=["NVIDIA H200=sm_90"])
    cuda = next(b for b in matrix.builds if b.kind == "cuda" and b.cuda and b.cuda.startswith("13"))
    checks = dict(host_checks(cuda, host, matrix, strict_driver=False, want_cpu=False))
    assert list(checks) == ["platform", "glibc", "driver", "gpu-arch", "cudnn"]
    assert not checks["driver"].ok and "needs driver" in checks["driver"].text
