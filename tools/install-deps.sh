#!/usr/bin/env bash
# Installs everything ptrace-gpu needs to build, run and test, from Debian's
# packages. Run as root on Debian bookworm (or the machine image this project
# is developed on). Safe to run again.
set -euo pipefail

packages=(
	# build: BPF objects with clang, skeletons with bpftool, one binary
	cmake make gcc pkg-config clang llvm bpftool
	libbpf-dev libelf-dev zlib1g-dev libzstd-dev libjson-c-dev
	# op probes: instruction boundaries of at::_ops::<op>::call (uprobes at each ret)
	libcapstone-dev
	# targets and tests: Debian's CPython 3.11 and PyTorch (CPU) for real dispatcher tests
	python3 python3.11 python3-torch libpython3.11-dev
	# tests: setpriv (util-linux) to check the unprivileged error path and the
	# service's capability bound; systemd-analyze verify on the sampler's unit
	util-linux systemd
	# tests: an independent pprof decoder (protoc + pprof's profile.proto) for sample,
	# and Go to build the pprof tool from those sources offline (test_pprof_tool, ~11 s)
	protobuf-compiler golang-github-google-pprof-dev golang-go
	# tests: Debian chroots with CPython 3.13-3.15 and PyTorch 2.x (tools/make-chroots.sh)
	mmdebstrap
	# the Debian package: cpack -G DEB computes its Depends with dpkg-shlibdeps
	dpkg-dev
	# tests: clang's libFuzzer, ASan and UBSan runtimes for the harnesses of fuzz/
	# (tools/fuzz.sh, the fuzz.smoke test); clang only recommends them, and
	# recommends are not installed here
	libclang-rt-14-dev
	# tests: every C file in .clang-format's style (tools/check-format.sh)
	clang-format
	# tests: the man pages render without warnings (groff) and open with man
	# once installed (tests/install/)
	groff-base man-db
	# tests: the kernel matrix (tools/kmatrix.sh): Debian's kernels booted under
	# QEMU (TCG) with a busybox initramfs of their own modules (xz/zstd-packed)
	qemu-system-x86 busybox-static cpio xz-utils zstd
)

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: run as root (apt-get install)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "install-deps: ${#packages[@]} packages installed"
