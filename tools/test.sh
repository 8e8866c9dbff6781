#!/usr/bin/env bash
# Installs the dependencies, builds, makes the chroots of the newer CPythons,
# and runs the whole test suite (unit tests and BPF integration tests against
# real Python processes of each interpreter; needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
# warnings are errors here: CI runs this
PTG_WERROR=1 ./tools/build.sh
# Newer CPythons (and PyTorch 2.x) in Debian chroots, cached; where they cannot
# be built (no mirror, or not within 50 minutes on a slow one: CI has 90 for
# everything), their tests are skipped, the rest still runs.
if ! timeout 3000 ./tools/make-chroots.sh; then
	echo "test: tools/make-chroots.sh failed: the tests of its missing interpreters are skipped" >&2
fi
cd "${PTG_BUILD_DIR:-build}"
ctest --output-on-failure -j2
