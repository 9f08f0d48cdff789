"""`torchfit pack --lock FILE -o DIR`: a lock's files, checked, in a directory to carry across an
air gap; `torchfit install --offline --pack DIR` installs from it there (export/pack.py)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from torchfit.inputs import seconds


def add_parser(subparsers: Any, epilog: str) -> None:
    p = subparsers.add_parser(
        "pack",
        help="put a lock's files (checked against its sha256) in a directory to carry to an air-gapped site",
        description="Write DIR with the lock, a PEP 503 tree of the torch family (DIR/simple), the other files "
                    "(DIR/wheels) and a README; every file checked against the lock's sha256, every path inside "
                    "relative. Run again to resume. Install on the other side with "
                    "`torchfit install --offline --pack DIR --prefix P`.",
        epilog=epilog + " See `torchfit docs mirrors` (Air-gapped clusters).",
    )
    p.add_argument("--lock", required=True, metavar="FILE", help="the lock (PREFIX/pylock.toml of an env torchfit built)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the pack's directory (new, or this lock's pack)")
    p.add_argument("--timeout", type=seconds(), default=60.0, metavar="SECONDS",
                   help="per request (default 60); a download may take an hour in all")
    p.add_argument("--allow-insecure-index", action="store_true",
                   help="accept plain http:// file URLs (files travel unencrypted; their sha256 is checked)")


def run(args: argparse.Namespace) -> int:
    from torchfit import __version__
    from torchfit.export.pack import make_pack
    from torchfit.index.client import IndexClient
    from torchfit.lock.pylock import load_lock
    from torchfit.progress import StderrProgress

    lock = load_lock(args.lock)
    progress = StderrProgress()
    client = IndexClient(timeout=args.timeout, retries=3, deadline=3600.0, progress=progress,
                         allow_insecure=args.allow_insecure_index, use_cache=False)

    def fetch(url: str, fh: Any) -> tuple[int, str]:
        return client.download(url, fh)

    result = make_pack(lock, args.lock, os.path.abspath(args.output), fetch=fetch, say=progress.info,
                       version=__version__)
    from torchfit.inputs import shown

    sys.stderr.write(f"torchfit: wrote the pack {shown(args.output)}: {result.files} files ({result.fetched} fetched, "
                     f"{result.kept} already there), each checked against the lock's sha256\n")
    return 0
