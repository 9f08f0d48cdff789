#!/usr/bin/env python3
"""(Re)measure the PyPI facts of src/torchfit/data/companions.toml.

For each package named, reads PyPI's project page (PEP 691) and, per final release
uploaded since --since, the METADATA of one Linux x86_64 wheel (PEP 658, else HTTP
range requests into the wheel) and, for xformers and torch-tensorrt, the member that
records the build the wheel was compiled against (torchfit.matrixcheck.companions).
`triton` is measured through torch's own METADATA (its triton pin).

  python scripts/probe_companions.py xformers vllm --since 2024-06-01          # TOML rows
  python scripts/probe_companions.py --check [--since 2024-06-01] [NAME...]    # compare
  python scripts/probe_companions.py --json xformers                           # raw facts
  python scripts/probe_companions.py --record tests/data/projects/pypi xformers==0.0.32.post2

Without --check it prints `[sources]` lines and `[[package.release]]` rows to paste
(the facts only PyPI has: torch, pypi variant, python tags, requires_python,
sdist_only, each labelled measured). With --check it compares them with the data
file and prints each difference; exit 1 when there is one, 0 when none.
Network: PyPI only (files.pythonhosted.org for the range reads). Cached under
torchfit's index cache, so a second run asks only for what changed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

from packaging.specifiers import SpecifierSet

from torchfit.compat.companions import load_companions
from torchfit.index.client import IndexClient
from torchfit.matrixcheck.companions import (
    MeasuredRelease,
    measure_package,
    measure_triton_pins,
    to_json,
)

TODAY = datetime.date.today().isoformat()
ALL = ("xformers", "vllm", "torchao", "torchcodec", "torch-tensorrt", "flash-attn", "bitsandbytes",
       "torch-scatter", "torch-sparse", "torch-cluster", "pyg-lib")


def _q(s: str) -> str:
    return json.dumps(s)


def rows(name: str, measured: list[MeasuredRelease]) -> str:
    out = [f"# ---- {name}: measured by scripts/probe_companions.py on {TODAY} ----", "[sources]"]
    page = f"PYPI {name}"
    out.append(f"{_q(page)} = {_q(f'https://pypi.org/simple/{name}/ (PEP 691 JSON): file names (Python and platform tags), requires-python, upload times; read {TODAY}')}")
    for m in measured:
        if m.wheel:
            via = "PEP 658 (.metadata)" if m.metadata_via == "pep658" else "HTTP range requests into the wheel"
            said = f"Requires-Dist torch{m.torch}" if m.torch else "no torch requirement"
            out.append(f"{_q(f'META {name} {m.version}')} = {_q(f'METADATA of {m.wheel} (sha256 {m.wheel_sha256}) from files.pythonhosted.org, listed at https://pypi.org/simple/{name}/, read through {via} on {TODAY}: {said}')}")
        if m.build:
            out.append(f"{_q(f'BUILD {name} {m.version}')} = {_q(f'build record inside {m.wheel} (sha256 {m.wheel_sha256}), read through HTTP range requests on {TODAY}: {m.build}')}")
    out.append("")
    for m in measured:
        src = {"exists": page, "python": page, "sdist_only": page}
        ev = {"exists": "measured", "python": "measured", "sdist_only": "measured"}
        out.append("[[package.release]]")
        out.append(f"version = {_q(m.version)}  # uploaded {m.upload[:10]}")
        if m.torch is not None:
            out.append(f"torch = {_q(m.torch or 'unknown')}")
            if m.torch:
                src["torch"] = f"META {name} {m.version}"
                ev["torch"] = "measured"
        if m.pypi_variant:
            out.append(f"pypi = {_q(m.pypi_variant)}")
            src["pypi"] = f"BUILD {name} {m.version}"
            ev["pypi"] = "measured"
        out.append(f"python = {json.dumps(m.python)}" if m.python else 'python = "unknown"')
        if not m.python:
            src.pop("python")
            ev.pop("python")
        if m.requires_python:
            out.append(f"requires_python = {_q(m.requires_python)}")
            src["requires_python"] = f"META {name} {m.version}" if m.wheel else page
            ev["requires_python"] = "measured"
        if m.sdist_only:
            out.append("sdist_only = true")
        out.append("source = { " + ", ".join(f"{k} = {_q(v)}" for k, v in src.items()) + " }")
        out.append("evidence = { " + ", ".join(f"{k} = {_q(v)}" for k, v in ev.items()) + " }")
        out.append("")
    return "\n".join(out)


def check(name: str, measured: list[MeasuredRelease]) -> list[str]:
    """Differences between the measured facts and the data file's, one line each."""
    comp = load_companions().get(name)
    if comp is None:
        return [f"{name}: not in companions.toml"]
    problems = []
    for m in measured:
        recorded = [r for r in comp.releases if str(r.version) == m.version]
        if not recorded:
            problems.append(f"{name} {m.version} (uploaded {m.upload[:10]}): on PyPI, not in companions.toml")
            continue
        for r in recorded:
            where = f"{name} {m.version} ({r.origin})"
            if m.torch and r.evidence.get("torch") == "measured" and r.torch != SpecifierSet(m.torch):
                problems.append(f"{where}: torch {r.torch} in the file, METADATA says {m.torch}")
            if r.python is not None and m.python and sorted(r.python) != sorted(m.python):
                problems.append(f"{where}: python {list(r.python)} in the file, PyPI has {m.python}")
            if r.sdist_only != m.sdist_only:
                problems.append(f"{where}: sdist_only {r.sdist_only} in the file, PyPI says {m.sdist_only}")
            if m.pypi_variant and r.pypi_variant != m.pypi_variant:
                problems.append(f"{where}: pypi {r.pypi_variant} in the file, the wheel was built for {m.pypi_variant}")
    return problems


