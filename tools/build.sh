#!/usr/bin/env bash
# Configures and builds ptrace-gpu into build/ (or $PTG_BUILD_DIR);
# PTG_WERROR=1 makes warnings errors.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PTG_BUILD_DIR:-build}
# PTG_WERROR=1 (tools/test.sh, so CI): warnings are errors
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTG_WERROR="${PTG_WERROR:-OFF}" >/dev/null
cmake --build "$build" -j"$(nproc)"
