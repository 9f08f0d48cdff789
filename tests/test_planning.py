"""`planning.make_plan` through `torchfit resolve`: one solver (real uv) for the whole project,
the torch builds that fit the host *and* that the source serves (issue 24, one test per class).

Every source is built here: tiny torch wheels with real names and METADATA (a PEP 503 tree per
variant, or a flat directory), the project's packages in a find-links directory, and uv run for
real, offline (`--offline`: file:// sources only). Recorded PyPI METADATA of real releases
(tests/data/projects/pypi) becomes tiny wheels whose Requires-Dist are the recorded lines on the
torch family and CUDA packages (the rest would need the whole of PyPI).
"""

from __future__ import annotations

import http.server
import json
import re
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from tests.support.cli import run_cli
from tests.support.fakehost import alive
from tests.support.wheels import hostile_sdist, make_sdist, make_wheel, write_index

PROJECTS = Path(__file__).resolve().parent / "data" / "projects" / "pypi"
CP311 = "cp311-cp311-manylinux_2_28_x86_64"
CPU_HOST = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "glibc=2.36", "--assume", "arch=x86_64")
# An H100 host on driver 570: CUDA 12.x builds run (cu126: minor-version compatibility), CUDA 13 does not.
DRIVER_570 = ("--assume", "gpu=sm_90", "--assume", "driver=570.124.06", "--assume", "python=3.11",
              "--assume", "glibc=2.36", "--assume", "arch=x86_64")


def torch_tree(root: Path, variant: str, versions: list[str], tag: str = CP311, *, extra: list[Path] = ()) -> Path:
    """root/<variant>/simple: a PEP 503 tree of torch wheels `version+variant` (and `extra` wheels)."""
    wheels = [make_wheel(root / "wheels" / variant, "torch", f"{v}+{variant}", tag=tag) for v in versions]
    return write_index(root / variant, [*wheels, *extra])


def resolve(*args: str, ok: bool = True) -> dict:
    proc = run_cli("resolve", "--json", "--offline", *args, timeout=180)
    assert (proc.returncode == 0) == ok, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def wheel_from_record(directory: Path, record: Path, keep: re.Pattern[str], extras: tuple[str, ...] = (),
                      tag: str = "py3-none-any") -> Path:
    """A tiny wheel whose METADATA is the recorded file's name, version, Requires-Python and the
    Requires-Dist lines `keep` matches (the torch family, CUDA packages), as PyPI served them;
    lines of an extra only for the `extras` named."""
    text = record.read_text("utf-8")
    name = re.search(r"^Name: (.+)$", text, re.M).group(1).strip()  # type: ignore[union-attr]
    version = re.search(r"^Version: (.+)$", text, re.M).group(1).strip()  # type: ignore[union-attr]
    rp = re.search(r"^Requires-Python: (.+)$", text, re.M)
    requires = []
    for line in re.findall(r"^Requires-Dist: (.+)$", text, re.M):
        extra = re.search(r"extra == \"([^\"]+)\"", line)
        if keep.search(line) and (extra is None or extra.group(1) in extras):
            requires.append(line.strip())
    return make_wheel(directory, name, version, requires, rp.group(1).strip() if rp else None, tag=tag)


# -- class 1: a pin further down ----------------------------------------------------------


