#!/usr/bin/env bash
# Runs a command of this machine inside one of Debian's kernels, booted under
# QEMU with TCG (no KVM needed): the kernel matrix of the test suite.
#
#   tools/kmatrix.sh [-a APPEND] [-o OUTDIR] SUITE -- CMD [ARG...]
#
# SUITE: a Debian suite (bullseye, bookworm, trixie, forky, sid, or a
# -backports one), whose linux-image-amd64 is booted; or the path of a bzImage
# that has 9p, 9pnet_virtio, virtio_pci and overlayfs built in. -a APPEND adds
# to the kernel's command line (e.g. preempt=full; repeatable).
#
# The kernel is fetched with apt-get download into a cache ($PTG_KERNEL_CACHE,
# default /var/cache/ptrace-gpu/kernels), one directory per suite and ABI
# (e.g. bookworm-6.1.0-50-amd64: its vmlinuz and the few modules the guest
# needs); nothing is installed, and the host's apt configuration is left
# alone: each suite's package lists live in a private apt state in the cache,
# refreshed once a day. Without a mirror, a cached kernel is used as it is.
#
# The guest: a busybox initramfs with the kernel's own virtio_pci, 9p,
# 9pnet_virtio, netfs and overlay modules. It mounts this machine's / read-only
# over virtio-9p with a tmpfs overlay on top (the guest may write anywhere; the
# writes are lost), a fresh tmpfs on /tmp and /run, proc, sys, dev, bpffs,
# debugfs, tracefs and cgroup2, and OUTDIR (default: a temporary directory,
# removed at the end) writable at /out. It then runs CMD as root, in this
# shell's current directory, with this shell's environment (and
# PTG_KMATRIX_OUT=/out, PTG_KMATRIX_TIMEOUT: the boot's limit, below) and
# stdin from /dev/null. CMD's stdout and stderr come back to
# this script's (as they come; the two are not interleaved exactly).
#
# One line on stderr per run: the kernel, its preemption model, the boot time
# (QEMU start to CMD start), the command's time, the exit status.
# Exit status: CMD's; 255 when it did not finish (boot failure, timeout:
# the console's last lines are printed); 1 when CMD exited 0 but the kernel
# logged a BUG, Oops, WARNING or panic (printed); 77 (skipped) with one line
# of reason where qemu, busybox or cpio is missing or the kernel cannot be
# fetched. With -o, the console's log is kept in OUTDIR/console.
#
# env: PTG_KMATRIX_TIMEOUT (seconds per boot, 600), PTG_KMATRIX_MEM (3G),
#      PTG_KMATRIX_SMP (2), PTG_KMATRIX_ACCEL (tcg,thread=single: with one
#      thread per CPU, "tcg", kernels that patch their text while the other
#      CPU runs it (static keys: every perf_event_open of a task's event,
#      every tracepoint attached) die of "Oops: int3" within a minute or two
#      (6.12 with preempt=full and 7.2 here; QEMU 7.2), so the two CPUs
#      take turns on one host thread),
#      PTG_KMATRIX_GRACE (seconds the guest may still run after an oops, 60),
#      PTG_KERNEL_CACHE, PTG_DEBIAN_MIRROR (default: the one
#      /etc/apt/sources.list.d/debian.sources names).
#
# By hand (as root), e.g. the checks ctest runs (tests/kernels/guest.py):
#   tools/kmatrix.sh sid -- python3 tests/kernels/guest.py
#   tools/kmatrix.sh -a preempt=full trixie -- python3 tests/kernels/guest.py -v
#   tools/kmatrix.sh -o /tmp/kout bookworm -- build/ptrace-gpu record -o /out/fib.ptg \
#       -- python3 tests/workloads/fib.py
#   cd build && ctest -R '^kernel\.' --output-on-failure     (all six boots)
# Needs: apt-get install qemu-system-x86 busybox-static cpio
set -euo pipefail

usage() {
	sed -n '4,10p' "$0" >&2
	exit 2
}
skip() {
	echo "kmatrix: skipped: $*" >&2
	exit 77
}

append=() out=
while getopts a:o:h o; do
	case $o in
	a) append+=("$OPTARG") ;;
	o) out=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -lt 3 ] || [ "$2" != -- ]; then
	usage
fi
spec=$1
shift 2

