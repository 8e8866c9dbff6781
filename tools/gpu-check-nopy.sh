#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# GPU check of a program with no Python in it (docs/usage.md, "Programs with no
# Python"), for a machine with an NVIDIA GPU: tests/helpers/gpu_nopy.c, a C
# program that JIT-compiles a PTX kernel through NVIDIA's driver API and
# launches it LAUNCHES times, recorded three ways:
#   1. record -- gpu_nopy                 (agent started by CUDA_INJECTION64_PATH)
#   2. record -p of gpu_nopy --wait       (driver loaded before the attach; agent injected)
#   3. record -p of gpu_nopy --wait --late (driver loaded after the attach, by dlopen)
# Each trace must say `python: none` and hold exactly LAUNCHES cuLaunchKernel
# calls and the cuStreamSynchronize calls the program counted (the probes, from
# the first call); 1 and 2 exactly LAUNCHES `ptg_fill` kernels from CUPTI, each
# linked to its launching call; 3 the kernels CUPTI saw once the agent, which
# is injected when the driver is seen mapped, turned it on (printed). `report`,
# `idle` and `export --chrome` must read trace 1.
#
# Environment: PTRACE_GPU (the binary; default: build*/ptrace-gpu), GPU_NOPY
# (the program; default: build*/tests/gpu_nopy), PYTHON (reads the dumps;
# default python3, any version), LAUNCHES (default 300), SYNCS (default 10),
# OUT (kept for inspection; default a new directory under /tmp). Needs root.
# Exit status: 0 pass, 1 mismatch or failure, 2 this machine cannot run it.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(dirname "$HERE")
# shellcheck source=tools/gpu-check-lib.sh
. "$HERE/gpu-check-lib.sh"
PYTHON=${PYTHON:-python3}
LAUNCHES=${LAUNCHES:-300}
SYNCS=${SYNCS:-10}
OUT=${OUT:-$(mktemp -d /tmp/ptg-gpu-nopy.XXXXXX)}
mkdir -p "$OUT"

fail() { echo "gpu-check-nopy: FAIL: $*" >&2; exit 1; }
cannot() { echo "gpu-check-nopy: cannot run here: $*" >&2; exit 2; }

first_exe() { # the first executable of the candidates
	local c
	for c in "$@"; do
		if [ -x "$c" ]; then echo "$c"; return; fi
	done
}

preflight() {
	PTG=${PTRACE_GPU:-$(first_exe "$SRC/build/ptrace-gpu" "$SRC"/build*/ptrace-gpu)}
	NOPY=${GPU_NOPY:-$(first_exe "$SRC/build/tests/gpu_nopy" "$SRC"/build*/tests/gpu_nopy)}
	if [ -z "$PTG" ] || [ ! -x "$PTG" ]; then
		cannot "no ptrace-gpu binary (build it, or set PTRACE_GPU)"
	fi
	if [ -z "$NOPY" ] || [ ! -x "$NOPY" ]; then
		cannot "no gpu_nopy (build the tests, or set GPU_NOPY)"
	fi
	[ -e "$(dirname "$PTG")/libptg_cupti.so" ] ||
		cannot "$(dirname "$PTG") has no libptg_cupti.so: this build found no CUPTI"
	[ "$(id -u)" = 0 ] || cannot "record needs root"
	command -v "$PYTHON" >/dev/null || cannot "no $PYTHON to read the traces (set PYTHON)"
	local err
	if ! err=$("$NOPY" 1 1 2>&1 >/dev/null); then
		cannot "gpu_nopy cannot use a GPU here: $err"
	fi
}

run_launch() {
	echo "gpu-check-nopy: 1/3 record -- gpu_nopy $LAUNCHES $SYNCS"
	"$PTG" record -o "$OUT/launch.ptg" -- "$NOPY" "$LAUNCHES" "$SYNCS" \
		>"$OUT/launch.out" 2>"$OUT/launch.log" ||
		fail "record -- CMD failed: $(tail -3 "$OUT/launch.log")"
}

run_attach() { # NAME WAIT_TEXT ARGS...: record -p of gpu_nopy --wait ARGS
	local name=$1 text=$2 tgt rec rc=0
	shift 2
	echo "gpu-check-nopy: record -p of gpu_nopy --wait $* $LAUNCHES $SYNCS"
	rm -f "$OUT/go"
	mkfifo "$OUT/go"
	exec 3<>"$OUT/go"
	"$NOPY" --wait "$@" "$LAUNCHES" "$SYNCS" <"$OUT/go" >"$OUT/$name.out" 2>"$OUT/$name.err" &
	tgt=$!
	wait_for "$OUT/$name.out" ready 60 "$tgt" || fail "gpu_nopy did not start: $(cat "$OUT/$name.err")"
	"$PTG" record -p "$tgt" -o "$OUT/$name.ptg" 2>"$OUT/$name.log" &
	rec=$!
	if ! wait_for "$OUT/$name.log" "$text" 120 "$rec"; then
		kill "$tgt" 2>/dev/null || true
		fail "record -p: no '$text': $(cat "$OUT/$name.log")"
	fi
	echo go >&3
	wait "$tgt" || fail "gpu_nopy failed under record -p: $(tail -3 "$OUT/$name.err")"
	exec 3>&-
	# the target's end ends the recording
	wait "$rec" || rc=$?
	[ "$rc" = 0 ] || fail "record -p exited $rc: $(tail -3 "$OUT/$name.log")"
}

