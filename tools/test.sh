#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite (unit tests
# and BPF integration tests against real Python processes; needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
./tools/build.sh
cd "${PTG_BUILD_DIR:-build}"
ctest --output-on-failure -j1