for t in qemu-system-x86_64 busybox cpio dpkg-deb apt-get; do
	command -v $t >/dev/null ||
		skip "$t is not installed (apt-get install qemu-system-x86 busybox-static cpio)"
done
busybox=$(command -v busybox)
# the initramfs needs a static busybox (busybox-static), not a dynamic one
if ldd "$busybox" >/dev/null 2>&1; then
	skip "$busybox is not static (apt-get install busybox-static)"
fi

TMO=${PTG_KMATRIX_TIMEOUT:-600}
cache=${PTG_KERNEL_CACHE:-/var/cache/ptrace-gpu/kernels}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/ptrace-gpu/kernels
	mkdir -p "$cache"
fi
mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null |
	head -n1)
mirror=${PTG_DEBIAN_MIRROR:-${mirror:-http://deb.debian.org/debian}}

W=$(mktemp -d "${TMPDIR:-/tmp}/kmatrix.XXXXXX")
trap 'rm -rf "$W"' EXIT

# --- the kernel: vmlinuz and a cpio of the modules the guest loads ----------
# Modules the guest needs (with what they depend on, from their modinfo's
# depends=), where the kernel has them as modules.
MODS="virtio_pci 9pnet_virtio 9p overlay"
MODDIRS=(drivers/virtio net/9p fs/9p fs/netfs fs/fscache fs/overlayfs)

# aptcmd TOOL SUITE ARGS...: apt-get/apt-cache with the suite's private state,
# at most $APT_TMO seconds.
aptcmd() {
	local tool=$1 a=$cache/apt/$2
	shift 2
	timeout "${APT_TMO:-300}" "$tool" -o Dir::Etc::SourceList="$a/sources.list" \
		-o Dir::Etc::SourceParts="$a/none" -o Dir::Etc::Preferences="$a/none" \
		-o Dir::Etc::PreferencesParts="$a/none" -o Dir::State::Lists="$a/lists" \
		-o Dir::Cache="$a/cache" -o Dir::State::status="$a/status" -o Acquire::Languages=none \
		-o APT::Architectures=amd64 -o APT::Sandbox::User=root \
		-o Acquire::Check-Valid-Until=false -o Debug::NoLocking=1 "$@"
}

# Refreshes SUITE's package lists when older than a day; fails without a mirror.
apt_lists() {
	local s=$1 a=$cache/apt/$1 src
	src="deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $s main"
	mkdir -p "$a"/{lists/partial,cache/archives/partial,none}
	touch "$a/status"
	if [ "$src" = "$(cat "$a/sources.list" 2>/dev/null)" ] &&
		[ -n "$(find "$a/updated" -mmin -1440 2>/dev/null)" ]; then
		return 0
	fi
	echo "$src" >"$a/sources.list"
	rm -f "$a/updated"
	aptcmd apt-get "$s" -qq update >"$W/apt.log" 2>&1 || return 1
	touch "$a/updated"
}

# The current ABI of SUITE's linux-image-amd64 (6.1.0-50-amd64), or fails.
suite_abi() {
	aptcmd apt-cache "$1" show linux-image-amd64 2>/dev/null |
		sed -n 's/^Depends:.* linux-image-\([0-9][^ ,]*\) (.*/\1/p' | head -n1
}

# Unpacks vmlinuz into $2/vmlinuz and the modules into $2/mods.cpio.gz from
# SUITE's packages of ABI $1: linux-image-ABI up to 6.x; from 7.x vmlinuz is
# in linux-binary-ABI and the modules in linux-modules-ABI.
unpack_kernel() {
	local s=$1 abi=$2 dir=$3 t=$W/unpack pkg deb m f
	mkdir -p "$t/deb" "$t/x"
	for pkg in linux-binary-$abi linux-modules-$abi linux-image-$abi; do
		aptcmd apt-cache "$s" show "$pkg" >/dev/null 2>&1 || continue
		[ "$pkg" = "linux-image-$abi" ] && [ -f "$dir/vmlinuz.new" ] && [ -d "$t/x/mods" ] && break
		(cd "$t/deb" && APT_TMO=900 aptcmd apt-get "$s" -qq download "$pkg" >>"$W/apt.log" 2>&1) ||
			return 1
		deb=$(ls "$t"/deb/"$pkg"_*.deb)
		local pats=('*/vmlinuz*' '*/modules.builtin')
		for m in "${MODDIRS[@]}"; do pats+=("*/kernel/$m/*"); done
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$t/x" --wildcards "${pats[@]}" 2>/dev/null || true
		rm -f "$deb"
		f=$(find "$t/x" -name 'vmlinuz*' -type f | head -n1)
		[ -n "$f" ] && mv "$f" "$dir/vmlinuz.new"
		[ -n "$(find "$t/x" -name '*.ko*' | head -n1)" ] && mkdir -p "$t/x/mods"
	done
	[ -f "$dir/vmlinuz.new" ] || { echo "no vmlinuz in the packages of $abi" >"$W/why"; return 1; }
	[ -d "$t/x/mods" ] || { echo "no modules in the packages of $abi" >"$W/why"; return 1; }
	# the modules, uncompressed (busybox's insmod reads plain ELF), by name
	find "$t/x" -path "$t/x/mods" -prune -o -name '*.ko*' -print | while read -r f; do
		m=$(basename "$f")
		m=${m%%.ko*}
		m=${m//-/_}
		case $f in
		*.xz) xz -dc "$f" ;;
		*.zst) zstd -qdc "$f" ;;
		*.gz) gzip -dc "$f" ;;
		*) cat "$f" ;;
		esac >"$t/x/mods/$m.ko"
	done
	# $MODS and what they depend on, in an order insmod can follow
	: >"$t/order"
	add() {
		local m=${1//-/_} d
		grep -qx "$m" "$t/order" && return 0
		if [ ! -f "$t/x/mods/$m.ko" ]; then
			# built in: nothing to load
			find "$t/x" -name modules.builtin -exec grep -q "/${1}.ko\$" {} + && return 0
			echo "module $m of $abi neither in its package nor built in" >"$W/why"
			return 1
		fi
		for d in $(tr '\0' '\n' <"$t/x/mods/$m.ko" | sed -n 's/^depends=//p' | tr , ' '); do
			add "$d" || return 1
		done
		echo "$m" >>"$t/order"
	}
	for m in $MODS; do add "$m" || return 1; done
	mkdir -p "$t/c/mods"
	while read -r m; do mv "$t/x/mods/$m.ko" "$t/c/mods/"; done <"$t/order"
	cp "$t/order" "$t/c/mods/order"
	(cd "$t/c" && find mods | cpio -o -H newc --quiet | gzip -1) >"$dir/mods.cpio.gz.new"
	mv "$dir/mods.cpio.gz.new" "$dir/mods.cpio.gz"
	mv "$dir/vmlinuz.new" "$dir/vmlinuz"
	rm -rf "$t"
}