compare() {
	local n
	for n in launch attach late; do
		"$PTG" dump "$OUT/$n.ptg" >"$OUT/$n.txt" || fail "cannot read $OUT/$n.ptg"
	done
	"$PYTHON" - "$OUT" "$HERE" <<'EOF'
import collections, sys

out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import ptg_dump  # noqa: E402
bad = []


def said(name):
    """gpu_nopy's own count: launched N synced M"""
    w = open(f"{out}/{name}.out").read().split()
    i = w.index("launched")
    return int(w[i + 1]), int(w[i + 3])


def dump(name):
    """(meta, [(kind, fields, symbol)]) of a `ptrace-gpu dump`"""
    meta, recs, _ = ptg_dump.records(f"{out}/{name}.txt")
    return meta, [(kind, f, sym) for _, _, _, kind, f, sym in recs]


for name, label, exact in (("launch", "record -- CMD", True), ("attach", "record -p", True),
                           ("late", "record -p, driver loaded later", False)):
    launched, synced = said(name)
    meta, recs = dump(name)
    calls = collections.Counter(s for k, _, s in recs if k == "cuda_call")
    kernels = [f for k, f, s in recs if k == "kernel" and s == "ptg_fill"]
    other = sum(1 for k, _, s in recs if k == "kernel" and s != "ptg_fill")
    ids = {int(f["corr"]) for k, f, _ in recs if k in ("cuda_call", "flow") and "corr" in f}
    linked = sum(1 for f in kernels if int(f.get("corr", 0)) in ids)
    gpu_us = sum(int(f.get("dur", 0)) for f in kernels) / 1000
    print(f"{label:32} python: {meta.get('python')}; cuLaunchKernel {calls['cuLaunchKernel']}"
          f"/{launched}, cuStreamSynchronize {calls['cuStreamSynchronize']}/{synced}; "
          f"kernels {len(kernels)} ({gpu_us:.1f} us on the GPU), linked {linked}; "
          f"other kernels {other}")
    if meta.get("python") != "none":
        bad.append(f"{label}: python is {meta.get('python')!r}, not 'none'")
    if calls["cuLaunchKernel"] != launched or calls["cuStreamSynchronize"] != synced:
        bad.append(f"{label}: {calls['cuLaunchKernel']} launches and "
                   f"{calls['cuStreamSynchronize']} syncs recorded of {launched} and {synced}")
    if exact and len(kernels) != launched:
        bad.append(f"{label}: {len(kernels)} kernels of {launched}")
    if not kernels or linked != len(kernels):
        bad.append(f"{label}: {len(kernels) - linked} of {len(kernels)} kernels without "
                   "their launching call")
for b in bad:
    print("gpu-check-nopy: FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

reports() {
	local r
	for r in report idle; do
		"$PTG" "$r" "$OUT/launch.ptg" >"$OUT/launch.$r" 2>&1 || fail "$r: $(tail -2 "$OUT/launch.$r")"
		echo "gpu-check-nopy: ptrace-gpu $r of trace 1 (head):"
		head -25 "$OUT/launch.$r"
	done
	"$PTG" export --chrome "$OUT/launch.json" "$OUT/launch.ptg" 2>"$OUT/export.log" ||
		fail "export --chrome: $(tail -1 "$OUT/export.log")"
	"$PYTHON" - "$OUT/launch.json" "$LAUNCHES" <<'EOF'
import json, sys

ev = json.load(open(sys.argv[1]))["traceEvents"]
k = sum(1 for e in ev if e.get("cat") == "kernel" and e.get("ph") == "X")
print(f"gpu-check-nopy: export --chrome of trace 1: {k} kernels")
sys.exit(0 if k == int(sys.argv[2]) else 1)
EOF
}

preflight
echo "gpu-check-nopy: $PTG, $NOPY, $LAUNCHES launches, files in $OUT"
run_launch
run_attach attach "recording GPU activity"
run_attach late "recording pid" --late
compare || fail "see above; traces and logs are in $OUT"
reports || fail "see above; traces and logs are in $OUT"
echo "gpu-check-nopy: PASS"
