#!/usr/bin/env bash
# ptrace-gpu's benchmarks, one command (bench/README.md):
#
#   sudo bench/run.sh [--reps N] [--only overhead,per_call,capacity,analysis] [...]
#
# Installs what is missing, builds this checkout's ptrace-gpu into build-bench/
# and the helpers in bench/ into build-bench/bench/, then runs bench/bench.py,
# which prints the tables and writes bench/results/bench-<UTC time>.json and
# bench/results/latest.md. About 5-8 minutes on 2 cores.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${PTG_BENCH_BUILD:-$root/build-bench}
tools=$build/bench

if [ "$(id -u)" -ne 0 ]; then
	echo "bench: run as root: sudo bench/run.sh" >&2
	exit 1
fi
"$here/install-deps.sh"

echo "bench: building ptrace-gpu in $build" >&2
cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target ptrace-gpu >/dev/null

# The helpers link the same trace reader and writer as ptrace-gpu (the static
# libraries of its rooms). One that does not build is left out: its table
# cells say so, the others still run.
mkdir -p "$tools"
rm -f "$tools"/{gen_trace,trace_stats,trace_write_bench,uprobe_cost}
libs=$(pkg-config --libs libbpf libelf zlib libzstd json-c capstone)
cflags=(-O2 -Wall -D_GNU_SOURCE -I"$root/user" -I"$root/include")
for tool in gen_trace trace_stats trace_write_bench; do
	cc "${cflags[@]}" "$here/$tool.c" -Wl,--start-group "$build"/libptg_*.a -Wl,--end-group $libs -lm -lpthread -o "$tools/$tool" ||
		echo "bench: cannot build bench/$tool.c" >&2
done
{
	clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I"$root/vmlinux" \
		-c "$here/uprobe_cost.bpf.c" -o "$tools/uprobe_cost.bpf.o" &&
		bpftool gen skeleton "$tools/uprobe_cost.bpf.o" name uprobe_cost_bpf \
			>"$tools/uprobe_cost.skel.h" &&
		cc "${cflags[@]}" -I"$tools" "$here/uprobe_cost.c" $libs -o "$tools/uprobe_cost"
} || echo "bench: cannot build bench/uprobe_cost.c" >&2

exec /usr/bin/python3 "$here/bench.py" --ptrace-gpu "$build/ptrace-gpu" --tools "$tools" "$@"