# Sets $kdir to SUITE's cached kernel, fetching it when missing or stale.
fetch_kernel() {
	local s=$1 abi old
	exec 8>"$cache/.lock"
	flock 8
	if apt_lists "$s"; then
		abi=$(suite_abi "$s")
		[ -n "$abi" ] || skip "$s: no linux-image-amd64 in $mirror"
		echo "$abi" >"$cache/$s.abi"
	else
		# no mirror: the kernel cached last, if any
		abi=$(cat "$cache/$s.abi" 2>/dev/null) ||
			skip "$s: cannot read $mirror (apt-get update: $(tail -n1 "$W/apt.log"))"
		echo "kmatrix: $s: no mirror ($(tail -n1 "$W/apt.log")); using the cached $abi" >&2
	fi
	kdir=$cache/$s-$abi
	if [ ! -f "$kdir/vmlinuz" ] || [ ! -f "$kdir/mods.cpio.gz" ]; then
		mkdir -p "$kdir"
		echo "kmatrix: fetching $s's kernel $abi into $kdir" >&2
		if ! unpack_kernel "$s" "$abi" "$kdir"; then
			rm -rf "$kdir"
			skip "$s: cannot fetch kernel $abi: $(cat "$W/why" 2>/dev/null || tail -n1 "$W/apt.log")"
		fi
		# the suite's older kernels are not used again
		for old in "$cache/$s"-*; do
			[ "$old" = "$kdir" ] || rm -rf "$old"
		done
	fi
	flock -u 8
}

if [ -f "$spec" ]; then
	kernel=$spec mods='' tag=$(basename "$spec")
else
	case $spec in
	*[!a-z-]* | '') usage ;;
	esac
	fetch_kernel "$spec"
	kernel=$kdir/vmlinuz mods=$kdir/mods.cpio.gz tag=$spec