def test_a_torch_pin_two_levels_down_decides_the_plan(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.12.0", "2.13.0", "2.15.0"])
    links = tmp_path / "links"
    make_wheel(links, "trlx", "1.0", ["vllmx"])           # pins nothing itself
    make_wheel(links, "vllmx", "1.0", ["torch==2.13.0"])  # pins torch
    make_wheel(links, "vllmx", "2.0", ["torch==2.99.0"])  # a torch no source has
    out = resolve(*CPU_HOST, "trlx", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert out["torch"] == "2.13.0" and out["variant"] == "cpu", out
    assert out["resolved"]["vllmx"] == "1.0" and out["resolved"]["torch"] == "2.13.0+cpu", out
    assert any("2.15.0" in r and "the project's dependencies need another torch" in r for r in out["ruled_out"])
    assert not any("required by trlx" in r for r in out["reasons"]), out["reasons"]  # never blamed on trlx
    # --explain asks uv why not 2.15.0, and shows its answer (the package that holds it)
    proc = run_cli("resolve", "--offline", "--explain", *CPU_HOST, "trlx", "--find-links", str(links),
                   "--torch-index-url", index.as_uri(), timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "vllmx" in proc.stdout and "torch==2.13.0" in proc.stdout, proc.stdout


def test_trl_vllm_real_metadata_gets_the_torch_vllm_pins_two_levels_down(tmp_path: Path) -> None:
    # trl 1.16.0 names no torch; its `vllm` extra says vllm<=0.31.0,>=0.22.0 (recorded METADATA), and
    # vllm 0.22.1 pins torch==2.11.0 (0.33.0 pins 2.14.0, outside trl's range). The source has 2.15.0 too.
    family = [make_wheel(tmp_path / "family", "torchaudio", "2.11.0+cpu", tag=CP311),
              make_wheel(tmp_path / "family", "torchvision", "0.26.0+cpu", ["torch==2.11.0"], tag=CP311)]
    index = torch_tree(tmp_path, "cpu", ["2.11.0", "2.14.0", "2.15.0"], extra=family)
    links = tmp_path / "links"
    wheel_from_record(links, next((PROJECTS / "trl").glob("trl-1.16.0*.metadata")), re.compile(r"^vllm\b"), ("vllm",))
    for record in sorted((PROJECTS / "vllm").glob("vllm-0.*.metadata")):
        if "0.22.1" in record.name or "0.33.0" in record.name:
            wheel_from_record(links, record, re.compile(r"^torch(vision|audio)?\b"))
    out = resolve(*CPU_HOST, "trl[vllm]", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert (out["torch"], out["resolved"]["vllm"], out["resolved"]["trl"]) == ("2.11.0", "0.22.1", "1.16.0"), out
    assert out["torchvision"] == "0.26.0" and out["torchaudio"] == "2.11.0", out


def test_sglang_real_metadata_needs_cuda_13_and_gets_its_pins_where_the_driver_runs_it(tmp_path: Path) -> None:
    # sglang 0.5.23 (recorded): torch==2.14.1, torchaudio==2.11.0, torchvision unpinned, cuda-python>=13.0.
    keep = re.compile(r"^(torch(vision|audio)?|cuda-python)\b")
    links = tmp_path / "links"
    wheel_from_record(links, next((PROJECTS / "sglang").glob("sglang-0.5.23*.metadata")), keep)
    make_wheel(links, "cuda-python", "13.0.1")
    make_wheel(links, "cuda-python", "12.9.0")
    for variant, root in (("cu130", tmp_path / "a"), ("cu126", tmp_path / "a")):
        family = [make_wheel(root / "family" / variant, "torchaudio", f"2.11.0+{variant}", tag=CP311),
                  make_wheel(root / "family" / variant, "torchvision", f"0.29.1+{variant}", ["torch>=2.14.1"],
                             tag=CP311)]
        torch_tree(root, variant, ["2.14.1"], extra=family)
    template = (tmp_path / "a" / "{variant}" / "simple").as_uri().replace("%7B", "{").replace("%7D", "}")
    h200 = ("--assume", "gpu=sm_90", "--assume", "driver=580.95.05", "--assume", "python=3.11",
            "--assume", "glibc=2.36", "--assume", "arch=x86_64")
    out = resolve(*h200, "sglang", "--find-links", str(links), "--torch-index-url", template)
    assert (out["torch"], out["variant"], out["torchaudio"]) == ("2.14.1", "cu130", "2.11.0"), out
    assert out["resolved"]["cuda-python"] == "13.0.1", out
    proc = run_cli("resolve", "--offline", "--json", *DRIVER_570, "sglang", "--find-links", str(links),
                   "--torch-index-url", template, timeout=180)
    assert proc.returncode == 1, proc.stdout
    err = json.loads(proc.stdout)
    text = " ".join(err["conflicts"])
    assert "cuda-python" in text and "580" in text, err  # the CUDA 13 package and the driver it needs


# -- class 2: the companion release the plan names is the one installed ------------------------


def test_a_companion_without_a_torch_pin_gets_the_release_built_for_the_chosen_torch(tmp_path: Path) -> None:
    # torchao's METADATA names no torch (0.15.0, 0.18.0: tests/data/projects/pypi/torchao); its binary
    # needs torch 2.9.1 (0.15.0) or >= 2.11 (0.18.0): companions.toml. The source has 2.9.1 only.
    index = torch_tree(tmp_path, "cpu", ["2.9.1"])
    links = tmp_path / "links"
    for record in sorted((PROJECTS / "torchao").glob("torchao-0.1[58]*.metadata")):
        wheel_from_record(links, record, re.compile(r"^torch\b"))
    out = resolve(*CPU_HOST, "torchao", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert out["torch"] == "2.9.1", out
    assert out["resolved"]["torchao"] == "0.15.0", out  # not 0.18.0, which uv alone would take
    # held before uv solves (issue 33), and said
    assert any("torchao 0.15.0: the newest release with a binary for torch 2.9.1" in r and "0.18.0 needs torch>=2.11"
               in r for r in out["reasons"]), out["reasons"]


def test_a_companion_release_built_for_an_older_torch_moves_torch_to_it(tmp_path: Path) -> None:
    # Only torchao 0.15.0 is served (its binary needs torch 2.9.1: companions.toml); the source has
    # 2.9.1 and 2.11.0. uv alone takes 2.11.0 (torchao's METADATA names no torch); torch follows torchao.
    index = torch_tree(tmp_path, "cpu", ["2.9.1", "2.11.0"])
    links = tmp_path / "links"
    wheel_from_record(links, next((PROJECTS / "torchao").glob("torchao-0.15.0*.metadata")), re.compile(r"^torch\b"))
    out = resolve(*CPU_HOST, "torchao", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert (out["torch"], out["resolved"]["torchao"]) == ("2.9.1", "0.15.0"), out
    assert any("torchao 0.15.0: its binary needs torch==2.9.1" in r for r in out["reasons"]), out["reasons"]


# -- class 3: a companion whose METADATA names no torch, beside a newer torch -------------------


def test_vllm_033_pins_torchaudio_2_11_0_beside_torch_2_14_and_gets_it(tmp_path: Path) -> None:
    # vllm 0.33.0's wheel METADATA (recorded): torch==2.14.0, torchaudio==2.11.0, torchvision==0.29.0.
    # torchaudio 2.11.0 names no torch: the METADATA decides, not a pairing table.
    audio = make_wheel(tmp_path / "family", "torchaudio", "2.11.0+cpu", tag=CP311)
    vision = make_wheel(tmp_path / "family", "torchvision", "0.29.0+cpu", ["torch==2.14.0"], tag=CP311)
    index = torch_tree(tmp_path, "cpu", ["2.11.0", "2.14.0", "2.15.0"], extra=[audio, vision])
    links = tmp_path / "links"
    family = re.compile(r"^torch(vision|audio)?\b")
    for record in sorted((PROJECTS / "vllm").glob("vllm-0.*.metadata")):
        if "0.22.1" in record.name or "0.33.0" in record.name:
            wheel_from_record(links, record, family)
    out = resolve(*CPU_HOST, "vllm", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert (out["torch"], out["torchaudio"], out["torchvision"]) == ("2.14.0", "2.11.0", "0.29.0"), out
    assert out["resolved"]["vllm"] == "0.33.0", out
    assert out["packages"] == ["torch", "torchvision", "torchaudio"], out  # what install installs
    # the mirror lacks 2.14.0: the older vllm whose torch it has (0.22.1: torch==2.11.0), never a refusal
    index2 = torch_tree(tmp_path / "m2", "cpu", ["2.11.0", "2.15.0"],
                        extra=[make_wheel(tmp_path / "f2", "torchaudio", "2.11.0+cpu", tag=CP311),
                               make_wheel(tmp_path / "f2", "torchvision", "0.26.0+cpu", ["torch==2.11.0"], tag=CP311)])
    out = resolve(*CPU_HOST, "vllm", "--find-links", str(links), "--torch-index-url", index2.as_uri())
    assert (out["torch"], out["resolved"]["vllm"]) == ("2.11.0", "0.22.1"), out


# -- class 4: CUDA packages the driver cannot run --------------------------------------------


def test_a_release_needing_cuda_13_packages_loses_to_an_older_one_on_a_driver_570_host(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cu126", ["2.13.0", "2.14.0"])
    links = tmp_path / "links"
    make_wheel(links, "kernels", "2.0", ["torch>=2.13", "nvidia-cuda-runtime>=13"])  # a CUDA 13 package
    make_wheel(links, "kernels", "1.0", ["torch>=2.13"])
    make_wheel(links, "nvidia-cuda-runtime", "13.0.96")
    template = (tmp_path / "{variant}" / "simple").as_uri().replace("%7B", "{").replace("%7D", "}")
    out = resolve(*DRIVER_570, "kernels", "--find-links", str(links), "--torch-index-url", template)
    assert out["variant"] == "cu126" and out["resolved"]["kernels"] == "1.0", out
    assert "nvidia-cuda-runtime" not in out["resolved"], out
    # asked for by name, it is refused, and uv's reason names the CUDA package
    proc = run_cli("resolve", "--offline", *DRIVER_570, "kernels==2.0", "--find-links", str(links),
                   "--torch-index-url", template, timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nvidia-cuda-runtime" in proc.stderr, proc.stderr
    assert index.is_dir()


def test_vllm_needs_cuda_13_packages_so_a_driver_570_host_is_refused_with_them_named(tmp_path: Path) -> None:
    # vllm 0.22.1 and 0.33.0 require nvidia-cutlass-dsl[cu13] (their recorded METADATA), whose cu13
    # extra requires nvidia-cutlass-dsl-libs-cu13 (nvidia-cutlass-dsl 4.8.1 on PyPI).
    index = torch_tree(tmp_path, "cu126", ["2.11.0", "2.14.0"])
    links = tmp_path / "links"
    keep = re.compile(r"^(torch\b|nvidia-cutlass-dsl)")
    for record in sorted((PROJECTS / "vllm").glob("vllm-0.*.metadata")):
        if "0.22.1" in record.name or "0.33.0" in record.name:
            wheel_from_record(links, record, keep)
    for version in ("4.5.2", "4.8.0"):
        make_wheel(links, "nvidia-cutlass-dsl", version, [f'nvidia-cutlass-dsl-libs-cu13=={version}; extra == "cu13"'])
        make_wheel(links, "nvidia-cutlass-dsl-libs-cu13", version)
    template = (tmp_path / "{variant}" / "simple").as_uri().replace("%7B", "{").replace("%7D", "}")
    proc = run_cli("resolve", "--offline", *DRIVER_570, "vllm", "--find-links", str(links), "--torch-index-url",
                   template, "--json", timeout=180)
    assert proc.returncode == 1, proc.stdout
    err = json.loads(proc.stdout)
    assert err["reference"] == "no-compatible-set"
    assert "nvidia-cutlass-dsl-libs-cu13" in " ".join(err["conflicts"]), err
    assert index.is_dir()


# -- class 5: prebuilt binaries preferred --------------------------------------------------------


def test_a_package_whose_wheels_stop_at_an_older_torch_leads_the_plan_there(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.12.0", "2.15.0"])
    links = tmp_path / "links"
    make_wheel(links, "extx", "1.0", ["torch==2.12.0"])
    # 2.0 exists only as an sdist (for torch 2.15): with a wheel that fits, no build is planned
    sdist = links / "extx-2.0.tar.gz"
    build = tmp_path / "sdist" / "extx-2.0"
    build.mkdir(parents=True)
    (build / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: extx\nVersion: 2.0\nRequires-Dist: torch==2.15.0\n")
    (build / "setup.py").write_text("raise SystemExit('this build must never run')\n")
    subprocess.run(["tar", "-czf", str(sdist), "-C", str(build.parent), "extx-2.0"], check=True)
    out = resolve(*CPU_HOST, "extx", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert (out["torch"], out["resolved"]["extx"]) == ("2.12.0", "1.0"), out
    assert not any("source distribution" in w for w in out["warnings"]), out["warnings"]
    # the wheel it prefers, and why, is said (issue 33): its exact torch pin binds its binary to one torch
    assert ("extx 1.0: its prebuilt wheel, kept (its METADATA pins torch==2.12.0: a binary built for one torch); "
            "the newer extx 2.0 has only a source distribution") in " ".join(out["reasons"]), out["reasons"]


# -- issue 33, class 1: a version traded for a wheel, never silently ------------------------------

DEEPSPEED = PROJECTS / "deepspeed"


def deepspeed_links(directory: Path) -> str:
    """deepspeed as PyPI lists it (its recorded file list, deepspeed/index.json): a tiny wheel of
    each wheel file, with the recorded torch line of its METADATA (the 2020 0.3.1.devN
    py3-none-any wheels; the win_amd64 ones are never read on Linux), and the newest release as
    PyPI has it, a source distribution only, with the torch line of its recorded PKG-INFO (stated
    statically here: the real one says `Dynamic: requires-dist`, so uv builds it to read it).
    Returns that newest release."""
    page = json.loads((DEEPSPEED / "index.json").read_text())
    torch_line = re.compile(r"^Requires-Dist: (torch\b(?!vision|audio)[^;\n]*)$", re.M)
    for f in page["files"]:
        if f["filename"].endswith(".whl") and not f["yanked"]:
            _, version, tag = f["filename"][: -len(".whl")].split("-", 2)
            record = DEEPSPEED / (f["filename"] + ".metadata")
            requires = torch_line.findall(record.read_text()) if record.is_file() else []
            make_wheel(directory, "deepspeed", version, requires, tag=tag)
    newest = str(max(Version(v) for v in page["versions"]))
    assert not any(f["filename"].startswith(f"deepspeed-{newest}-") for f in page["files"])  # no wheel at all
    make_sdist(directory, "deepspeed", newest, torch_line.findall(
        (DEEPSPEED / f"deepspeed-{newest}.tar.gz.PKG-INFO").read_text()), metadata_version="2.4")
    return newest


def plain_uv(links: Path, torch_wheels: Path, *options: str) -> dict[str, str]:
    """What `uv pip compile` alone answers for `deepspeed` on the CPU_HOST target, offline."""
    import sys

    proc = subprocess.run([str(Path(sys.executable).with_name("uv")), "pip", "compile", "--no-config", "--offline",
                           "--no-index", "--find-links", str(links), "--find-links", str(torch_wheels), *options,
                           "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_36", "-"],
                          input="deepspeed\n", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dict(re.findall(r"^([\w.-]+)==(\S+)$", proc.stdout, re.M))


def test_an_unpinned_package_whose_releases_are_sdists_gets_the_release_plain_uv_takes_and_says_it_builds(
        tmp_path: Path) -> None:
    # Wheels only, uv answers a 2020 development release (0.3.1.devN, the last wheels for Linux);
    # plain uv takes the newest release, which only builds from source. The plan has plain uv's.
    index = torch_tree(tmp_path, "cpu", ["2.13.0", "2.15.0"])
    links = tmp_path / "links"
    newest = deepspeed_links(links)
    plain, wheels = plain_uv(links, tmp_path / "wheels" / "cpu"), plain_uv(links, tmp_path / "wheels" / "cpu",
                                                                           "--no-build")
    assert plain["deepspeed"] == newest and Version(wheels["deepspeed"]).is_devrelease, (plain, wheels)
    out = resolve(*CPU_HOST, "deepspeed", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert (out["torch"], out["resolved"]["deepspeed"]) == ("2.15.0", newest), out
    said = [w for w in out["warnings"] if w.startswith(f"deepspeed {newest} has no wheel for this host")]
    assert said and "builds it from its source distribution" in said[0], out["warnings"]
    assert f"{wheels['deepspeed']} (a development release): `--no-build` takes it" in said[0], said


def test_no_build_keeps_the_wheel_and_says_the_release_it_traded(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0", "2.15.0"])
    links = tmp_path / "links"
    newest = deepspeed_links(links)
    wheels = plain_uv(links, tmp_path / "wheels" / "cpu", "--no-build")["deepspeed"]
    out = resolve("--no-build", *CPU_HOST, "deepspeed", "--find-links", str(links), "--torch-index-url",
                  index.as_uri())
    assert out["resolved"]["deepspeed"] == wheels, out
    assert (f"deepspeed {wheels} (a development release) taken because --no-build: the newest release, {newest}, "
            "has no wheel for this host") in " ".join(out["warnings"]), out["warnings"]


def test_a_pre_release_wheel_kept_because_the_newer_source_cannot_be_solved_is_said_with_uvs_reason(
        tmp_path: Path) -> None:
    # wheels only, uv takes the 1.0b1 wheel over the 2.0 sdist (as it takes deepspeed's 2020 dev wheel);
    # 2.0 needs a package no source has, so its source cannot answer: the wheel stays, said, with why
    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    links = tmp_path / "links"
    make_wheel(links, "betaonly", "1.0b1", ["torch"])
    make_sdist(links, "betaonly", "2.0", ["torch", "nosuchdep"])
    out = resolve(*CPU_HOST, "betaonly", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert out["resolved"]["betaonly"] == "1.0b1", out
    said = [w for w in out["warnings"] if w.startswith("betaonly 1.0b1 (a pre-release) taken for its wheel: the "
                                                       "newest release, 2.0, has no wheel for this host")]
    assert said and "nosuchdep" in said[0], out["warnings"]


# -- class 6: what the sources really serve --------------------------------------------------------


def test_a_mirror_holding_only_an_older_torch_gets_that_torch(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    out = resolve(*CPU_HOST, "--torch-index-url", index.as_uri())  # no project: the source is still read
    assert out["torch"] == "2.13.0" and out["index_url"] == index.as_uri(), out
    links = tmp_path / "links"
    make_wheel(links, "purelib", "1.0")
    out = resolve(*CPU_HOST, "purelib", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert out["torch"] == "2.13.0" and out["resolved"]["torch"] == "2.13.0+cpu", out


@pytest.mark.parametrize("kind", ["tree", "flat"])
def test_offline_from_a_file_tree_and_from_a_flat_directory_of_wheels(tmp_path: Path, kind: str) -> None:
    links = tmp_path / "links"
    make_wheel(links, "pin213", "1.0", ["torch==2.13.0"])
    if kind == "tree":
        source = torch_tree(tmp_path, "cpu", ["2.12.0", "2.13.0"]).as_uri()
    else:  # `pip download` output: wheels side by side, variants mixed
        flat = tmp_path / "wheels"
        for v in ("2.12.0+cpu", "2.13.0+cpu", "2.13.0+cu126", "2.15.0+cpu"):
            make_wheel(flat, "torch", v, tag=CP311)
        source = str(flat)
    proc = run_cli("resolve", "--json", "--offline", *CPU_HOST, "pin213", "--find-links", str(links),
                   "--torch-index-url", source, timeout=180, env={"http_proxy": "http://127.0.0.1:9",
                                                                   "https_proxy": "http://127.0.0.1:9"})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["resolved"]["torch"] == "2.13.0+cpu" and out["resolved"]["pin213"] == "1.0", out


def test_a_cp311_only_mirror_gives_python_3_11_though_3_13_is_newer(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0", "2.14.0"])  # cp311 wheels only
    host = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "python=3.13", "--assume", "glibc=2.36",
            "--assume", "arch=x86_64")
    out = resolve(*host, "--torch-index-url", index.as_uri())
    assert out["python"] == "3.11" and out["torch"] == "2.14.0", out
    public = resolve(*host)  # the public index (the matrix): 3.13 has wheels there
    assert public["python"] == "3.13", public


def test_a_source_without_any_build_for_the_host_is_refused_with_what_it_serves(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0"], tag="cp39-cp39-manylinux_2_28_x86_64")
    proc = run_cli("resolve", "--offline", *CPU_HOST, "--torch-index-url", index.as_uri(), timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "serves torch 2.13.0+cpu (cp39)" in proc.stderr, proc.stderr


XFORMERS = PROJECTS / "xformers"


def xformers_wheels(links: Path, version: str) -> None:
    """Every wheel PyPI lists for xformers `version` (xformers/files.txt: real names, tags), tiny,
    each with the recorded METADATA's torch pin; the sdist left out (a real one would build)."""
    record = next(XFORMERS.glob(f"xformers-{version}-*.metadata"))
    for name in (XFORMERS / "files.txt").read_text("utf-8").split():
        if name.startswith(f"xformers-{version}-") and name.endswith(".whl"):
            wheel_from_record(links, record, re.compile(r"^torch\b"), tag=name[len(f"xformers-{version}-"):-4])


def refused(*args: str) -> tuple[dict, str]:
    proc = run_cli("resolve", "--offline", "--json", *args, timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)
    assert err["reference"] == "no-compatible-set", err
    return err, proc.stderr


def test_a_release_whose_wheels_need_a_newer_glibc_is_refused_with_the_glibc_named_first(tmp_path: Path) -> None:
    # xformers 0.0.32.post2: one Linux wheel, cp39-abi3 manylinux_2_28 x86_64 (PyPI), torch==2.8.0 (its
    # METADATA). On glibc 2.17 uv says only "no wheels with a matching platform tag"; the host fact leads.
    links = tmp_path / "links"
    xformers_wheels(links, "0.0.32.post2")
    assert (links / "xformers-0.0.32.post2-cp39-abi3-manylinux_2_28_x86_64.whl").is_file()
    index = torch_tree(tmp_path, "cpu", ["2.5.1"], tag="cp311-cp311-manylinux2014_x86_64")
    old_glibc = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "glibc=2.17", "--assume", "arch=x86_64")
    err, stderr = refused(*old_glibc, "xformers==0.0.32.post2", "--find-links", str(links),
                          "--torch-index-url", index.as_uri())
    assert err["conflicts"][0] == ("xformers 0.0.32.post2 (your requirement xformers==0.0.32.post2): its wheels need "
                                   "glibc >= 2.28 (manylinux_2_28_x86_64); this host has glibc 2.17"), err
    assert err["conflicts"][1].startswith("Because xformers==0.0.32.post2 has no wheels"), err  # uv's words after
    assert "glibc >= 2.28" in err["hint"] and "relax the pins" not in err["hint"], err
    assert stderr.index("this host has glibc 2.17") < stderr.index("Because xformers"), stderr
    # with its sdist beside (uv: "has no usable wheels"): --no-build names the glibc too, and a plan
    # that may build says why it builds (the sdist's build is a stub that refuses to run)
    build = tmp_path / "sdist" / "xformers-0.0.32.post2"
    build.mkdir(parents=True)
    (build / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: xformers\nVersion: 0.0.32.post2\n"
                                    "Requires-Dist: torch==2.8.0\n")
    (build / "setup.py").write_text("raise SystemExit('this build must never run')\n")
    subprocess.run(["tar", "-czf", str(links / "xformers-0.0.32.post2.tar.gz"), "-C", str(build.parent),
                    build.name], check=True)
    args = (*old_glibc, "xformers==0.0.32.post2", "--find-links", str(links), "--torch-index-url", index.as_uri())
    err, _ = refused(*args, "--no-build")
    assert err["conflicts"][0].endswith("its wheels need glibc >= 2.28 (manylinux_2_28_x86_64); this host has "
                                        "glibc 2.17"), err
    assert "has no usable wheels" in err["conflicts"][1], err
    proc = run_cli("resolve", "--offline", *args, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=180)
    assert ("xformers 0.0.32.post2 has no wheel for this host (its wheels need glibc >= 2.28 "
            "(manylinux_2_28_x86_64); this host has glibc 2.17): building it") in proc.stderr, proc.stderr


def test_a_release_without_a_wheel_for_the_hosts_only_python_is_refused_with_the_abi_named(tmp_path: Path) -> None:
    # xformers 0.0.29.post3: cp39..cp312 wheels only (PyPI), torch==2.6.0 (its METADATA); the host's one Python is 3.13.
    links = tmp_path / "links"
    xformers_wheels(links, "0.0.29.post3")
    index = torch_tree(tmp_path, "cpu", ["2.6.0"], tag="cp313-cp313-manylinux_2_28_x86_64")
    py313 = ("--assume", "gpu=none", "--assume", "python=3.13", "--assume", "glibc=2.36", "--assume", "arch=x86_64")
    err, _ = refused(*py313, "xformers==0.0.29.post3", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert err["conflicts"][0] == ("xformers 0.0.29.post3 (your requirement xformers==0.0.29.post3): its x86_64 wheels "
                                   "are only for cp39, cp310, cp311, cp312; this host's only Python is 3.13 (cp313)"), err
    assert "matching Python ABI tag" in " ".join(err["conflicts"][1:]), err  # uv's words after
    assert "cp313 wheel" in err["hint"] and not any("torch" in h.replace("--torch", "") for h in err["hints"]), err


def test_a_release_without_a_wheel_for_one_of_the_hosts_pythons_plans_another_or_names_it(tmp_path: Path) -> None:
    # Host Pythons 3.11 and 3.13, torch 2.6.0 for both: 3.13 is tried first, xformers 0.0.29.post3 has no cp313
    # wheel, so 3.11 is planned (said, with the fact); with torch for 3.13 alone, the refusal leads with the fact.
    links = tmp_path / "links"
    xformers_wheels(links, "0.0.29.post3")
    both = write_index(tmp_path / "both", [make_wheel(tmp_path / "w", "torch", "2.6.0+cpu", tag=f"cp{p}-cp{p}-"
                                                      "manylinux_2_28_x86_64") for p in ("311", "313")])
    host = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "python=3.13", "--assume", "glibc=2.36",
            "--assume", "arch=x86_64")
    out = resolve(*host, "xformers==0.0.29.post3", "--find-links", str(links), "--torch-index-url", both.as_uri())
    assert (out["python"], out["resolved"]["xformers"]) == ("3.11", "0.0.29.post3"), out
    assert any(r.startswith("passed over: xformers 0.0.29.post3") and "3.13 (cp313)" in r and
               r.endswith("planned instead: cpu, Python 3.11") for r in out["reasons"]), out["reasons"]
    only313 = torch_tree(tmp_path, "cpu", ["2.6.0"], tag="cp313-cp313-manylinux_2_28_x86_64")
    err, _ = refused(*host, "xformers==0.0.29.post3", "--find-links", str(links), "--torch-index-url",
                     only313.as_uri())
    assert err["conflicts"][0].startswith("xformers 0.0.29.post3 (your requirement xformers==0.0.29.post3): its "
                                          "x86_64 wheels are only for cp39, cp310, cp311, cp312; the Python tried "
                                          "is 3.13 (cp313)"), err


def test_a_release_built_from_its_sdist_because_its_wheel_needs_a_newer_glibc_says_so(tmp_path: Path) -> None:
    # extx 1.0: a manylinux_2_28 wheel and an sdist whose PKG-INFO is static (Metadata-Version 2.2, PEP 643:
    # uv reads it without building); glibc 2.17: the plan builds it, and says which host fact made it.
    links = tmp_path / "links"
    make_wheel(links, "extx", "1.0", ["torch"], tag="cp311-cp311-manylinux_2_28_x86_64")
    build = tmp_path / "sdist" / "extx-1.0"
    build.mkdir(parents=True)
    (build / "PKG-INFO").write_text("Metadata-Version: 2.2\nName: extx\nVersion: 1.0\nRequires-Dist: torch\n")
    (build / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "nope"\n')
    subprocess.run(["tar", "-czf", str(links / "extx-1.0.tar.gz"), "-C", str(build.parent), build.name], check=True)
    index = torch_tree(tmp_path, "cpu", ["2.5.1"], tag="cp311-cp311-manylinux2014_x86_64")
    old_glibc = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "glibc=2.17", "--assume", "arch=x86_64")
    proc = run_cli("resolve", "--offline", "--json", *old_glibc, "extx", "--find-links", str(links),
                   "--torch-index-url", index.as_uri(), env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fact = "its wheels need glibc >= 2.28 (manylinux_2_28_x86_64); this host has glibc 2.17"
    assert f"extx 1.0 has no wheel for this host ({fact}): building it" in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert any(w.startswith("extx 1.0 has no wheel") and w.endswith(fact) for w in out["warnings"]), out["warnings"]


def test_a_release_with_wheels_for_another_machine_is_refused_with_the_machine_named(tmp_path: Path) -> None:
    # xformers 0.0.32.post2 has x86_64 and win_amd64 wheels only (PyPI); an aarch64 host, the project unpinned.
    links = tmp_path / "links"
    xformers_wheels(links, "0.0.32.post2")
    index = torch_tree(tmp_path, "cpu", ["2.8.0"], tag="cp311-cp311-manylinux_2_28_aarch64")
    arm = ("--assume", "gpu=none", "--assume", "python=3.11", "--assume", "glibc=2.36", "--assume", "arch=aarch64")
    err, _ = refused(*arm, "xformers", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert err["conflicts"][0] == ("xformers 0.0.32.post2 (your requirement xformers): its Linux wheels are only for "
                                   "x86_64; this host is aarch64"), err


def test_a_release_routed_to_the_torch_index_is_judged_from_that_index(tmp_path: Path) -> None:
    # xformers 0.0.29.post3's cu126 binary is the torch index's (companions.toml routes it there, so uv reads
    # it from there alone): its wheels there (cp39..cp312) are the ones judged, the user's sources have none.
    xformers_wheels(tmp_path / "xf", "0.0.29.post3")
    torch = make_wheel(tmp_path / "w", "torch", "2.6.0+cu126", tag="cp313-cp313-manylinux_2_28_x86_64")
    write_index(tmp_path / "cu126", [torch, *sorted((tmp_path / "xf").glob("*.whl"))])
    links = tmp_path / "links"
    make_wheel(links, "purelib", "1.0")
    template = (tmp_path / "{variant}" / "simple").as_uri().replace("%7B", "{").replace("%7D", "}")
    host = tuple(a.replace("python=3.11", "python=3.13") for a in DRIVER_570)
    err, _ = refused(*host, "xformers==0.0.29.post3", "--find-links", str(links), "--torch-index-url", template)
    assert err["conflicts"][0] == ("xformers 0.0.29.post3 (your requirement xformers==0.0.29.post3): its x86_64 wheels "
                                   "are only for cp39, cp310, cp311, cp312; this host's only Python is 3.13 (cp313)"), err


# -- class 7: a source that cannot be reached --------------------------------------------------------


def test_an_index_that_cannot_be_resolved_is_index_unavailable_not_no_compatible_set(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    proc = run_cli("resolve", "--json", *CPU_HOST, "purelib", "--index-url", "https://pypi.invalid/simple",
                   "--torch-index-url", index.as_uri(), timeout=180)
    assert proc.returncode == 1, proc.stdout
    err = json.loads(proc.stdout)
    assert err["reference"] == "index-unavailable", err
    assert "pypi.invalid" in err["error"], err


def test_a_gpu_host_and_a_source_of_cpu_wheels_is_told_what_the_source_lacks(tmp_path: Path) -> None:
    """No hint may promise a build the source does not serve (the driver upgrade to cu130 here)."""
    flat = tmp_path / "wheels"
    for v in ("2.13.0+cpu", "2.15.0+cpu"):
        make_wheel(flat, "torch", v, tag=CP311)
    proc = run_cli("resolve", "--offline", "--json", *DRIVER_570, "--torch-index-url", str(flat), timeout=120)
    assert proc.returncode == 1, proc.stdout
    err = json.loads(proc.stdout)
    assert any("torch wheel for x86_64 on" in c and "cu126" in c for c in err["conflicts"]), err
    assert not any("upgrade the NVIDIA driver" in h for h in err["hints"]), err["hints"]
    assert any("--variant cpu" in h for h in err["hints"]), err["hints"]


# -- issue 25: a build during a plan, and uv's cause first ---------------------------------------------


@pytest.mark.slow
def test_a_build_that_leaves_a_child_holding_the_pipe_is_stopped_with_its_child(tmp_path: Path) -> None:
    import os
    import time

    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    marker = tmp_path / "pids"
    links = tmp_path / "links"
    hostile_sdist(links, marker, daemon=True)
    start = time.monotonic()
    proc = run_cli("resolve", "--offline", *CPU_HOST, "--torch-index-url", index.as_uri(), "--find-links", str(links),
                   "hangpkg", env={"TORCHFIT_STALL_TIMEOUT": "5", "XDG_CACHE_HOME": str(tmp_path / "cache")},
                   timeout=120)
    took = time.monotonic() - start
    pids = [int(p) for p in marker.read_text().split()] if marker.exists() else []
    try:
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.splitlines()
        said = next(i for i, line in enumerate(lines) if "hangpkg 1.0 has no wheel: building it to read its metadata"
                    in line)
        error = next(i for i, line in enumerate(lines) if line.startswith("torchfit: error:"))
        assert said < error, proc.stderr
        assert "uv made no progress for 5 s while resolving the project" in lines[error], proc.stderr
        assert lines[error].endswith("[resolve-failed]") and "Traceback" not in proc.stderr
        assert took < 60, took
        assert len(pids) == 2, pids  # the backend and its daemon ran
        time.sleep(1)
        assert not [p for p in pids if alive(p)], "the build's daemon outlived torchfit"
    finally:
        for p in pids:
            if alive(p):
                os.kill(p, 9)


def test_no_build_plans_without_running_a_packages_code(tmp_path: Path) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    marker = tmp_path / "pids"
    links = tmp_path / "links"
    hostile_sdist(links, marker, daemon=False)
    proc = run_cli("resolve", "--offline", "--json", "--no-build", *CPU_HOST, "--torch-index-url", index.as_uri(),
                   "--find-links", str(links), "hangpkg", env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
                   timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert not marker.exists(), "--no-build ran the package's build backend"
    err = json.loads(proc.stdout)
    assert "hangpkg" in err["error"] and "no usable wheels" in err["error"], err
    assert "torch" not in err["hint"].replace("--torch", ""), err["hint"]  # torch is not the cause
    # without --no-build the same plan builds it, and says so first
    proc = run_cli("resolve", "--offline", *CPU_HOST, "--torch-index-url", index.as_uri(), "--find-links", str(links),
                   "hangpkg", env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=120)
    assert marker.exists() and "hangpkg 1.0 has no wheel: building it to read its metadata" in proc.stderr


@pytest.mark.parametrize("req, code, words", [
    ("foo @ file:///etc/passwd", 2, "foo @ file:///etc/passwd: not a wheel, a source archive"),
    ("foo @ file:///nonexistent/foo-1.0-py3-none-any.whl", 2, "no such file or directory"),
    ("nosuchpkg", 1, "nosuchpkg: in none of your sources (uv: Because nosuchpkg was not found"),
])
def test_a_uv_failure_outside_torch_says_uvs_cause_with_no_torch_hint(tmp_path: Path, req: str, code: int,
                                                                      words: str) -> None:
    index = torch_tree(tmp_path, "cpu", ["2.13.0"])
    links = tmp_path / "links"
    make_wheel(links, "purelib", "1.0")
    proc = run_cli("resolve", "--offline", "--json", *CPU_HOST, "--torch-index-url", index.as_uri(),
                   "--find-links", str(links), req, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=120)
    assert proc.returncode == code, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)
    assert words in err["error"], err
    assert err["reference"] == ("bad-input" if code == 2 else "resolve-failed"), err
    assert "torch" not in (err["hint"] or "").replace("--torch", ""), err
    assert "Traceback" not in proc.stderr and "root:x:0" not in proc.stdout + proc.stderr  # no line of the file


def test_an_https_index_listing_a_dependency_over_plain_http_is_refused(tmp_path: Path) -> None:
    """Listed as partial after round 3 (issue 25): the torch index was checked for http:// links,
    a dependency index was not; uv and pip follow its links silently. The plan's files are."""
    import hashlib

    from tests.support.tls import make_certs
    from tests.support.wheels import serve_dir

    certs = make_certs(tmp_path / "tls")
    (tmp_path / "files").mkdir(exist_ok=True)
    wheel = make_wheel(tmp_path / "files", "purelib", "1.0")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    index = torch_tree(tmp_path / "torch", "cpu", ["2.13.0"])
    trust = {"REQUESTS_CA_BUNDLE": certs["ca"], "SSL_CERT_FILE": certs["ca"], "XDG_CACHE_HOME": str(tmp_path / "c")}
    with serve_dir(tmp_path) as plain:
        page = tmp_path / "secure" / "simple" / "purelib"
        page.mkdir(parents=True)
        (page / "index.html").write_text(f'<a href="{plain}/files/{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
        with serve_dir(tmp_path / "secure", tls=(certs["cert"], certs["key"])) as secure:
            proc = run_cli("resolve", "--json", *CPU_HOST, "--torch-index-url", index.as_uri(), "--index-url",
                           f"{secure}/simple", "purelib", env=trust, timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)
    assert err["reference"] == "index-unavailable" and "over plain http" in err["error"], err
    assert "--allow-insecure-index" in err["hint"], err


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_install_refuses_a_wheel_of_an_https_index_that_redirects_to_plain_http(tmp_path: Path,
                                                                                installer: str) -> None:
    """Listed as partial after round 3 (issue 25): uv 0.13.9 and pip follow an https -> http
    redirect of a file silently (measured), so install's fetch step checks where the https files
    redirect before either is asked to download them (uv: its resolution's files; pip: the plan's):
    one line naming the file and the hop, exit 1, no env, and the plain server never asked for the
    wheel (the mirror serves PEP 658 metadata, so uv's resolution reads no wheel; docs/mirrors.md
    says what happens without it)."""
    from tests.support.tls import make_certs, redirecting_index
    from tests.support.wheels import serve_dir

    certs = make_certs(tmp_path / "tls")
    wheel = make_wheel(tmp_path / "files", "purelib", "1.0")
    index = torch_tree(tmp_path / "torch", "cpu", ["2.13.0"])
    asked: list[str] = []

    class Seen(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_a: object) -> None:
            asked.append(self.requestline)

    prefix = tmp_path / "env"
    trust = {"REQUESTS_CA_BUNDLE": certs["ca"], "SSL_CERT_FILE": certs["ca"], "XDG_CACHE_HOME": str(tmp_path / "c"),
             "UV_CACHE_DIR": str(tmp_path / "uv")}
    with serve_dir(tmp_path, Seen) as plain, serve_dir(tmp_path / "secure", redirecting_index(
            tmp_path / "secure", wheel, plain), tls=(certs["cert"], certs["key"])) as secure:
        proc = run_cli("install", "--json", *CPU_HOST, "torch==2.13.0", "purelib", "--variant", "cpu", "--python",
                       "3.11", "--prefix", str(prefix), "--installer", installer, "--torch-index-url",
                       index.as_uri(), "--index-url", f"{secure}/simple", env=trust, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = json.loads(proc.stdout)
    assert err["reference"] == "index-unavailable", err
    assert err["error"].startswith(f"{secure}/files/{wheel.name}: redirected from https to plain http "
                                   f"({plain}/files/{wheel.name})"), err
    assert "--allow-insecure-index" in err["hint"], err
    assert not any(wheel.name in line for line in asked), asked
    assert not prefix.exists() and "Traceback" not in proc.stderr


# -- issue 33: torchfit narrows what the user gave, never overrides it ------------------------------


def test_a_constraint_on_torchvision_two_levels_down_holds_torch_to_its_pair(tmp_path: Path) -> None:
    # torchvision 0.21.0 pins torch==2.6.0 and 0.29.1 torch>=2.14.1 (their METADATA as PyPI serves it:
    # data/matrix.toml's rows); the project reaches torchvision through openclipx -> timmx only.
    family = [make_wheel(tmp_path / "family", "torchvision", "0.21.0+cpu", ["torch==2.6.0"], tag=CP311),
              make_wheel(tmp_path / "family", "torchvision", "0.29.1+cpu", ["torch>=2.14.1"], tag=CP311)]
    index = torch_tree(tmp_path, "cpu", ["2.6.0", "2.14.1"], extra=family)
    links = tmp_path / "links"
    make_wheel(links, "openclipx", "1.0", ["timmx"])
    make_wheel(links, "timmx", "1.0", ["torchvision"])
    cons = tmp_path / "constraints.txt"
    cons.write_text("torchvision==0.21.0\n")
    req = tmp_path / "requirements.txt"
    req.write_text("-c constraints.txt\nopenclipx\n")
    out = resolve(*CPU_HOST, "-r", str(req), "--find-links", str(links),
                  "--torch-index-url", index.as_uri())
    assert (out["torch"], out["torchvision"]) == ("2.6.0", "0.21.0"), out
    assert out["resolved"]["torchvision"] == "0.21.0+cpu", out


def test_pytorchs_own_spelling_of_a_pin_selects_the_variant(tmp_path: Path) -> None:
    # `torch==2.7.1+cu126 torchaudio==2.7.1+cu126`, as PyTorch's install pages write it
    out = resolve(*DRIVER_570, "torch==2.7.1+cu126", "torchaudio==2.7.1+cu126")
    assert (out["torch"], out["variant"], out["torchaudio"]) == ("2.7.1", "cu126", "2.7.1"), out
    # the same pin in a requirements file beside a project, against a source holding cu126 and cu128
    for variant in ("cu126", "cu128"):
        audio = make_wheel(tmp_path / "family" / variant, "torchaudio", f"2.7.1+{variant}", ["torch==2.7.1"], tag=CP311)
        torch_tree(tmp_path / "src", variant, ["2.7.1"], extra=[audio])
    template = (tmp_path / "src" / "{variant}" / "simple").as_uri().replace("%7B", "{").replace("%7D", "}")
    links = tmp_path / "links"
    make_wheel(links, "purelib", "1.0")
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.7.1+cu126\ntorchaudio==2.7.1+cu126\npurelib\n")
    out = resolve(*DRIVER_570, "-r", str(req), "--find-links", str(links), "--torch-index-url", template)
    assert out["variant"] == "cu126" and out["resolved"]["torch"] == "2.7.1+cu126", out
    assert out["resolved"]["torchaudio"] == "2.7.1+cu126", out
    # labels that disagree are the user's to settle: one line, exit 2
    proc = run_cli("resolve", "--offline", *DRIVER_570, "torch==2.7.1+cu126", "torchaudio==2.7.1+cu128")
    assert proc.returncode == 2 and "give one variant" in proc.stderr, proc.stderr


def test_a_companion_table_holds_both_ways_before_uv_solves(tmp_path: Path) -> None:
    # torchcodec's METADATA names no torch (companions.toml's META lines, read from PyPI's wheels);
    # its table: 0.9 -> 2.9, 0.10 -> 2.10, 0.12 -> >=2.11; 0.17.0 is newer than 0.12.0, so it needs
    # torch >= 2.11 at least (a later release never goes back to an older torch).
    index = torch_tree(tmp_path, "cpu", ["2.9.1", "2.10.0", "2.11.0"])
    links = tmp_path / "links"
    for version in ("0.9.1", "0.10.0", "0.17.0"):
        make_wheel(links, "torchcodec", version, requires_python=">=3.10", tag=CP311)
    common = ("--find-links", str(links), "--torch-index-url", index.as_uri())
    # a pinned torch holds the companion
    out = resolve(*CPU_HOST, "torch==2.9.1", "torchcodec", *common)
    assert (out["torch"], out["resolved"]["torchcodec"]) == ("2.9.1", "0.9.1"), out
    # a pinned companion holds torch, and says why
    out = resolve(*CPU_HOST, "torchcodec==0.10.0", *common)
    assert (out["torch"], out["resolved"]["torchcodec"]) == ("2.10.0", "0.10.0"), out
    assert any("by your torchcodec==0.10.0" in r for r in out["reasons"]), out["reasons"]
    # both pinned and apart: a refusal naming both, never a plan that cannot load
    proc = run_cli("resolve", "--offline", "--json", *CPU_HOST, "torch==2.9.1", "torchcodec==0.10.0", *common,
                   timeout=180)
    assert proc.returncode == 1, proc.stdout
    text = " ".join(json.loads(proc.stdout)["conflicts"])
    assert "torchcodec==0.10.0: its binary needs torch==2.10.*" in text and "2.9.1" in text, text


def _facts(tmp_path: Path, pythons: list[dict[str, object]], pyenv: object = None, uv: object = None) -> Path:
    """This host's facts with its Pythons as given: present ones, pyenv's and uv's (none unless
    given: uv's downloads list on this machine is whatever uv release is installed)."""
    facts = json.loads(run_cli("detect", "--json").stdout)
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({**facts, "pythons": pythons, "pyenv": pyenv, "uv_pythons": uv, "glibc": "2.36",
                                "arch": "x86_64"}))
    return path


def test_the_plan_is_for_the_exact_interpreter_its_version_and_its_abi(tmp_path: Path) -> None:
    cp314 = "cp314-cp314-manylinux_2_28_x86_64"
    # torchvision 0.29.2 declares Requires-Python >=3.10,!=3.14.1 (PyPI's JSON, releases[0.29.2]; the
    # python3141 story); uv's --python-version 3.14.1 is a minimum and takes it (measured, uv 0.13.10)
    vision = [make_wheel(tmp_path / "fam", "torchvision", "0.29.2+cpu", ["torch>=2.14.1"], ">=3.10,!=3.14.1", tag=cp314),
              make_wheel(tmp_path / "fam", "torchvision", "0.29.0+cpu", ["torch==2.14.0"], ">=3.10", tag=cp314)]
    index = torch_tree(tmp_path, "cpu", ["2.14.0", "2.14.1"], tag=cp314, extra=vision)
    links = tmp_path / "links"
    make_wheel(links, "visionlib", "1.0", ["torchvision"])
    host = ("--assume", "gpu=none", "--assume", "python=3.14.1", "--assume", "glibc=2.36", "--assume", "arch=x86_64")
    out = resolve(*host, "visionlib", "--find-links", str(links), "--torch-index-url", index.as_uri())
    assert (out["torch"], out["torchvision"], out["python_version"]) == ("2.14.0", "0.29.0", "3.14.1"), out
    assert any("torchvision 0.29.2+cpu declares Requires-Python >=3.10,!=3.14.1: not CPython 3.14.1" in r
               for r in out["reasons"]), out["reasons"]
    # vllm 0.10.1.1 (its recorded METADATA): Requires-Python <3.13,>=3.9; a host whose only Python is 3.13.1
    cp313 = "cp313-cp313-manylinux_2_28_x86_64"
    index13 = torch_tree(tmp_path / "t13", "cpu", ["2.7.1"], tag=cp313,
                         extra=[make_wheel(tmp_path / "f13", "torchaudio", "2.7.1+cpu", ["torch==2.7.1"], tag=cp313),
                                make_wheel(tmp_path / "f13", "torchvision", "0.22.1+cpu", ["torch==2.7.1"], tag=cp313)])
    links13 = tmp_path / "links13"
    wheel_from_record(links13, next((PROJECTS / "vllm").glob("vllm-0.10.1.1*.metadata")),
                      re.compile(r"^torch(vision|audio)?\b"))
    facts = _facts(tmp_path, [{"version": "3.13.1", "path": "/usr/bin/python3.13"}])
    proc = run_cli("resolve", "--json", "--offline", "--facts", str(facts), "--assume", "gpu=none", "vllm==0.10.1.1",
                   "--find-links", str(links13), "--torch-index-url", index13.as_uri(), timeout=180)
    assert proc.returncode == 1, proc.stdout
    text = " ".join(json.loads(proc.stdout)["conflicts"])
    assert text.startswith("vllm 0.10.1.1 declares Requires-Python <3.13,>=3.9: not CPython 3.13.1"), text
    # with pyenv, the next Python tried is one vllm's Requires-Python accepts (3.12, not 3.14), and said
    cp312 = "cp312-cp312-manylinux_2_28_x86_64"
    extra = [make_wheel(tmp_path / "f12", "torch", "2.7.1+cpu", tag=cp312),
             make_wheel(tmp_path / "f12", "torchaudio", "2.7.1+cpu", ["torch==2.7.1"], tag=cp312),
             make_wheel(tmp_path / "f12", "torchvision", "0.22.1+cpu", ["torch==2.7.1"], tag=cp312)]
    index12 = torch_tree(tmp_path / "t12", "cpu", ["2.7.1"], tag=cp313, extra=[*extra,
                         make_wheel(tmp_path / "f13", "torchaudio", "2.7.1+cpu", ["torch==2.7.1"], tag=cp313),
                         make_wheel(tmp_path / "f13", "torchvision", "0.22.1+cpu", ["torch==2.7.1"], tag=cp313)])
    facts = _facts(tmp_path, [{"version": "3.13.1", "path": "/usr/bin/python3.13"}],
                   {"path": "/opt/pyenv/bin/pyenv", "version": "2.4.0", "installable": ["3.12.9", "3.14.2"]})
    proc = run_cli("resolve", "--json", "--offline", "--facts", str(facts), "--assume", "gpu=none", "vllm==0.10.1.1",
                   "--find-links", str(links13), "--torch-index-url", index12.as_uri(), timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert (out["python_version"], out["python_source"], out["torch"]) == ("3.12.9", "pyenv", "2.7.1"), out
    assert any(r.startswith("passed over: vllm 0.10.1.1 declares Requires-Python <3.13,>=3.9: not CPython 3.13.1")
               for r in out["reasons"]), out["reasons"]


def test_a_free_threaded_interpreter_takes_no_abi3_wheel(tmp_path: Path) -> None:
    # xformers 0.0.32.post2 ships cp39-abi3 wheels only (tests/data/projects/pypi/xformers); the stable
    # ABI does not exist on a free-threaded CPython (PEP 703), so 3.13t cannot install it
    cp313t = "cp313-cp313t-manylinux_2_28_x86_64"
    gil = make_wheel(tmp_path / "gil", "torch", "2.8.0+cpu", tag="cp313-cp313-manylinux_2_28_x86_64")
    index = torch_tree(tmp_path, "cpu", ["2.8.0"], tag=cp313t, extra=[gil])  # both builds, as PyTorch's index
    links = tmp_path / "links"
    make_wheel(links, "xformers", "0.0.32.post2", ["torch==2.8.0"], ">=3.9", tag="cp39-abi3-manylinux_2_28_x86_64")
    facts = _facts(tmp_path, [{"version": "3.13.1", "path": "/usr/bin/python3.13t", "free_threaded": True}])
    proc = run_cli("resolve", "--json", "--offline", "--facts", str(facts), "--assume", "gpu=none", "xformers",
                   "--find-links", str(links), "--torch-index-url", index.as_uri(), timeout=180)
    assert proc.returncode == 1, proc.stdout
    text = " ".join(json.loads(proc.stdout)["conflicts"])
    assert "xformers 0.0.32.post2: its wheels are for cp39-abi3 only; a free-threaded CPython 3.13" in text, text


def test_an_unlabelled_torch_from_a_remote_index_is_the_cuda_its_set_pins(tmp_path: Path) -> None:
    # PyPI's torch 2.6.0 carries no label and pins nvidia-cuda-runtime-cu12==12.4.127 (its METADATA on
    # PyPI; data/matrix.toml's 2.6 `pypi` row): a cu124 build, whatever variant slot the plan tried first
    import functools

    from tests.support.servers import http_server

    runtime = make_wheel(tmp_path / "w", "nvidia-cuda-runtime-cu12", "12.4.127")
    torch = make_wheel(tmp_path / "w", "torch", "2.6.0", ["nvidia-cuda-runtime-cu12==12.4.127"], tag=CP311)
    root = tmp_path / "pypi"
    write_index(root, [torch, runtime])
    links = tmp_path / "links"
    make_wheel(links, "purelib", "1.0")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    with http_server(handler=handler) as server:
        proc = run_cli("resolve", "--json", *DRIVER_570, "purelib", "--find-links", str(links), "--torch-index-url",
                       f"{server.url}/simple", "--allow-insecure-index", timeout=180)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["torch"], out["variant"], out["cuda"]) == ("2.6.0", "cu124", "12.4"), out
    assert any("its METADATA pins the CUDA 12.4 runtime" in r for r in out["reasons"]), out["reasons"]


def test_the_interpreter_uv_is_given() -> None:
    """issue 37: uv is given an interpreter (no search of PATH) where it is right: torchfit's own
    for its own Python, any for a wheels-only pass (uv builds nothing); for a build under another
    Python, uv's own search; a UV_PYTHON of the user's stays in force."""
    import sys

    from torchfit.planning.project import interpreter_for_uv

    ours = f"{sys.version_info[0]}.{sys.version_info[1]}"
    other = "3.99"
    assert interpreter_for_uv(ours, False, wheels_only=False, env={}) == sys.executable
    assert interpreter_for_uv(ours + ".7", False, wheels_only=False, env={}) == sys.executable
    assert interpreter_for_uv(other, False, wheels_only=True, env={}) == sys.executable
    assert interpreter_for_uv(other, False, wheels_only=False, env={}) is None
    assert interpreter_for_uv(ours, "t" not in sys.abiflags, wheels_only=False, env={}) is None
    assert interpreter_for_uv(ours, False, wheels_only=True, env={"UV_PYTHON": "/opt/py/bin/python3"}) is None
