#!/usr/bin/env bash
# Compiles test_pyversions.c against one interpreter's own headers and runs
# it: every field of that version's row in user/pyinterp/pyversions.c against
# offsetof() on the real structs. Exit 77 (skipped) when the headers are not
# on this machine.
#   tests/pyheaders/run.sh NAME    (debian-3.11, pyenv-3.12, trixie-3.13, sid-3.15, ...)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
chroots=${PTG_CHROOT_DIR:-/var/cache/ptrace-gpu/chroots}
name=$1
ver=${name#*-}
case $name in
debian-*) root= ;;
pyenv-*)
	pv=$(ls -d "${PYENV_ROOT:-/root/.pyenv}/versions/$ver".* 2>/dev/null | sort -V | tail -n1 || true)
	root=${pv:-/nonexistent}
	;;
*) root=$chroots/${name%%-*} ;;
esac
case $name in
pyenv-*) inc=$root/include/python$ver multi= ;;
*) inc=$root/usr/include/python$ver multi=$root/usr/include/x86_64-linux-gnu/python$ver ;;
esac
if [ ! -f "$inc/internal/pycore_frame.h" ]; then
	echo "skip: $name: no internal headers at $inc (pyenv version or chroot missing; tools/make-chroots.sh)"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(-std=gnu11 -w -I"$src/include" -I"$src/user" -I"$inc" -I"$inc/internal")
# Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>: the
# chroot's include dir, searched after the host's own system headers
[ -n "$multi" ] && [ -d "$multi" ] && flags+=(-idirafter "$root/usr/include")
cc "${flags[@]}" "$here/test_pyversions.c" "$src/user/pyinterp/pyversions.c" -o "$tmp/t"
"$tmp/t"
