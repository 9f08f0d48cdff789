"""`torchfit matrix check | update | show`: keep data/matrix.toml true, and show it.

`check` compares the matrix with the live indexes (installer.matrixcheck) and exits
1 on drift; `update` prints the same comparison as a unified diff for review and
never rewrites the file; `show` prints the matrix as a table. Imports stay inside
the functions: `add_parser` runs on every torchfit start.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from torchfit.errors import BadInput
from torchfit.inputs import seconds
from torchfit.jsontypes import JsonObject
from torchfit.progress import StderrProgress

if TYPE_CHECKING:
    from torchfit.compat.matrix import Build, Matrix



def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    p = subparsers.add_parser("matrix", help="check the compatibility matrix against the indexes, "
                              "propose updates, show it", epilog=epilog)
    sub = p.add_subparsers(dest="matrix_command", metavar="ACTION", parser_class=type(p))

    check = sub.add_parser("check", help="compare the matrix with the package indexes; exit 1 on drift",
                           epilog=epilog)
    _index_options(check)
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument("--quiet", action="store_true", help="list disagreements only, not notes")
    check.add_argument("--known", metavar="FILE",
                       help="accept the findings this TOML file lists ([[finding]]: fact, package, version, "
                            "reason): reported as known, exit 0; new ones still exit 1; one no longer found is "
                            "reported stale")

    upd = sub.add_parser("update", help="propose matrix changes from the indexes as a unified diff "
                         "(never rewrites the file)", epilog=epilog)
    _index_options(upd)
    upd.add_argument("--output", "-o", metavar="FILE", help="write the diff to FILE (default: stdout)")
    upd.add_argument("--from-probe", metavar="JSON", nargs="+", default=None,
                     help="propose the facts measured by `torchfit matrix probe --json` (files it wrote) "
                          "instead of reading the indexes")

    probe = sub.add_parser("probe", help="measure a torch build's facts from its wheel (METADATA, tags, "
                           "compiled arch list, glibc floor) without installing it", epilog=epilog)
    probe.add_argument("wheels", nargs="*", metavar="WHEEL",
                       help="a wheel file or an http(s) URL of one (read with range requests)")
    probe.add_argument("--torch", metavar="VERSION",
                       help="probe this release on the index (2.14.1; 2.14 = every 2.14.x)")
    probe.add_argument("--variant", metavar="NAME", help="the variant index to read (cu130, rocm6.4, cpu)")
    probe.add_argument("--pypi", action="store_true", help="read PyPI (its default builds) instead")
    probe.add_argument("--unknown", action="store_true",
                       help="probe every matrix build (of --torch/--variant) with an unknown arch list, "
                            "cuDNN or NCCL, on its own index")
    probe.add_argument("--new", action="store_true",
                       help="probe the releases the variant indexes have beyond the matrix's newest")
    probe.add_argument("--platform", choices=["x86_64", "aarch64", "all"], default="all",
                       help="index wheels of this platform (default: all)")
    probe.add_argument("--python", metavar="TAG", help="prefer this CPython tag (default cp311)")
    probe.add_argument("--glibc", action="store_true",
                       help="measure the real glibc floor: reads every ELF file of the wheel (big)")
    probe.add_argument("--embedded", action="store_true",
                       help="cross-check the arch list against the GPU code embedded in "
                            "libtorch_cuda.so / libtorch_hip.so (big)")
    probe.add_argument("--json", action="store_true", help="print a JSON list, one object per wheel")
    probe.add_argument("--output", "-o", metavar="FILE", help="also write the JSON list to FILE")
    probe.add_argument("--index-url", metavar="URL",
                       help="replaces https://download.pytorch.org/whl ('{variant}' is substituted)")
    probe.add_argument("--pypi-url", metavar="URL", default=None, help="the PyPI simple index for --pypi")
    probe.add_argument("--timeout", type=float, default=30.0, metavar="S",
                       help="seconds per HTTP request attempt (default 30)")
    probe.add_argument("--no-cache", action="store_true", help="do not use the HTTP cache")
    probe.add_argument("--allow-insecure-index", action="store_true",
                       help="send the credentials of a plain http:// URL (they travel unencrypted)")
    probe.add_argument("--matrix", metavar="FILE", help=argparse.SUPPRESS)
    probe.add_argument("--backoff", type=float, default=0.5, help=argparse.SUPPRESS)

    show = sub.add_parser("show", help="print the matrix as a table", epilog=epilog)
    show.add_argument("--torch", metavar="VERSION", help="a release or line: 2.8.0, 2.8, '>=2.6'")
    show.add_argument("--variant", metavar="NAME", help="one variant: cu128, rocm6.4, cpu")
    show.add_argument("--json", action="store_true", help="print a JSON list, one object per build")
    show.add_argument("--unknown", action="store_true",
                      help="list every fact still unknown, why, and which builds it blocks")
    show.add_argument("--matrix", metavar="FILE", help=argparse.SUPPRESS)
    from torchfit.cli.options import add_verbose

    for q in (check, upd, show, probe):
        add_verbose(q, "show tracebacks and each page read")


def _index_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index-url", metavar="URL",
                   help="replaces https://download.pytorch.org/whl for the variant indexes; "
                        "'{variant}' is substituted, else the variant is appended (a mirror: "
                        "https://user:TOKEN@mirror.example/whl, or a file:// tree; default: the "
                        "site's torch-index-url, see `torchfit config`)")
    p.add_argument("--pypi", action="store_true",
                   help="check the PyPI-default builds (the matrix's `pypi` rows) against PyPI instead")
    p.add_argument("--pypi-url", metavar="URL", default=None,
                   help="the PyPI simple index for --pypi (default: the site's index-url, else "
                        "https://pypi.org/simple)")
    p.add_argument("--torch", metavar="VERSION", help="only this release or line: 2.8.0, 2.8, '>=2.6'")
    p.add_argument("--variant", metavar="NAME", help="only this variant: cu128, rocm6.4, cpu")
    p.add_argument("--timeout", type=seconds(), default=30.0, metavar="S",
                   help="seconds per HTTP request attempt (default 30; failed attempts are retried 3 times)")
    p.add_argument("--allow-insecure-index", action="store_true",
                   help="accept plain http:// indexes (requests and credentials travel unencrypted)")
    p.add_argument("--no-cache", action="store_true",
                   help="do not use the HTTP cache in $XDG_CACHE_HOME/torchfit/http")
    p.add_argument("--matrix", metavar="FILE", help=argparse.SUPPRESS)
    p.add_argument("--backoff", type=seconds(allow_zero=True, maximum=60), default=0.5, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "matrix_command", None)
    if action == "show":
        return _show(args)
    if action == "probe":
        from torchfit.cli.commands._matrix_probe import run_probe

        return run_probe(args, StderrProgress().info)
    if action == "update" and args.from_probe:
        from torchfit.cli.commands._matrix_probe import run_update_from_probe

        return run_update_from_probe(args, _matrix_text)
    if action in ("check", "update"):
        return _check(args, update=action == "update")
    raise BadInput("torchfit matrix needs an action: check, update, show or probe (see torchfit matrix --help)")


def _check(args: argparse.Namespace, *, update: bool) -> int:
    import os

    from torchfit.cache import load_matrix
    from torchfit.cli.settings import index_client, matrix_indexes
    from torchfit.compat.matrix import PYPI_SIMPLE
    from torchfit.matrixcheck import check as mc
    from torchfit.matrixcheck.known import apply_known, load_known
    from torchfit.matrixcheck.update import propose_update

    if args.pypi_url and not args.pypi:
        raise BadInput("--pypi-url is for --pypi (the PyPI-default builds)")
    if args.pypi and args.index_url:
        raise BadInput("--index-url names the variant indexes; with --pypi use --pypi-url")
    base_url, pypi_given = matrix_indexes(args, os.environ)
    base = None if args.pypi or base_url is None else _index_url(base_url, "--index-url", args)
    pypi_url = _index_url(pypi_given, "--pypi-url", args) if pypi_given else PYPI_SIMPLE
    known = load_known(args.known) if getattr(args, "known", None) else ()
    matrix = load_matrix(args.matrix)
    local = any(u.startswith("file:") for u in (base or "", pypi_url))
    report = mc.check_matrix(
        matrix, index_client(args, read_local=local), base=base, torch=args.torch, variant=args.variant,
        pypi=args.pypi, pypi_url=pypi_url, progress=StderrProgress() if getattr(args, "verbose", False) else None,
    )
    if update:
        text, path = _matrix_text(args.matrix)
        diff = propose_update(text, matrix, report, path=path)
        from torchfit.cli.ui.matrix import render_check_report, write_proposed_changes

        render_check_report(report, notes=False, stderr=True)
        write_proposed_changes(diff, args.output)
        return 0 if report.ok else 1
    report = apply_known(report, known)
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("matrix-check", report.to_json()))
    else:
        from torchfit.cli.ui.matrix import render_check_report

        render_check_report(report, notes=not args.quiet)
    return 0 if report.ok else 1


def _index_url(url: str, option: str, args: argparse.Namespace) -> str:
    """An index `matrix check` may read, checked before any request (a token never goes out over
    plain http)."""
    from torchfit.index.sources import refuse_insecure
    from torchfit.matrixcheck.check import check_base_url

    checked = check_base_url(url, option)
    refuse_insecure(url, option, args.allow_insecure_index)
    return checked


def _matrix_text(path: str | None) -> tuple[str, str]:
    """The matrix's raw text, for the diff (the typed facts come from compat.matrix)."""
    if path is None:
        from torchfit.compat.datafiles import read_data_text

        return read_data_text("matrix.toml"), "src/torchfit/data/matrix.toml"
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(), path.lstrip("/")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--matrix {path}: cannot read ({exc})") from None


