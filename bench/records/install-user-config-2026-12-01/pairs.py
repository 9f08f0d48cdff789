"""Paired per-round ratios from bench_install --json files (each round: now, baseline, anchor back to back)."""
import json
import statistics as st
import sys

for f in sys.argv[1:]:
    d = json.load(open(f))
    for name in ("cpu", "cuda"):
        if name not in d:
            continue
        r = d[name]
        for mode, rows in r["runs"]["anchor"].items():
            a = [x["seconds"] for x in rows]
            line = [f"{f.split('/')[-1]} {name} {r['configuration']} {mode}: load {r['load_average']['median']:.1f}; anchor {st.median(a):.2f}"]
            labs = [k for k in r["runs"] if k != "anchor"]
            for lab in labs:
                t = [x["seconds"] for x in r["runs"][lab][mode]]
                line.append(f"{lab} {st.median(t):.2f} = {st.median(t)/st.median(a):.2f}x (paired median {st.median(x/y for x, y in zip(t, a)):.2f}x)")
            if len(labs) == 2:
                n = [x["seconds"] for x in r["runs"][labs[0]][mode]]; o = [x["seconds"] for x in r["runs"][labs[1]][mode]]
                line.append(f"{labs[0]}/{labs[1]} paired median {st.median(x/y for x, y in zip(n, o)):.2f}")
            print("; ".join(line))
