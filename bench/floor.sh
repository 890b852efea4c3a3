#!/usr/bin/env bash
# The floor study's loop (../shared/floorlib) on this checkout's library.
#
#   bash bench/floor.sh               the floor's own run.sh: every design
#                                     (REPS=3 DESIGNS="std lib libkey perpmark"
#                                     GS="2 6"), one JSON line per run
#   bash bench/floor.sh -ab REV       the library's designs ("lib": s.AfterFunc
#                                     + Cancel; "libkey": the same with ByKey)
#                                     on REV and on this checkout, interleaved:
#                                     REPS=5 rounds, each running every design
#                                     at each G in GS on both sides (the old
#                                     side first in odd rounds), one fresh
#                                     process per run, each started when the
#                                     host has been quiet for a second; one
#                                     JSON line per run with its side and G,
#                                     then a table of the medians of CPU per
#                                     schedule+cancel pair, with their ranges
#
# The floor is written against the library's API of the day it was made;
# where a tree has another (the handle named Timer, ByKey in place of
# Schedule(key, ...)), the floor's copy for it is rewritten to that API
# before it is built: the same loop, the same calls.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
floor=$(cd "$here/../shared/floorlib" 2>/dev/null && pwd) || { echo "floor.sh: no ../shared/floorlib beside the checkout" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'git -C "$here" worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

# copyFloor DIR TREE: a copy of the floor in DIR, its calls rewritten to
# TREE's API if TREE has no Scheduler.Schedule.
copyFloor() {
	cp -r "$floor" "$1"
	if ! grep -q 'func (s \*Scheduler) Schedule(' "$2"/*.go; then
		sed -i -e 's/shardwheel\.Timeout\b/shardwheel.Timer/g' \
			-e 's/libS\.Schedule(key, delay, \(func() {[^}]*}\))/libS.AfterFunc(delay, \1, shardwheel.ByKey(key))/' "$1"/*.go
	fi
}

if [ "${1:-}" != -ab ]; then
	copyFloor "$tmp/floorlib" "$here"
	cd "$here" && bash "$tmp/floorlib/run.sh"
	exit
fi
rev=${2:?usage: bash bench/floor.sh -ab REV}
REPS=${REPS:-5}; GS=${GS:-"2 6"}; DESIGNS=${DESIGNS:-"lib libkey"}
git -C "$here" worktree add --detach -q "$tmp/old" "$rev"
build() { # side tree
	copyFloor "$tmp/floor-$1" "$2"
	(cd "$tmp/floor-$1" && go mod edit -replace github.com/shardwheel/shardwheel="$2" && go mod tidy >/dev/null 2>&1 && go build -o "$tmp/floor-$1.bin" .)
}
build old "$tmp/old"
build new "$here"

busy() { # cores busy over one second, whole host
	read -r _ a b c _ _ f g _ < /proc/stat; sleep 1; read -r _ A B C _ _ F G _ < /proc/stat
	python3 -c "print(round((($A+$B+$C+$F+$G)-($a+$b+$c+$f+$g))/100,2))"
}
out="$tmp/runs.jsonl"
for r in $(seq "$REPS"); do
	sides="old new"; [ $((r % 2)) = 1 ] || sides="new old"
	for g in $GS; do
		for d in $DESIGNS; do
			for side in $sides; do
				for _ in $(seq 30); do python3 -c "import sys; sys.exit(0 if $(busy) < 0.3 else 1)" && break; done
				line=$("$tmp/floor-$side.bin" -design "$d" -workers "$g" | tail -1)
				echo "{\"side\":\"$side\",\"g\":$g,\"round\":$r,${line#\{}" | tee -a "$out"
			done
		done
	done
done
python3 - "$out" "$rev" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print(f"\nCPU per schedule+cancel pair, ns: median (min-max) over {max(r['round'] for r in runs)} rounds; old = {sys.argv[2]}, new = this checkout")
for g in sorted({r["g"] for r in runs}):
    for d in sorted({r["design"] for r in runs}):
        cell = {}
        for side in ("old", "new"):
            xs = [r["cpu_ns_per_pair"] for r in runs if r["g"] == g and r["design"] == d and r["side"] == side]
            cell[side] = (statistics.median(xs), min(xs), max(xs))
        o, n = cell["old"], cell["new"]
        apart = " apart" if n[1] > o[2] or o[1] > n[2] else ""
        print(f"  {g} goroutines {d:7s} old {o[0]:6.1f} ({o[1]:.0f}-{o[2]:.0f})  new {n[0]:6.1f} ({n[1]:.0f}-{n[2]:.0f})  new/old {n[0]/o[0]:.2f}x{apart}")
EOF