# ---------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------


def build_row(b: Build) -> JsonObject:
    """One build as the JSON object `matrix show --json` prints."""
    return {
        "torch": str(b.torch),
        "variant": b.variant,
        "kind": b.kind,
        "cuda": b.cuda,
        "rocm": b.rocm,
        "cudnn": b.cudnn,
        "nccl": b.nccl,
        "pythons": [f"{a}.{m}" for a, m in b.pythons],
        "pythons_aarch64": [f"{a}.{m}" for a, m in b.pythons_aarch64],
        "platforms": list(b.platforms),
        "glibc": str(b.glibc) if b.glibc else None,
        "glibc_aarch64": str(b.glibc_aarch64) if b.glibc_aarch64 else None,
        "arch": ";".join(str(a) for a in b.arch) if b.arch is not None else None,
        "arch_aarch64": ";".join(str(a) for a in b.arch_aarch64) if b.arch_aarch64 is not None else None,
        "gfx": ";".join(b.gfx) if b.gfx is not None else None,
        "torchvision": b.torchvision,
        "torchaudio": b.torchaudio,
        "index_url": b.index_url,
        "pypi_default": b.pypi_default,
        "evidence": dict(b.evidence),
        "sources": dict(b.sources),
        "requires_python": dict(b.requires_python),
        "pythons_freethreaded": {k: ["any"] if v == ((0, 0),) else [f"{a}.{m}" for a, m in v]
                                 for k, v in b.pythons_freethreaded.items()},
        "line": b.line,
    }


