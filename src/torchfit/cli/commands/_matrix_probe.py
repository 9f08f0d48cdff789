"""`torchfit matrix probe` and `matrix update --from-probe`: the CLI side of measuring wheels.

Which wheels to read (files, URLs, an index release, the matrix's unknowns, new
releases), one line per wheel on stderr while reading, then a table or `--json`.
The measuring is matrixcheck.probe; the proposal is matrixcheck.probeupdate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchfit.errors import BadInput
from torchfit.inputs import decode_json

if TYPE_CHECKING:
    from torchfit.index.pages import IndexFile
    from torchfit.matrixcheck.wheels import Wheel



def run_probe(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    from torchfit.cli.settings import index_client
    from torchfit.cli.ui.matrix import mb
    from torchfit.errors import IndexUnavailable, WheelFormatError
    from torchfit.matrixcheck import probe as pr

    failures: list[tuple[str, str]] = []  # (what, why): index pages, then wheels
    targets = _targets(args, failures)
    verbose = getattr(args, "verbose", False) or sys.stderr.isatty()
    note = say if verbose else (lambda _line: None)
    # One wheel that cannot be read is one line (the error names it): the progress of a single
    # target shows at a terminal or with -v; several targets say each as it goes.
    step = say if verbose or len(targets) > 1 else note
    results: list[Any] = []
    bad = False
    client = None
    for kind, target, pythons in targets:
        label = target if kind != "index" else target.file.filename
        step(f"probing {label}")
        try:
            if kind == "file":
                facts = pr.probe_file(target, glibc=args.glibc, embedded=args.embedded, say=note)
            else:
                client = client or index_client(args)
                if kind == "url":
                    from torchfit.index.pages import IndexFile

                    wheel = _url_wheel(IndexFile(target.rsplit("/", 1)[-1].split("#")[0], target))
                else:
                    wheel = target
                facts = pr.probe_index_wheel(client, wheel, pythons, glibc=args.glibc,
                                             embedded=args.embedded, say=note)
        except (WheelFormatError, IndexUnavailable) as exc:
            # A local file that is no wheel is bad input (2); an index that failed, a no (1).
            bad = bad or kind == "file"
            failures.append((label, exc.message))
            step(str(exc) if kind == "file" else f"{label}: {exc}")
            continue
        results.append(facts)
        say(f"{facts.file}: {facts.arch_flags or 'no arch list'}; read {mb(facts.bytes_read)} of "
            f"{mb(facts.size)} in {facts.seconds:g} s")
    _report(args, results, failures, bad)
    if not targets:
        say("nothing to probe")
    return 0


def _report(args: argparse.Namespace, results: list[Any], failures: list[tuple[str, str]], bad: bool) -> None:
    """What was read: --output's file, then the table (or --json); WheelsUnread after them for
    what was not (exit 2 when a local file was no wheel, `bad`)."""
    from torchfit.errors import WheelsUnread

    data = [f.to_json() for f in results]
    if args.output:
        from torchfit.cli.ui.output import write_output

        write_output(args.output, json.dumps(data, indent=2) + "\n", "--output")
    if failures:
        # One error, after the tables of what was read; under --json one object with both.
        if not args.json:
            from torchfit.cli.ui.matrix import render_probe

            render_probe(results)
        raise WheelsUnread(failures, data, bad_file=bad)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        from torchfit.cli.ui.matrix import render_probe

        render_probe(results)


def _url_wheel(file: IndexFile) -> Wheel:
    from torchfit.matrixcheck.wheels import parse_wheel

    w = parse_wheel(file)
    if w is None:
        raise BadInput(f"{file.filename}: not a Linux wheel file name")
    return w


def _targets(args: argparse.Namespace, failures: list[tuple[str, str]]) -> list[tuple[str, Any, list[str]]]:
    """(kind, target, CPython minors on the index) for every wheel to read; an index page
    that cannot be read is added to `failures`."""
    out: list[tuple[str, Any, list[str]]] = []
    modes = sum(bool(x) for x in (args.wheels, args.unknown, args.new)) + bool(
        args.torch and not (args.unknown or args.new))
    if modes == 0:
        raise BadInput("torchfit matrix probe needs a wheel (file or URL), --torch VERSION with "
                       "--variant NAME or --pypi, --unknown or --new")
    if args.wheels and (args.torch or args.variant or args.pypi or args.unknown or args.new):
        raise BadInput("give wheels or an index selection (--torch/--variant/--pypi/--unknown/--new), not both")
    from torchfit.index.sources import refuse_insecure
    from torchfit.redact import has_credentials

    for opt, url in [("WHEEL", w) for w in args.wheels] + [("--index-url", args.index_url),
                                                            ("--pypi-url", args.pypi_url)]:
        if url and has_credentials(url):  # requests would send them as Basic auth, in clear over http
            refuse_insecure(url, opt, getattr(args, "allow_insecure_index", False))
    for w in args.wheels:
        if w.startswith(("http://", "https://")):
            out.append(("url", w, []))
        elif os.path.isfile(w):
            if not w.endswith(".whl"):
                raise BadInput(f"{w}: not a .whl file")
            out.append(("file", w, []))
        else:
            raise BadInput(f"{w}: no such file (and not an http(s) URL)")
    if args.wheels:
        return out
    if args.pypi_url and not args.pypi:
        raise BadInput("--pypi-url is for --pypi")
    if args.torch and not (args.variant or args.pypi or args.unknown or args.new):
        raise BadInput("--torch needs --variant NAME (its index) or --pypi")
    return _index_targets(args, failures)


def _index_targets(args: argparse.Namespace, failures: list[tuple[str, str]]) -> list[tuple[str, Any, list[str]]]:
    """The wheels of the index pages the selection names (`_wanted`), each once; a page that
    cannot be read, or a release asked for by name that is not on it, is added to `failures`."""
    from torchfit.cli.settings import index_client
    from torchfit.errors import IndexMalformed, IndexUnavailable
    from torchfit.matrixcheck.probe import find_index_wheels
    from torchfit.redact import redact

    plats = ("x86_64", "aarch64") if args.platform == "all" else (args.platform,)
    client = None
    pages: dict[str, Any] = {}
    out: list[tuple[str, Any, list[str]]] = []
    seen: set[str] = set()
    failed_pages: set[str] = set()
    for idx, pypi, torch, variant, newer in _wanted(args):
        if idx not in pages:
            client = client or index_client(args)
            try:
                pages[idx] = client.project_page(idx, "torch")
            except (IndexUnavailable, IndexMalformed) as exc:
                from torchfit.cli.ui.matrix import render_note

                render_note(str(exc))
                failures.append(("torch's index page", exc.message))
                failed_pages.add(idx)
                pages[idx] = None
        page = pages[idx]
        if page is None:
            if idx not in failed_pages:  # the index has no torch page at all (404)
                failures.append(("torch's index page", f"{redact(idx)} has no page for torch"))
                failed_pages.add(idx)
            continue
        found = find_index_wheels(page.files, torch=torch, variant=variant, pypi=pypi,
                                  platforms=plats, python=args.python, newer_than=newer)
        if torch is not None and not found and not (args.unknown or args.new):
            # A release asked for by name that is not there is a failure, not "nothing to do".
            failures.append((f"torch {torch}", f"no {' or '.join(plats)} wheel of it on {redact(idx)}"))
        for wheel, pys in found:
            if wheel.file.url not in seen:
                seen.add(wheel.file.url)
                out.append(("index", wheel, pys))
    return out


def _wanted(args: argparse.Namespace) -> list[tuple[str, bool, str | None, str | None, Any]]:
    """The index pages to read: the matrix's builds with unknown facts (--unknown), the newest
    release's variants and PyPI (--new), PyPI (--pypi), or one variant's index (--variant): each
    (index URL, PyPI's?, torch, variant, newer than)."""
    from torchfit.cache import load_matrix
    from torchfit.compat.matrix import PYPI_SIMPLE
    from torchfit.matrixcheck import check as mc

    base = mc.check_base_url(args.index_url, "--index-url") if args.index_url else None
    pypi_url = mc.check_base_url(args.pypi_url, "--pypi-url") if args.pypi_url else PYPI_SIMPLE

    def variant_index(name: str) -> str:
        return base.replace("{variant}", name) if base and "{variant}" in base else \
            f"{(base or mc.DEFAULT_BASE).rstrip('/')}/{name}"

    wanted: list[tuple[str, bool, str | None, str | None, Any]] = []
    matrix = load_matrix(args.matrix)
    if args.unknown or args.new:
        builds = mc.select_builds(matrix, args.torch, args.variant)
        if args.unknown:
            for b in builds:
                if b.kind == "cpu":
                    continue
                arm = "aarch64" in b.platforms and b.kind == "cuda" and b.arch_aarch64 is None
                unknown = (b.arch is None and b.gfx is None) or arm or (
                    b.kind == "cuda" and (b.cudnn is None or b.nccl is None))
                if unknown:
                    wanted.append((mc.variant_index(b, base), False, str(b.torch), b.variant, None))
        if args.new:
            newest = matrix.releases[0]
            for name in sorted({b.variant for b in matrix.builds if b.torch == newest}):
                if args.variant and name != args.variant:
                    continue
                wanted.append((variant_index(name), False, None, name, newest))
            wanted.append((pypi_url, True, None, None, newest))
    elif args.pypi:
        wanted.append((pypi_url, True, args.torch, None, None))
    else:
        if not args.variant:
            raise BadInput("--torch needs --variant NAME or --pypi")
        wanted.append((variant_index(args.variant), False, args.torch, args.variant, None))
    return wanted


def run_update_from_probe(args: argparse.Namespace, matrix_text: Callable[[str | None], tuple[str, str]]) -> int:
    from torchfit.cache import load_matrix
    from torchfit.matrixcheck.probe import WheelFacts
    from torchfit.matrixcheck.probeupdate import propose_from_probe

    facts: list[WheelFacts] = []
    for path in args.from_probe:
        try:
            with open(path, encoding="utf-8") as fh:
                data = decode_json(fh.read())
            if isinstance(data, dict):
                data = [data]
            if not isinstance(data, list):
                raise ValueError("expected a JSON list of probe records")
            facts.extend(WheelFacts.from_json(d) for d in data)
        except (OSError, ValueError, TypeError) as exc:
            raise BadInput(f"--from-probe {path}: {exc}") from None
    matrix = load_matrix(args.matrix)
    text, path = matrix_text(args.matrix)
    diff, summary = propose_from_probe(text, matrix, facts, path=path)
    from torchfit.cli.ui.matrix import render_note, write_proposed_changes

    for line in summary:
        render_note(line)
    write_proposed_changes(diff, args.output)
    return 1 if diff else 0
