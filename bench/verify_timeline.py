"""The timeline of one kept `torchfit verify` run: every stage of the inspection and of
each rank, in seconds from the first record, side by side.

    torchfit verify ... --keep --json > r.json
    python bench/verify_timeline.py "$(python -c 'import json; print(json.load(open("r.json"))["work_dir"])')"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    work = Path(sys.argv[1])
    files = {"inspect": work / "inspect.jsonl"}
    files.update({p.stem: p for p in sorted((work / "ddp").glob("rank-*.jsonl"))})
    rows = []
    for who, path in files.items():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            what = rec.get("stage") or rec.get("key") or rec.get("what") or ""
            step = rec.get("step")
            rows.append((rec["t"], who, rec["kind"], f"{what}{f' ({step})' if step else ''}"))
    t0 = min(r[0] for r in rows)
    for t, who, kind, what in sorted(rows):
        if kind in ("stage", "start", "done", "timing") or what in ("devices", "import_s", "kernels"):
            print(f"{t - t0:7.3f}  {who:8s} {kind:7s} {what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
