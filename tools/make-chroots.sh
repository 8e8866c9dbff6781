#!/usr/bin/env bash
# Builds Debian chroots with newer CPython and PyTorch builds for the version
# tests, cached under $PTG_CHROOT_DIR (default /var/cache/ptrace-gpu/chroots).
# A chroot is rebuilt only when its ready marker is missing. Run as root.
#
#   tools/make-chroots.sh              every suite below
#   tools/make-chroots.sh trixie sid   only these
#
# The tests look for <dir>/<suite>/.ptg-ready and skip (with the reason) what
# is missing, so a machine without the mirror still runs everything else.
set -euo pipefail

dir=${PTG_CHROOT_DIR:-/var/cache/ptrace-gpu/chroots}

# suite -> packages. trixie: 3.13 + torch 2.6; forky: 3.14 + torch 2.x;
# sid: 3.14 and 3.15 (no torch: not needed twice, and it saves 1.5 GB).
# The -dev packages hold each version's internal headers: the layout test
# (tests/pyheaders) checks our tables against offsetof() on them.
declare -A pkgs=(
	[trixie]="python3 python3-torch libpython3.13-dev"
	[forky]="python3 python3-torch libpython3.14-dev"
	[sid]="python3 python3.15 libpython3.14-dev libpython3.15-dev"
	# the package test (test_package): Debian 12 with its Python alone; the
	# libraries ptrace-gpu's package depends on are downloaded into its apt
	# cache, not installed, so that `apt-get install ./ptrace-gpu_*.deb` there
	# installs them as on a user's machine, without the network
	[bookworm]="python3"
)
declare -A fetch=(
	[bookworm]="libbpf1 libelf1 zlib1g libzstd1 libjson-c5 libcapstone4"
)

if [ "$(id -u)" -ne 0 ]; then
	echo "make-chroots: run as root (mmdebstrap, chroot)" >&2
	exit 1
fi
if ! command -v mmdebstrap >/dev/null; then
	echo "make-chroots: mmdebstrap is not installed (tools/install-deps.sh installs it)" >&2
	exit 1
fi

# The host's own mirror, as apt is configured here.
mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null |
	head -n1)
mirror=${PTG_DEBIAN_MIRROR:-${mirror:-http://deb.debian.org/debian}}

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(trixie forky sid bookworm)

# Root-owned and not writable by others: the tests run these interpreters as root.
install -d -m 0755 -o root -g root "$dir"

for s in "${suites[@]}"; do
	if [ -z "${pkgs[$s]+x}" ]; then
		echo "make-chroots: unknown suite $s (known: ${!pkgs[*]})" >&2
		exit 2
	fi
done

# Builds suite $1 unless cached; one builder per suite (a second run waits
# on the lock, then finds it cached). Returns non-zero when mmdebstrap failed.
build_suite() {
	local s=$1 root="$dir/$1" opts=()

	exec 9>"$dir/$s.lock"
	flock 9
	if [ -f "$root/.ptg-ready" ]; then
		echo "make-chroots: $s: cached in $root"
		return 0
	fi
	rm -rf "$root" "$root.tmp"
	echo "make-chroots: $s: building in $root (${pkgs[$s]})"
	if [ -n "${fetch[$s]+x}" ]; then
		# keep the package lists and the downloaded .debs for apt in there
		opts+=(--skip=cleanup/apt/lists --skip=cleanup/apt/cache
			--customize-hook="chroot \"\$1\" sh -c \"apt-get clean && apt-get install -y -qq --download-only ${fetch[$s]}\"")
	fi
	if [ "$s" != trixie ] && [ "$s" != bookworm ]; then
		# forky and sid Release files can be past Valid-Until on a snapshot mirror.
		opts+=(--aptopt='Acquire::Check-Valid-Until "false"')
	fi
	if ! mmdebstrap --quiet --variant=apt --include="${pkgs[$s]// /,}" "${opts[@]}" \
		"$s" "$root.tmp" "$mirror" >"$dir/$s.log" 2>&1; then
		echo "make-chroots: $s: mmdebstrap failed, see $dir/$s.log" >&2
		tail -n 5 "$dir/$s.log" >&2 || true
		rm -rf "$root.tmp"
		return 1
	fi
	# the interpreters it has (a missing one is no error: each suite has some)
	chroot "$root.tmp" sh -c 'for p in python3 python3.13 python3.14 python3.15; do
		if command -v $p >/dev/null; then
			$p -c "import sys; print(sys.executable, sys.version.split()[0])"
		fi
	done' >"$root.tmp/.ptg-ready"
	mv "$root.tmp" "$root"
	sed "s/^/make-chroots: $s: /" "$root/.ptg-ready"
}

# In parallel: each download is one apt stream; together they fill the link.
pids=()
for s in "${suites[@]}"; do
	build_suite "$s" &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
	wait "$p" || rc=1
done
exit $rc
