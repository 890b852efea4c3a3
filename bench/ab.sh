#!/usr/bin/env bash
# The A/B command: the same workloads on an earlier revision of shardwheel
# and on this checkout (or a second revision), interleaved, one fresh
# process per run, and a table of the two sides' medians and ranges.
#
#   bash bench/ab.sh [-rounds N] [-quick] [-workloads a,b] [-out FILE] REV [NEWREV]
#
# REV is the old side, any revision git knows (9a175ea, HEAD~3, a tag).
# NEWREV, if given, is the new side; by default the new side is the
# working tree this script lives in, uncommitted changes included.
# -rounds N    rounds (default 5; 1 with -quick): each round runs every
#              workload on both sides, each run a process of its own, the
#              old side first in odd rounds and the new side in even ones
# -quick       small loads and short windows, for a CI smoke run (also
#              AB_QUICK=1): about 20-35 s on 2 CPUs, builds included
# -workloads   a comma-separated subset of wtcancel,churn,burst,rate
# -out FILE    also write every run's JSON line (with its side, round and
#              the host's busy time) to FILE
#
# It exits 0 when every run succeeded, 1 when a build or a run failed (the
# table then shows the failed runs), 2 on a usage error.
#
# Each side gets a harness built from the one source in bench/ab/_harness
# (this checkout's), in a module of its own whose go.mod replaces the
# library by that side's tree: the old side's tree is a detached git
# worktree in a temporary directory, removed on exit. The table is
# bench/ab/table.py's. BENCHMARKS.md ("Comparing with an earlier
# revision") says what the workloads measure and how to read the table.
set -euo pipefail

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit "${1:-2}"
}

rounds=""
quick=${AB_QUICK:-0}
[ "$quick" = 0 ] || quick=1
workloads="wtcancel,churn,burst,rate"
out=""
args=()
while [ $# -gt 0 ]; do
	case $1 in
	-rounds | --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
	-rounds=* | --rounds=*) rounds=${1#*=}; shift ;;
	-quick | --quick) quick=1; shift ;;
	-workloads | --workloads) [ $# -ge 2 ] || usage; workloads=$2; shift 2 ;;
	-workloads=* | --workloads=*) workloads=${1#*=}; shift ;;
	-out | --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
	-out=* | --out=*) out=${1#*=}; shift ;;
	-h | -help | --help) usage 0 ;;
	-*) echo "ab.sh: unknown flag $1" >&2; usage ;;
	*) args+=("$1"); shift ;;
	esac
done
if [ ${#args[@]} -lt 1 ] || [ ${#args[@]} -gt 2 ]; then
	echo "ab.sh: want REV [NEWREV]" >&2
	usage
fi
if [ -z "$rounds" ]; then
	if [ "$quick" = 1 ]; then rounds=1; else rounds=5; fi
fi
case $rounds in
'' | *[!0-9]* | 0) echo "ab.sh: -rounds wants a positive integer, got '$rounds'" >&2; exit 2 ;;
esac
IFS=, read -r -a wl <<<"$workloads"
for w in "${wl[@]}"; do
	case $w in
	wtcancel | churn | burst | rate) ;;
	*) echo "ab.sh: unknown workload '$w' (want wtcancel, churn, burst, rate)" >&2; exit 2 ;;
	esac
