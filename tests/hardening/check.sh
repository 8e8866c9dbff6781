#!/usr/bin/env bash
# Checks that built objects carry the hardening of CMakeLists.txt's
# ptg_harden(): full RELRO (GNU_RELRO and BIND_NOW), PIE for executables, the
# stack protector, and fortified libc calls unless PTG_EXPECT_FORTIFY=0 (a
# Debug build). Exit 77 (skipped) without readelf.
#   tests/hardening/check.sh FILE...
set -euo pipefail
if ! command -v readelf >/dev/null; then
	echo "skip: no readelf (binutils)"
	exit 77
fi
failed=0
for f in "$@"; do
	missing=()
	# Whole outputs in variables, never `cmd | grep -q`: with pipefail, grep -q
	# leaving at its first match makes the writer die of SIGPIPE, and the
	# pipeline fail, whenever the writer was not done yet.
	dyn=$(readelf -dW "$f")
	syms=$(readelf --dyn-syms -W "$f")
	phdrs=$(readelf -lW "$f")
	header=$(readelf -hW "$f")
	checked=$(grep -Eo ' __[a-z0-9_]+_chk(@|$)' <<<"$syms" | grep -vc __stack_chk_fail || true)
	grep -Eq 'BIND_NOW|Flags:.* NOW' <<<"$dyn" || missing+=("BIND_NOW (-z now)")
	grep -q GNU_RELRO <<<"$phdrs" || missing+=("GNU_RELRO (-z relro)")
	if grep -q 'Type:.*EXEC' <<<"$header"; then
		missing+=("PIE (ET_EXEC)")
	elif [[ $f != *.so* ]] && ! grep -q 'Flags:.*PIE' <<<"$dyn"; then
		missing+=("PIE flag (-pie)")
	fi
	grep -q ' __stack_chk_fail' <<<"$syms" || missing+=("stack protector (__stack_chk_fail)")
	if [ "${PTG_EXPECT_FORTIFY:-1}" = 1 ] && [ "$checked" -eq 0 ]; then
		missing+=("fortified libc calls (__*_chk, -D_FORTIFY_SOURCE)")
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		list=$(printf '%s, ' "${missing[@]}")
		echo "hardening: $f: no ${list%, }" >&2
		failed=1
	else
		echo "hardening: $f: full RELRO, position-independent, stack protector, fortify"
	fi
done
exit $failed
