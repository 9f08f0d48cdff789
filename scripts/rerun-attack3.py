#!/usr/bin/env python3
"""Re-run the repros of an attack campaign (round 3: issue 21; round 4: issue 25) and count the defects per class.

Each engineer's repros are one file under scripts/attack3/ (a list `CASES` of
`_common.Case`); every case runs in its own directory, HOME and TMPDIR, against the src/
given by --src (this checkout's by default), as `python -m torchfit` run by the
interpreter that runs this script (its bin/ holds uv, as `pip install torchfit` puts it).

Classes (issue 21): 0 data loss, 1 full disks, 2 corrupt state, 3 hostile servers and
archives, 4 paths, 5 tokens in URLs, 6 terminals and pipes, 7 shared machines,
8 concurrency and signals.

Round 4's repros are under scripts/attack4/ (the same `Case`, from attack3/_common.py); its
classes are the kinds of defect issue 25 counted (scripts/attack4/_classes.py), and its
"before" is 06e855a: `git worktree add /tmp/old-06e 06e855a`, then
`python scripts/rerun-attack3.py --round 4 --src /tmp/old-06e/src`.

Usage: python scripts/rerun-attack3.py [--round 3|4] [--src DIR] [--only 0,5,2a-lock] [--out DIR] [--keep]
Before/after: `git worktree add /tmp/old-82c 82c371b`, then
`python scripts/rerun-attack3.py --src /tmp/old-82c/src` beside `python scripts/rerun-attack3.py`.
Exit status: 0 when no case shows its defect.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES_DIR = Path(__file__).resolve().parent / "attack3"
ROUNDS = {3: CASES_DIR, 4: Path(__file__).resolve().parent / "attack4"}
sys.path.insert(0, str(CASES_DIR))
from _common import Box, Case, Shared

CLASSES = {0: "data loss", 1: "full disks", 2: "corrupt state", 3: "hostile servers/archives",
           4: "paths", 5: "tokens in URLs", 6: "terminals/pipes", 7: "shared machines",
           8: "concurrency/signals"}


def load_classes(cases_dir: Path) -> dict[int, str]:
    """A round's classes: its _classes.py's CLASSES, or round 3's."""
    path = cases_dir / "_classes.py"
    if not path.is_file():
        return CLASSES
    spec = importlib.util.spec_from_file_location(f"classes_{cases_dir.name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.CLASSES)


def load_cases(cases_dir: Path = CASES_DIR) -> list[Case]:
    cases: list[Case] = []
    for path in sorted(cases_dir.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"{cases_dir.name}_{path.stem.replace('-', '_')}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases.extend(getattr(module, "CASES", []))
    ids = [c.id for c in cases]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        sys.exit(f"rerun-attack3: duplicate case ids: {sorted(dupes)}")
    return cases


def selected(cases: list[Case], only: str | None) -> list[Case]:
    if not only:
        return cases
    want = {w.strip() for w in only.split(",") if w.strip()}
    return [c for c in cases if c.id in want or str(c.klass) in want]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--round", type=int, choices=sorted(ROUNDS), default=3, help="which campaign")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the src/ of the checkout under test")
    ap.add_argument("--only", help="comma-separated classes (0-8) or case ids")
    ap.add_argument("--out", type=Path, help="write results.json and results.md here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    src = args.src.resolve()
    if not (src / "torchfit" / "__main__.py").is_file():
        print(f"rerun-attack3: {src} is not a torchfit src/ directory", file=sys.stderr)
        return 2
    cases = selected(load_cases(ROUNDS[args.round]), args.only)
    classes = load_classes(ROUNDS[args.round])
    root = Path(tempfile.mkdtemp(prefix="rerun-attack3-"))
    shared = Shared(root, src)
    rows = []
    print(f"src: {src}\n{'case':28} {'class':>5} {'s':>6}  verdict")
    for case in cases:
        box = Box(shared, root / case.id)
        start = time.monotonic()
        try:
            seen = case.fn(box)
            verdict = "defect" if seen else "ok"
        except Exception as exc:  # the harness, not torchfit: reported apart
            seen, verdict = f"{type(exc).__name__}: {exc}", "harness-error"
            traceback.print_exc()
        finally:
            box.close()
        took = round(time.monotonic() - start, 1)
        rows.append({"id": case.id, "class": case.klass, "what": case.what, "verdict": verdict,
                     "seen": seen, "seconds": took})
        print(f"{case.id:28} {case.klass:>5} {took:>6}  {verdict}{': ' + seen if seen else ''}", flush=True)
    print("\nclass                          defects / cases")
    for k, name in classes.items():
        mine = [r for r in rows if r["class"] == k]
        if mine:
            bad = sum(r["verdict"] == "defect" for r in mine)
            err = sum(r["verdict"] == "harness-error" for r in mine)
            print(f"{k} {name:28} {bad:>3} / {len(mine)}" + (f"  ({err} harness errors)" if err else ""))
    total = sum(r["verdict"] == "defect" for r in rows)
    print(f"  {'total':28} {total:>3} / {len(rows)}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps({"src": str(src), "cases": rows}, indent=2) + "\n")
        lines = ["| case | class | s | verdict | seen |", "|---|---|---|---|---|"]
        lines += [f"| {r['id']} | {r['class']} | {r['seconds']} | {r['verdict']} | {r['seen'] or ''} |" for r in rows]
        (args.out / "results.md").write_text("\n".join(lines) + "\n")
    if args.keep:
        print(f"work directory kept: {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if total == 0 and all(r["verdict"] != "harness-error" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