def record(client: IndexClient, directory: str, pins: list[str]) -> None:
    """Store the METADATA of one Linux x86_64 wheel of each NAME==VERSION, and a PEP 691 page of them.

    DIRECTORY/NAME/FILE.metadata is the METADATA as PyPI serves it (PEP 658, else read from the
    wheel); DIRECTORY/NAME/index.json is PyPI's PEP 691 page trimmed to those wheels, each with
    "core-metadata": {"sha256": ...} of the stored file, so a local index can serve both.
    """
    import hashlib
    import os

    from torchfit.index.pages import JSON_TYPE, project_url
    from torchfit.matrixcheck.companions import _linux_x86_wheels, _read_metadata

    by_name: dict[str, list[str]] = {}
    for pin in pins:
        name, _, version = pin.partition("==")
        by_name.setdefault(name, []).append(version)
    for name, versions in by_name.items():
        got = client.get(project_url("https://pypi.org/simple", name), JSON_TYPE)
        page = json.loads(got.body)
        listed = client.project_page("https://pypi.org/simple", name)
        assert listed is not None
        keep = []
        os.makedirs(os.path.join(directory, name), exist_ok=True)
        for version in versions:
            wheels = sorted((f for f in _linux_x86_wheels(listed.files) if f"-{version}-" in f.filename),
                            key=lambda f: f.filename)
            if not wheels:  # a pure-Python release (trl): its one wheel serves Linux x86_64 too
                wheels = [f for f in listed.files
                          if f.filename.endswith("-none-any.whl") and f"-{version}-" in f.filename]
            wheel = wheels[0]
            text, via = _read_metadata(client, wheel)
            assert text is not None, wheel.filename
            data = text.encode()
            with open(os.path.join(directory, name, wheel.filename + ".metadata"), "wb") as fh:
                fh.write(data)
            entry = next(f for f in page["files"] if f["filename"] == wheel.filename)
            entry["core-metadata"] = {"sha256": hashlib.sha256(data).hexdigest()}
            entry["_torchfit-read-via"] = via
            keep.append(entry)
            print(f"{name} {version}: {wheel.filename} (torch{torch_requirement_of(text) or ': none'}) via {via}",
                  file=sys.stderr)
        page["files"] = keep
        page["versions"] = versions
        with open(os.path.join(directory, name, "index.json"), "w", encoding="utf-8") as fh:
            json.dump(page, fh, indent=1)
            fh.write("\n")


def torch_requirement_of(text: str) -> str:
    from torchfit.matrixcheck.companions import torch_requirement

    return torch_requirement(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help=f"packages (default: {' '.join(ALL)})")
    ap.add_argument("--since", default="2024-06-01", help="first upload date to cover (ISO, default 2024-06-01)")
    ap.add_argument("--check", action="store_true", help="compare with companions.toml; exit 1 on a difference")
    ap.add_argument("--json", action="store_true", help="print the raw measured facts as JSON")
    ap.add_argument("--record", metavar="DIR", help="store METADATA and a trimmed PEP 691 page of NAME==VERSION...")
    ap.add_argument("--torch", default="", help="for triton: comma-separated torch releases whose pin to read")
    args = ap.parse_args(argv)
    client = IndexClient()
    say = (lambda s: print(s, file=sys.stderr)) if not args.json else None
    if args.record:
        record(client, args.record, args.names)
        return 0
    names = args.names or list(ALL)
    problems: list[str] = []
    for name in names:
        if name == "triton":
            torches = [t for t in args.torch.split(",") if t]
            print(json.dumps(measure_triton_pins(client, torches, say=say), indent=1))
            continue
        measured = measure_package(client, name, since=args.since, say=say)
        if args.json:
            print(json.dumps(to_json(measured), indent=1))
        elif args.check:
            problems += check(name, measured)
        else:
            print(rows(name, measured))
    for p in problems:
        print(p)
    if args.check:
        print(f"{len(problems)} difference(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