done
command -v go >/dev/null || { echo "ab.sh: go is not on PATH" >&2; exit 1; }
command -v python3 >/dev/null || { echo "ab.sh: python3 is not on PATH (it prints the table)" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
resolve() {
	git -C "$root" rev-parse --verify --quiet "$1^{commit}" ||
		{ echo "ab.sh: '$1' is not a revision of $root" >&2; exit 2; }
}
oldsha=$(resolve "${args[0]}")
newsha=""
[ ${#args[@]} -eq 2 ] && newsha=$(resolve "${args[1]}")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/shardwheel-ab.XXXXXX")
worktrees=()
cleanup() {
	for wt in ${worktrees[@]+"${worktrees[@]}"}; do
		git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || true
	done
	rm -rf "$tmp"
	git -C "$root" worktree prune >/dev/null 2>&1 || true
}
# A signal ends the run in progress (wait returns at once for a trapped
# signal, while a command in the foreground would finish first), then the
# EXIT trap cleans up.
child=""
stop() {
	echo >&2
	echo "ab.sh: interrupted" >&2
	# The builds' subshells run go in a child of their own: end those too.
	for c in $child; do pkill -TERM -P "$c" 2>/dev/null || true; done
	# shellcheck disable=SC2086 # child is a list of process ids
	[ -z "$child" ] || kill $child 2>/dev/null || true
	wait 2>/dev/null || true
	exit "$1"
}
trap cleanup EXIT
trap 'stop 130' INT
trap 'stop 143' TERM

# The two trees.
addtree() { # addtree NAME SHA: a detached worktree of SHA at $tmp/NAME
	git -C "$root" worktree add --detach "$tmp/$1" "$2" >"$tmp/$1.log" 2>&1 ||
		{ cat "$tmp/$1.log" >&2; echo "ab.sh: git worktree add $2 failed" >&2; exit 1; }
	worktrees+=("$tmp/$1")
}
short() { git -C "$root" rev-parse --short "$1"; }
addtree old "$oldsha"
oldtree=$tmp/old
oldlabel=$(short "$oldsha")
if [ -n "$newsha" ]; then
	addtree new "$newsha"
	newtree=$tmp/new
	newlabel=$(short "$newsha")
else
	newtree=$root
	dirty=$(git -C "$root" status --porcelain --untracked-files=no | wc -l | tr -d ' ')
	newlabel="working tree ($(short HEAD)"
	[ "$dirty" = 0 ] || newlabel="$newlabel + $dirty changed files"
	newlabel="$newlabel)"
fi

# One harness source, built against each tree, in parallel. A worktree's
# path is new each time, so its side is built with -trimpath, whose build
# cache does not depend on the path: the second A/B against the same
# revision compiles little. The working tree's side is built without it,
# as go build and go test build the module, so that it reuses their cache
# (a CI job's -quick run then compiles one side only). -trimpath changes
# only the file paths a binary records, not its code.
build() { # build SIDE TREE [-trimpath]
	local d=$tmp/build-$1
	mkdir -p "$d"
	cp "$here"/ab/_harness/*.go "$d"/
	[ -f "$2/go.sum" ] && cp "$2/go.sum" "$d"/
	printf 'module abharness\n\ngo 1.26.0\n' >"$d/go.mod"
	(cd "$d" && export GOWORK=off &&
		go mod edit -require=github.com/shardwheel/shardwheel@v0.0.0 -replace=github.com/shardwheel/shardwheel="$2" &&
		go mod tidy && go build ${3:-} -o "$tmp/harness-$1" .)
}
echo "ab.sh: building the harness against $oldlabel and $newlabel" >&2
t0=$SECONDS
build old "$oldtree" -trimpath >"$tmp/build-old.log" 2>&1 &
pold=$!
newtrim=-trimpath
[ "$newtree" != "$root" ] || newtrim=""
build new "$newtree" $newtrim >"$tmp/build-new.log" 2>&1 &
pnew=$!
child="$pold $pnew"
bad=0
wait $pold || { echo "ab.sh: the harness does not build against $oldlabel ($oldtree):" >&2; cat "$tmp/build-old.log" >&2; bad=1; }
wait $pnew || { echo "ab.sh: the harness does not build against $newlabel ($newtree):" >&2; cat "$tmp/build-new.log" >&2; bad=1; }
child=""
[ $bad = 0 ] || exit 1
echo "ab.sh: built in $((SECONDS - t0))s" >&2

# The runs: per round, per workload, old then new, each a fresh process.
hostbusy() { # the host's busy CPU time in seconds (steal included), or null off Linux
	if [ -r /proc/stat ]; then
		awk -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" \
			'/^cpu /{ printf "%.2f\n", ($2+$3+$4+$7+$8+$9)/hz; exit }' /proc/stat
	else
		echo null
	fi
}
now() { date +%s.%N; }
flags=()
[ "$quick" = 1 ] && flags+=(-quick)
if [ "$quick" = 1 ]; then per=8; else per=50; fi
echo "ab.sh: $rounds round(s) of ${workloads//,/, } on each side, about $((rounds * 2 * per * ${#wl[@]} / 4))s" >&2
results=$tmp/results.jsonl
: >"$results"
for ((r = 0; r < rounds; r++)); do
	for w in "${wl[@]}"; do
		sides="old new"
		[ $((r % 2)) = 0 ] || sides="new old" # neither side always runs first
		for side in $sides; do
			printf 'ab.sh: round %d of %d: %s on %s ... ' $((r + 1)) "$rounds" "$w" "$side" >&2
			b0=$(hostbusy) w0=$(now)
			"$tmp/harness-$side" "$w" -round "$r" ${flags[@]+"${flags[@]}"} >"$tmp/run.out" 2>"$tmp/run.err" &
			child=$!
			rc=0
			wait "$child" || rc=$?
			child=""
			b1=$(hostbusy) w1=$(now)
			python3 - "$side" "$r" "$w" "$rc" "$b0" "$b1" "$w0" "$w1" "$tmp/run.out" "$tmp/run.err" >>"$results" <<-'EOF'
				import json, sys
				side, r, w, rc, b0, b1, w0, w1, outp, errp = sys.argv[1:]
				rec = {"side": side, "round": int(r), "workload": w, "ok": False,
				       "wall_s": float(w1) - float(w0),
				       "host_busy_s": None if b0 == "null" else float(b1) - float(b0)}
				lines = [l for l in open(outp).read().splitlines() if l.strip()]
				try:
				    if rc != "0" or len(lines) != 1:
				        raise ValueError("exit status %s, %d lines on stdout" % (rc, len(lines)))
				    rec["run"] = json.loads(lines[0])
				    rec["ok"] = True
				except ValueError as e:
				    rec["error"] = "%s: %s" % (e, open(errp).read()[-2000:])
				print(json.dumps(rec))
			EOF
			if [ "$rc" = 0 ]; then
				awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.1fs\n", b - a }' >&2
			else
				echo "FAILED (exit $rc):" >&2
				tail -n 20 "$tmp/run.err" >&2
			fi
		done
	done
done

echo >&2
echo "shardwheel A/B, $(date -u +%Y-%m-%dT%H:%MZ), $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH), $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') CPUs"
echo "old: $oldlabel $(git -C "$root" log -1 --format=%s "$oldsha" | cut -c1-80)"
if [ -n "$newsha" ]; then
	echo "new: $newlabel $(git -C "$root" log -1 --format=%s "$newsha" | cut -c1-80)"
else
	echo "new: $newlabel"
fi
echo
python3 "$here/ab/table.py" "$results" "$oldlabel" "$newlabel"
[ -z "$out" ] || cp "$results" "$out"
# A run that failed fails the command (a CI smoke run must notice).
if grep -q '"ok": false' "$results"; then
	exit 1
fi
