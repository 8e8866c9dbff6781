#!/usr/bin/env bash
# Installs the dependencies, builds, records the bundled example (a small
# PyTorch training job) and prints its reports. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
./tools/build.sh
ptg=${PTG_BUILD_DIR:-build}/ptrace-gpu
out=${PTG_DEMO_DIR:-/tmp/ptrace-gpu-demo}
mkdir -p "$out"

"$ptg" record -o "$out/train.ptg" -- /usr/bin/python3.11 examples/train.py
echo
echo "== ptrace-gpu report --limit 15 (Python functions) =="
"$ptg" report --sort tottime --limit 15 "$out/train.ptg"
echo
echo "== ptrace-gpu report --ops --limit 15 (PyTorch dispatcher ops) =="
"$ptg" report --ops --limit 15 "$out/train.ptg"
echo
echo "== ptrace-gpu idle =="
"$ptg" idle -n 5 "$out/train.ptg"
"$ptg" flamegraph -o "$out/train.svg" "$out/train.ptg"
"$ptg" export --pstats "$out/train.prof" --chrome "$out/train.json.gz" "$out/train.ptg"
echo
echo "flamegraph: $out/train.svg   pstats: $out/train.prof   Chrome/Perfetto: $out/train.json.gz"
