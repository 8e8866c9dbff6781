#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# GPU check of the CUPTI path (docs/gpu.md), for a machine with an NVIDIA GPU:
# one small PyTorch training script, run three times,
#   1. under `ptrace-gpu record -- CMD`   (agent started by CUDA_INJECTION64_PATH)
#   2. under `ptrace-gpu record -p PID`   (agent injected through ptrace)
#   3. under torch.profiler               (Kineto's own CUPTI client)
# and the same measured steps compared: kernel count (must be equal), total
# kernel time (within TOL), and, in our traces, every kernel linked to the CUDA
# call that launched it (same correlation id, on its record or on the join flow
# that gives it to a probed call), and the Chrome export's kernels and flows
# checked, and the ops of the measured steps, by name, against torch.profiler's
# (aten ops; where ops came from the RecordFunction callback, record -p's
# default and --in-process's, also the other ranges it sees, as torch.profiler
# does: the autograd engine's, detach). The
# measured steps are framed by torch.cuda.synchronize() and CLOCK_MONOTONIC
# readings, the clock of our traces, so only their kernels are counted. The
# host-side CUDA calls of the measured steps (launches, copies, memsets: what
# the CUDA probes record, from CUPTI's callbacks where the agent is in, else
# from uprobes) are counted by name against torch.profiler's runtime calls,
# and where the agent recorded, the calls must have come from its callbacks
# (the trace's cuda.calls_cupti), not from uprobe traps.
#
# Environment: PTRACE_GPU (the binary; default: build*/ptrace-gpu), PYTHON (a
# CPython that record supports, with PyTorch and CUDA; default python3), STEPS
# (default 50), TOL (relative, default 0.2), OUT (directory kept for
# inspection; default a new one under /tmp), ATTACH_ARGS (more options of
# step 2, e.g. --in-process or --ops-from probes). Needs root, like record.
# Exit status: 0 pass, 1 mismatch or failure, 2 this machine cannot run it.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(dirname "$HERE")
# shellcheck source=tools/gpu-check-lib.sh
. "$HERE/gpu-check-lib.sh"
PYTHON=${PYTHON:-python3}
export STEPS=${STEPS:-50}
TOL=${TOL:-0.2}
ATTACH_ARGS=${ATTACH_ARGS:-}
OUT=${OUT:-$(mktemp -d /tmp/ptg-gpu-check.XXXXXX)}
mkdir -p "$OUT"

fail() { echo "gpu-check: FAIL: $*" >&2; exit 1; }
cannot() { echo "gpu-check: cannot run here: $*" >&2; exit 2; }

find_ptg() {
	local c
	if [ -n "${PTRACE_GPU:-}" ]; then echo "$PTRACE_GPU"; return; fi
	for c in "$SRC/build/ptrace-gpu" "$SRC"/build*/ptrace-gpu; do
		if [ -x "$c" ]; then echo "$c"; return; fi
	done
}

preflight() {
	PTG=$(find_ptg)
	if [ -z "$PTG" ] || [ ! -x "$PTG" ]; then
		cannot "no ptrace-gpu binary (build it, or set PTRACE_GPU)"
	fi
	[ -e "$(dirname "$PTG")/libptg_cupti.so" ] ||
		cannot "$(dirname "$PTG") has no libptg_cupti.so: this build found no CUPTI"
	[ "$(id -u)" = 0 ] || cannot "record needs root"
	command -v "$PYTHON" >/dev/null || cannot "no $PYTHON (set PYTHON)"
	local rc=0
	"$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)' \
		>/dev/null 2>&1 || rc=$?
	case $rc in
	0) ;;
	3) cannot "no CUDA GPU visible to PyTorch ($PYTHON: torch.cuda.is_available() is False)" ;;
	*) cannot "$PYTHON cannot import torch" ;;
	esac
	local have want
	have=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	want=$("$PTG" record --help | sed -n 's/.*Supported Python: \(.*\)\.$/\1/p')
	case ", $want," in
	*", $have,"*) ;;
	*) cannot "record supports Python $want, $PYTHON is $have (set PYTHON)" ;;
	esac
}

