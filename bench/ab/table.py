#!/usr/bin/env python3
"""The A/B command's table (bench/ab.sh): reads the runs' JSON lines and
prints, per workload and metric, the old side's median and range, the new
side's, and new/old of the medians.

usage: table.py RESULTS.jsonl OLD_LABEL NEW_LABEL

Each line of RESULTS.jsonl is one run, written by ab.sh:
  {"side": "old"|"new", "round": N, "workload": W, "ok": bool,
   "wall_s": s, "host_busy_s": s or null, "error": text (when not ok),
   "run": the harness's JSON line (when ok)}
"""

import json
import math
import os
import statistics
import sys


def fmt(v):
    a = abs(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    if a >= 0.1:
        return "%.3f" % v
    if a == 0:
        return "0"
    return "%.3g" % v


def cell(vals):
    if not vals:
        return "n/a"
    med = statistics.median(vals)
    if len(vals) == 1:
        return fmt(med)
    lo, hi = min(vals), max(vals)
    sep = " to " if lo < 0 or hi < 0 else "-"
    return "%s (%s%s%s)" % (fmt(med), fmt(lo), sep, fmt(hi))


def main():
    path, old_label, new_label = sys.argv[1], sys.argv[2], sys.argv[3]
    runs = [json.loads(line) for line in open(path) if line.strip()]
    workloads = []  # in the order they ran
    keys = {}  # workload -> metric keys in the order the harness gave them
    vals = {}  # (workload, metric, side) -> [values]
    failed = {}  # (workload, side) -> count
    others = {"old": [], "new": []}  # other processes' busy cores per run
    for r in runs:
        w, side = r["workload"], r["side"]
        if w not in workloads:
            workloads.append(w)
            keys[w] = []
        if not r.get("ok"):
            failed[(w, side)] = failed.get((w, side), 0) + 1
            continue
        prev = None
        for k, v in r["run"]["metrics"].items():
            # A figure a run left out (a ratio over nothing) goes, when a
            # later run has it, after the figure it follows there.
            if k not in keys[w]:
                keys[w].insert(keys[w].index(prev) + 1 if prev is not None else 0, k)
            prev = k
            vals.setdefault((w, k, side), []).append(v)
        busy, wall = r.get("host_busy_s"), r.get("wall_s")
        if busy is not None and wall:
            others[side].append(max(0.0, busy - r["run"].get("cpu_s", 0)) / wall)

    rounds = max([r["round"] for r in runs], default=-1) + 1
    head = ["workload", "metric", "old: " + old_label, "new: " + new_label, "new/old", ""]
    rows = []
    for w in workloads:
        for k in keys[w]:
            o, n = vals.get((w, k, "old"), []), vals.get((w, k, "new"), [])
            r = "n/a"
            if o and n:
                mo, mn = statistics.median(o), statistics.median(n)
                if mo > 0 and mn >= 0:
                    r = "%.2fx" % (mn / mo)
            # "apart": the two sides' ranges do not overlap, which with 3
            # or more runs a side is unlikely to come of noise alone.
            note = ""
            if len(o) >= 2 and len(n) >= 2 and (max(o) < min(n) or max(n) < min(o)):
                note = "apart"
            rows.append([w, k, cell(o), cell(n), r, note])
        for side in ("old", "new"):
            if (w, side) in failed:
                rows.append([w, "FAILED runs (%s)" % side, "", "", str(failed[(w, side)]), ""])
    widths = [max(len(str(x[i])) for x in [head] + rows) for i in range(len(head))]
    line = lambda x: "  ".join(str(c).ljust(widths[i]) if i < 2 else str(c).rjust(widths[i])
                               for i, c in enumerate(x)).rstrip()
    print(line(head))
    prev = None
    for x in rows:
        if prev is not None and x[0] != prev:
            print()
        prev = x[0]
        print(line(x))
    print()
    print("%d round(s); each cell: median over the runs (min-max); new/old: ratio of the medians;"
          " 'apart': the ranges do not overlap." % rounds)
    if rounds >= 2:
        # Two sides of the same distribution have ranges apart with
        # probability 2/C(2n, n) (n runs a side): the false alarms to expect.
        p = 2 / math.comb(2 * rounds, rounds)
        print("With %d runs a side, two sides that do not differ are 'apart' with probability %.2g:"
              " expect about %.1f of these %d rows apart by chance alone." % (rounds, p, p * len(rows), len(rows)))
    for side, label in (("old", old_label), ("new", new_label)):
        o = others[side]
        if o:
            print("other processes kept the host busy during the %s runs: %.2f cores on average,"
                  " %.2f in the busiest run" % (side, statistics.mean(o), max(o)))
    # A busy host as the bench commands define it: other processes kept at
    # least a quarter of a core, or a tenth of the CPUs, busy on average.
    limit = max(0.25, (os.cpu_count() or 1) / 10)
    busy = sum(1 for x in others["old"] + others["new"] if x >= limit)
    if busy:
        print("WARNING: other processes kept the host busy (%.2f cores or more) during %d of %d runs:"
              " their figures are inflated; rerun on a quiet host, or with more rounds."
              % (limit, busy, len(others["old"]) + len(others["new"])))
    if failed:
        print("WARNING: some runs failed; their errors are above, and in the results file if -out was given.")


if __name__ == "__main__":
    main()