def _show(args: argparse.Namespace) -> int:
    from torchfit.cache import load_matrix
    from torchfit.matrixcheck.check import select_builds

    matrix = load_matrix(args.matrix)
    builds = select_builds(matrix, args.torch, args.variant)
    if args.unknown:
        return _show_unknown(matrix, builds, as_json=args.json)
    if args.json:
        print(json.dumps([build_row(b) for b in builds], indent=2))
        return 0
    from torchfit.cli.ui.matrix import render_matrix

    render_matrix(builds, matrix.path)
    return 0


def _show_unknown(matrix: Matrix, builds: list[Build], *, as_json: bool) -> int:
    """`matrix show --unknown`: one row per unknown fact of one matrix entry (compat.matrix.iter_unknowns)."""
    from torchfit.compat.matrix import iter_unknowns

    chosen = {id(b) for b in builds}
    rows = [u for u in iter_unknowns(matrix) if not u.builds or any(id(b) in chosen for b in u.builds)]
    if as_json:
        print(json.dumps([{
            "fact": u.fact,
            "variant": u.builds[0].variant if u.builds else None,
            "torch": [str(b.torch) for b in u.builds],
            "line": u.line,
            "blocks": u.blocks,
            "reason": u.reason,
        } for u in rows], indent=2))
        return 0
    from torchfit.cli.ui.matrix import render_unknowns

    render_unknowns(rows, matrix.path)
    return 0