fi

# --- the initramfs: busybox, /init, /cmd ---------------------------------------
R=$W/root
mkdir -p "$R"/{bin,proc,sys,dev,lower,upper,newroot}
cp "$busybox" "$R/bin/busybox"
q() { # single-quoted for sh
	local a=${1//\'/\'\\\'\'}
	printf "'%s' " "$a"
}
{
	echo "cd $(q "$PWD") || exit 255"
	# this shell's environment, less what only describes this shell
	while IFS= read -r -d '' kv; do
		k=${kv%%=*}
		case $k in
		PWD | OLDPWD | SHLVL | _ | BASH_* | *[!A-Za-z0-9_]* | [0-9]*) continue ;;
		esac
		echo "export $k=$(q "${kv#*=}")"
	done < <(env -0)
	echo "export PTG_KMATRIX_OUT=/out PTG_KMATRIX_TIMEOUT=$TMO"
	printf 'exec '
	for a; do q "$a"; done
	echo
} >"$R/cmd"
cat >"$R/init" <<'EOF'
#!/bin/busybox sh
# stage 1, in the initramfs: modules, the root, the file systems; then
# switch_root to stage 2 (/run/ptgk/init2), so that the command's / is the
# mount namespace's root (as /proc/PID/root says), not a chroot in it
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
say() { echo "PTGK_$*"; } # for the host, on the console
fail() { say "ERR $*"; say "EXIT 255"; poweroff -f; }
for m in $(cat /mods/order 2>/dev/null); do insmod "/mods/$m.ko" || say "ERR insmod $m"; done
o=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o $o,ro,cache=loose hostroot /lower || fail "mount of the host's root over 9p"
mount -t tmpfs upper /upper && mkdir /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w root /newroot ||
	fail "overlay mount"
cd /newroot
mkdir -p out proc sys dev run tmp
mount -t 9p -o $o,cache=none out out || say "ERR mount of /out over 9p"
mount -t proc proc proc
mount -t sysfs sys sys
mount -t devtmpfs dev dev
mount -t tmpfs -o mode=0755 run run
mount -t tmpfs -o mode=1777 tmp tmp
mkdir -p dev/pts dev/shm
mount -t devpts pts dev/pts
mount -t tmpfs shm dev/shm
mount -t bpf bpf sys/fs/bpf
mount -t debugfs debugfs sys/kernel/debug
mount -t tracefs tracefs sys/kernel/tracing 2>/dev/null
mount -t cgroup2 cgroup2 sys/fs/cgroup 2>/dev/null
mkdir -p run/ptgk/bin
cp /bin/busybox /init2 /cmd run/ptgk/
exec switch_root /newroot /run/ptgk/busybox sh /run/ptgk/init2
EOF
cat >"$R/init2" <<'EOF'
# stage 2, pid 1 in the host's root (overlaid): runs the command
/run/ptgk/busybox --install -s /run/ptgk/bin
export PATH=/run/ptgk/bin
say() { echo "PTGK_$*"; }
up() { cut -d' ' -f1 /proc/uptime; }
ip link set lo up 2>/dev/null
ulimit -l unlimited
# the preemption model in force: "none voluntary (full)" -> full
pre=$(sed -n 's/.*(\([a-z]*\)).*/\1/p' /sys/kernel/debug/sched/preempt 2>/dev/null)
# stdout and stderr: pipes (as under `cmd >file`) -> raw serial ports -> host files
stty -F /dev/ttyS1 raw -echo
stty -F /dev/ttyS2 raw -echo
mkfifo /run/ptgk/o /run/ptgk/e
cat /run/ptgk/o >/dev/ttyS1 &
cat /run/ptgk/e >/dev/ttyS2 &
say "READY $(uname -r) ${pre:-?} $(up)"
env -i /bin/sh -c "$(cat /run/ptgk/cmd)" </dev/null >/run/ptgk/o 2>/run/ptgk/e
rc=$?
wait # for the cats: a port's last close waits for its output to drain
say "EXIT $rc $(up)"
sync
poweroff -f
EOF
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) >"$W/base.gz"
cat "$W/base.gz" ${mods:+"$mods"} >"$W/initrd.gz" # concatenated cpio archives

# --- one boot ---------------------------------------------------------------
if [ -n "$out" ]; then
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
else
	out=$W/out
	mkdir -p "$out"
