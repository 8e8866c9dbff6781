#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/fuzz_NAME.c) with clang, ASan and UBSan
# into build-fuzz/ (or $PTG_FUZZ_BUILD_DIR) and runs each for RUNS inputs
# (default 10000) over a copy of its seed corpus fuzz/corpus/NAME/. Fails on
# any crash, sanitizer report, leak, timeout or out-of-memory; exits 77
# (skipped) where clang or its fuzzer runtime (libclang-rt-14-dev) is missing.
# Crashing inputs are kept in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000}
build=${PTG_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${PTG_FUZZ_JOBS:-2}

if ! [[ $runs =~ ^[0-9]+$ ]]; then
	echo "fuzz: RUNS must be a number of inputs, not '$runs'" >&2
	exit 2
fi
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cc" ]; then
	echo "fuzz: skipped: no clang" >&2
	exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' >"$probe/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/probe.c" -o "$probe/probe" 2>"$probe/log"; then
	echo "fuzz: skipped: $cc cannot link -fsanitize=fuzzer,address,undefined (install libclang-rt-14-dev): $(head -1 "$probe/log")" >&2
	exit 77
fi

CC=$cc cmake -S . -B "$build" -DPTG_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzzers -j"$jobs" >/dev/null

mkdir -p "$build/artifacts"
# every input is written to a file (fuzz/fuzz_util.h): in memory where we may
# map it executable (fuzz_elf does), else on whatever TMPDIR is; in a folder
# removed at exit, as a harness that crashed or ran out of time does not
parent=${TMPDIR:-/tmp}
if [ -z "${TMPDIR:-}" ] && [ -w /dev/shm ] &&
	! findmnt -no OPTIONS -T /dev/shm 2>/dev/null | grep -qw noexec; then
	parent=/dev/shm
fi
inputs=$(mktemp -d -p "$parent")
trap 'rm -rf "$probe" "$inputs"' EXIT
export TMPDIR=$inputs
failed=0
for src in fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	corpus=fuzz/corpus/${name#fuzz_}
	work=$probe/$name
	mkdir -p "$work"
	if [ -d "$corpus" ]; then
		cp -r "$corpus/." "$work/"
	fi
	# -close_fd_mask=3: the code under test reports bad input on stderr for
	# every input; libFuzzer and the sanitizers keep their own copy of it
	if "$build/fuzz/$name" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
		-close_fd_mask=3 -print_final_stats=1 \
		-artifact_prefix="$build/artifacts/$name-" "$work" >"$work.log" 2>&1; then
		echo "fuzz: $name: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$work.log")," \
			"$(grep -o 'cov: [0-9]* ft: [0-9]*' "$work.log" | tail -1)"
	else
		echo "fuzz: $name FAILED; its output:" >&2
		tail -60 "$work.log" >&2
		failed=1
	fi
done
exit $failed
