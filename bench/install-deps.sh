#!/usr/bin/env bash
# What bench/run.sh needs beyond tools/install-deps.sh (the project's build and
# test dependencies), from Debian bookworm: austin (the sampler it compares
# with) and Debian's CPython 3.11 with PyTorch (the workloads). Installs only
# what is missing, so a second run costs nothing.
set -euo pipefail

bench_packages=(austin python3.11 python3-torch)
# a few of the project's build dependencies: when one is missing, install them all
build_probe=(cmake clang bpftool libbpf-dev libelf-dev zlib1g-dev libzstd-dev pkg-config)

if [ "$(id -u)" -ne 0 ]; then
	echo "bench/install-deps: run as root (apt-get install)" >&2
	exit 1
fi
missing() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			echo "$p"
	done
}
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "$(missing "${build_probe[@]}")" ]; then
	"$here/../tools/install-deps.sh"
fi
need=($(missing "${bench_packages[@]}"))
if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	for p in "${need[@]}"; do
		# austin may be missing from a mirror: the benchmark then says n/a and why
		apt-get install -y -qq --no-install-recommends "$p" >/dev/null ||
			echo "bench/install-deps: could not install $p" >&2
	done
fi