fi
: >"$W/stdout"
: >"$W/stderr"
# the guest's stdout and stderr as they come: read on until the boot is over
follow() {
	exec 3<"$1"
	while [ ! -e "$W/over" ]; do
		cat <&3
		sleep 0.2
	done
	cat <&3
}
follow "$W/stdout" &
f1=$!
follow "$W/stderr" >&2 &
f2=$!

start=$EPOCHREALTIME t_ready='' t_exit='' rc='' kver='?' pre='?' grace=
while IFS= read -r line; do
	line=${line%$'\r'}
	printf '%s\n' "$line" >>"$W/console"
	case $line in *PTGK_*) line=PTGK_${line#*PTGK_} ;; esac # BIOS escapes before it
	case $line in
	PTGK_READY*)
		read -r _ kver pre _ <<<"$line"
		t_ready=$EPOCHREALTIME
		;;
	PTGK_EXIT*)
		read -r _ rc _ <<<"$line"
		t_exit=$EPOCHREALTIME
		;;
	PTGK_ERR*) echo "kmatrix: $tag: ${line#PTGK_ERR }" >&2 ;;
	*BUG:* | *WARNING:* | *Oops* | *"Kernel panic"*)
		echo "kmatrix: $tag: console: $line" >&2
		# after an oops the guest may never finish: it has a minute more
		case $line in *WARNING:*) ;; *)
			if [ -z "$grace" ]; then
				(sleep "${PTG_KMATRIX_GRACE:-60}" && kill "$(cat "$W/qemu.pid")") 2>/dev/null &
				grace=$!
			fi
			;;
		esac
		;;
	esac
done < <(timeout "$TMO" qemu-system-x86_64 -accel "${PTG_KMATRIX_ACCEL:-tcg,thread=single}" \
	-cpu max -m "${PTG_KMATRIX_MEM:-3G}" -smp "${PTG_KMATRIX_SMP:-2}" -pidfile "$W/qemu.pid" \
	-kernel "$kernel" -initrd "$W/initrd.gz" \
	-append "console=ttyS0 panic=-1 loglevel=5 ${append[*]}" \
	-nographic -nic none -no-reboot -serial mon:stdio \
	-serial "file:$W/stdout" -serial "file:$W/stderr" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$out,mount_tag=out,security_model=none" </dev/null 2>&1)
end=$EPOCHREALTIME
[ -z "$grace" ] || kill "$grace" 2>/dev/null || true
touch "$W/over"
wait $f1 $f2 || true

dt() { [ -n "$1" ] && [ -n "$2" ] && awk "BEGIN { printf \"%.1f s\", $2 - $1 }" || echo -; }
[ -n "$t_exit" ] || rc=255
[[ $rc =~ ^[0-9]+$ ]] || rc=255
what="${append[*]}"
echo "kmatrix: $tag $kver${what:+ ($what)}: preempt=$pre, boot $(dt "$start" "$t_ready")," \
	"command $(dt "$t_ready" "$t_exit"), total $(dt "$start" "$end"), exit $rc" >&2
if [ -z "$t_exit" ]; then
	if [ -z "$t_ready" ]; then
		echo "kmatrix: $tag: the guest did not reach the command (timeout ${TMO} s?);" \
			"the console's last lines:" >&2
	elif [ -n "$grace" ]; then
		echo "kmatrix: $tag: the command had not finished ${PTG_KMATRIX_GRACE:-60} s after" \
			"the kernel's oops; the console's last lines:" >&2
	else
		echo "kmatrix: $tag: the command did not finish within ${TMO} s;" \
			"the console's last lines:" >&2
	fi
	tail -n 30 "$W/console" | sed 's/^/  | /' >&2
fi
# a kernel splat fails the run, whatever the command said: its first 100 lines
splat=$(grep -n -m1 -E 'BUG:|Oops|WARNING:|Kernel panic|general protection' "$W/console" |
	cut -d: -f1 || true)
if [ -n "$splat" ]; then
	echo "kmatrix: $tag: the kernel complained; the console from there:" >&2
	tail -n +"$splat" "$W/console" | head -n 100 | sed 's/^/  | /' >&2
	[ "$rc" != 0 ] || rc=1
fi
[ "$out" = "$W/out" ] || cp "$W/console" "$out/console"
exit "$rc"