write_script() {
	cat >"$OUT/train.py" <<'EOF'
# A small MLP trained on the GPU. argv[1]: plain | wait (for record -p: warm
# up, say "ready", train after a line on stdin) | profile FILE (torch.profiler
# around the measured steps, Chrome trace to FILE). Prints the measured window.
import json, os, sys, time
import torch

mode = sys.argv[1]
steps = int(os.environ.get("STEPS", "50"))
torch.manual_seed(0)
torch.backends.cudnn.benchmark = False
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(512, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(256, 512, device=dev)
y = torch.randint(0, 10, (256,), device=dev)


def step():
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()


def measured():
    torch.cuda.synchronize()
    t0 = time.monotonic_ns()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return t0, time.monotonic_ns()


# warm-up: cuBLAS handles, workspaces, the caching allocator, lazy modules
for _ in range(5):
    step()
torch.cuda.synchronize()
if mode == "wait":
    print("ready", flush=True)
    sys.stdin.readline()
if mode == "profile":
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0, t1 = measured()
    prof.export_chrome_trace(sys.argv[2])
else:
    t0, t1 = measured()
print(json.dumps({"t0": t0, "t1": t1}), flush=True)
EOF
}

run_launch() {
	echo "gpu-check: 1/3 record -- $PYTHON train.py"
	"$PTG" record -o "$OUT/launch.ptg" -- "$PYTHON" "$OUT/train.py" plain \
		>"$OUT/launch.out" 2>"$OUT/launch.log" || fail "record -- CMD failed: $(tail -3 "$OUT/launch.log")"
	grep -q "recording GPU activity" "$OUT/launch.log" ||
		fail "record -- CMD: the agent never recorded: $(grep -i cupti "$OUT/launch.log" || true)"
}

run_attach() {
	local tgt rec rc=0
	echo "gpu-check: 2/3 record -p $ATTACH_ARGS (agent injected into a running training process)"
	rm -f "$OUT/go"
	mkfifo "$OUT/go"
	exec 3<>"$OUT/go"
	"$PYTHON" "$OUT/train.py" wait <"$OUT/go" >"$OUT/attach.out" 2>"$OUT/attach.err" &
	tgt=$!
	wait_for "$OUT/attach.out" ready 120 "$tgt" || fail "the target did not start: $(cat "$OUT/attach.err")"
	# shellcheck disable=SC2086 # ATTACH_ARGS: options, split
	"$PTG" record -p "$tgt" $ATTACH_ARGS -o "$OUT/attach.ptg" 2>"$OUT/attach.log" &
	rec=$!
	if ! wait_for "$OUT/attach.log" "recording GPU activity" 120 "$rec"; then
		kill "$tgt" 2>/dev/null || true
		fail "record -p: the agent never recorded: $(cat "$OUT/attach.log")"
	fi
	echo go >&3
	wait "$tgt" || fail "the target failed under record -p: $(tail -3 "$OUT/attach.err")"
	exec 3>&-
	wait "$rec" || rc=$?
	[ "$rc" = 0 ] || fail "record -p exited $rc: $(tail -3 "$OUT/attach.log")"
}

run_profiler() {
	echo "gpu-check: 3/3 torch.profiler"
	"$PYTHON" "$OUT/train.py" profile "$OUT/profiler.json" >"$OUT/profiler.out" 2>"$OUT/profiler.err" ||
		fail "the torch.profiler run failed: $(tail -3 "$OUT/profiler.err")"
}

compare() {
	"$PTG" dump "$OUT/launch.ptg" >"$OUT/launch.txt" || fail "cannot read $OUT/launch.ptg"
	"$PTG" dump "$OUT/attach.ptg" >"$OUT/attach.txt" || fail "cannot read $OUT/attach.ptg"
	"$PYTHON" - "$OUT" "$TOL" "$HERE" <<'EOF'
import collections, json, re, sys

out, tol = sys.argv[1], float(sys.argv[2])
sys.path.insert(0, sys.argv[3])
import ptg_dump  # noqa: E402


def window(name):
    lines = open(f"{out}/{name}.out").read().split("\n")
    return json.loads([l for l in lines if l.startswith("{")][-1])


def records(name):
    """The records of a `ptrace-gpu dump` as (ts, kind, fields, symbol)
    (tools/ptg_dump.py), and the loss counters, by name."""
    _, recs, lost = ptg_dump.records(f"{out}/{name}.txt")
    return [(ts, kind, f, sym) for ts, _, _, kind, f, sym in recs], lost


def ours(name):
    """Kernels of the measured window in a `ptrace-gpu dump`, and their links."""
    w = window(name)
    kernels, calls = [], set()
    recs, lost = records(name)
    for ts, kind, f, _ in recs:
        if kind == "kernel":
            # by start time: a kernel starts well after t0 (launch latency) and
            # well before t1, so clock-mapping error cannot move it across
            if w["t0"] <= ts <= w["t1"]:
                kernels.append((int(f.get("dur", 0)), int(f.get("corr", 0))))
        elif kind == "cuda_call" and "corr" in f:
            calls.add(int(f["corr"]))
        elif kind == "flow" and "corr" in f and "aux3" in f:
            # a join flow: CUPTI's record of a probed call, whose id it gives
            # that call (docs/cuda-sched.md); the call is in the trace
            calls.add(int(f["corr"]))
    linked = sum(1 for _, c in kernels if c in calls)
    return len(kernels), sum(d for d, _ in kernels), linked, lost


# the runtime calls of the CUDA probes' table whose count a window pins down exactly
# (not the synchronizations that frame it)
HOST_CALL = re.compile(r"^cuda(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|GraphLaunch"
                       r"|Memcpy\w*|Memset\w*)$")


def host_calls(name):
    """Host-side CUDA calls of the measured window by name (records with a host call
    id: the probes' or the agent's callbacks', not CUPTI's unjoined API records)."""
    w = window(name)
    return collections.Counter(sym for ts, kind, f, sym in records(name)[0]
                               if kind == "cuda_call" and "aux3" in f
                               and w["t0"] <= ts <= w["t1"] and HOST_CALL.match(sym))


def call_sources(name):
    """The trace's metadata: calls from uprobes, calls from CUPTI's callbacks."""
    meta = ptg_dump.records(f"{out}/{name}.txt")[0]
    return int(meta.get("cuda.calls_uprobes", 0)), int(meta.get("cuda.calls_cupti", 0))


def ops(name):
    """Ops entered in the measured window, by name: aten ops from the probes;
    from the RecordFunction callback (ops.source record_function), its FUNCTION scope, which
    also holds the autograd engine's range around each node it runs
    ("autograd::engine::evaluate_function: AddmmBackward0") and detach."""
    w = window(name)
    return collections.Counter(sym for ts, kind, _, sym in records(name)[0]
                               if kind == "op_enter" and w["t0"] <= ts <= w["t1"])


def profiler():
    ev = json.load(open(f"{out}/profiler.json"))["traceEvents"]
    k = [e for e in ev if e.get("cat") == "kernel" and e.get("ph") == "X"]
    # every RecordFunction range: aten ops, autograd nodes, annotations
    cpu = collections.Counter(e["name"] for e in ev if e.get("cat") == "cpu_op"
                              and e.get("ph") == "X")
    rt = collections.Counter(e["name"] for e in ev if e.get("cat") == "cuda_runtime"
                             and e.get("ph") == "X" and HOST_CALL.match(e["name"]))
    return len(k), round(sum(float(e["dur"]) for e in k) * 1000), cpu, rt


pk, pt, pcpu, prt = profiler()
paten = collections.Counter({k: v for k, v in pcpu.items() if k.startswith("aten::")})
print(f"{'':18} {'kernels':>8} {'kernel time (us)':>17}")
print(f"{'torch.profiler':18} {pk:>8} {pt / 1000:>17.1f}")
bad = []
for name, label in (("launch", "record -- CMD"), ("attach", "record -p")):
    n, t, linked, lost = ours(name)
    print(f"{label:18} {n:>8} {t / 1000:>17.1f}   linked to a CUDA call: {linked}/{n}"
          f"   lost: {lost or 'none'}")
    if n != pk:
        bad.append(f"{label}: {n} kernels, torch.profiler {pk}")
    if pt and abs(t - pt) > tol * pt:
        bad.append(f"{label}: kernel time {t / 1000:.1f} us, torch.profiler {pt / 1000:.1f} us "
                   f"(more than {tol:.0%} apart)")
    if n and linked < n:
        bad.append(f"{label}: {n - linked} kernels without their launching CUDA call")
    if lost.get("cupti_dropped"):
        bad.append(f"{label}: CUPTI dropped {lost['cupti_dropped']} records")
    hc, (by_uprobe, by_cupti) = host_calls(name), call_sources(name)
    cdiff = {k: (hc[k], prt[k]) for k in set(hc) | set(prt) if hc[k] != prt[k]}
    print(f"{'':18} CUDA calls: {sum(hc.values())}, torch.profiler {sum(prt.values())}; "
          f"whole trace: {by_cupti} from CUPTI's callbacks, {by_uprobe} from uprobes")
    if cdiff:
        bad.append(f"{label}: CUDA call counts (ours, torch.profiler) differ: {cdiff}")
    if not by_cupti:
        bad.append(f"{label}: no CUDA call came from the agent's callbacks (uprobes only)")
    o = ops(name)
    # every aten op of either side; the other names we record (from the
    # RecordFunction callback) each as often as torch.profiler has it
    names = set(paten) | set(o)
    diff = {k: (o[k], pcpu[k]) for k in names if o[k] != pcpu[k]}
    other = sum(v for k, v in o.items() if not k.startswith("aten::"))
    print(f"{'':18} aten ops: {sum(v for k, v in o.items() if k.startswith('aten::'))}, "
          f"torch.profiler {sum(paten.values())}; other RecordFunction ranges: {other}; "
          f"{len(diff)} names differ")
    if diff:
        bad.append(f"{label}: op counts (ours, torch.profiler) differ: {diff}")
for b in bad:
    print("gpu-check: FAIL:", b, file=sys.stderr)
sys.exit(1 if bad or not pk else 0)
EOF
}

# The Chrome export of the record -p trace, as HTA and Perfetto read it: every
# kernel of the dump is there, and each ac2g flow that starts (on the launching
# call) ends on a GPU op, as in torch.profiler's own traces.
check_chrome() {
	"$PTG" export --chrome "$OUT/attach.json" "$OUT/attach.ptg" 2>"$OUT/export.log" ||
		fail "export --chrome: $(tail -1 "$OUT/export.log")"
	"$PYTHON" - "$OUT" <<'EOF'
import json, sys

out = sys.argv[1]
ev = json.load(open(f"{out}/attach.json"))["traceEvents"]
dumped = sum(1 for l in open(f"{out}/attach.txt", errors="replace")
             if l.split(" ")[2:3] == ["kernel"])
kernels = [e for e in ev if e.get("cat") == "kernel" and e.get("ph") == "X"]
starts = {e["id"] for e in ev if e.get("cat") == "ac2g" and e.get("ph") == "s"}
ends = {e["id"] for e in ev if e.get("cat") == "ac2g" and e.get("ph") == "f"}
print(f"export --chrome (record -p): {len(kernels)} kernels (dump: {dumped}), "
      f"{len(starts)} flow starts, {len(ends)} flow ends")
bad = []
if len(kernels) != dumped:
    bad.append(f"{len(kernels)} kernels in the export, {dumped} in the trace")
if starts != ends:
    bad.append(f"{len(starts - ends)} flows start and never end, {len(ends - starts)} end unstarted")
for b in bad:
    print("gpu-check: FAIL: export:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

preflight
write_script
echo "gpu-check: $PTG, $PYTHON, $STEPS steps, files in $OUT"
run_launch
run_attach
run_profiler
compare || fail "see above; traces and logs are in $OUT"
check_chrome || fail "see above; traces and logs are in $OUT"
echo "gpu-check: PASS"
