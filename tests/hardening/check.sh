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
	dyn=$(readelf -dW "$f")
	syms=$(readelf --dyn-syms -W "$f")
	grep -Eq 'BIND_NOW|Flags:.* NOW' <<<"$dyn" || missing+=("BIND_NOW (-z now)")
	readelf -lW "$f" | grep -q GNU_RELRO || missing+=("GNU_RELRO (-z relro)")
	if readelf -hW "$f" | grep -q 'Type:.*EXEC'; then
		missing+=("PIE (ET_EXEC)")
	elif [[ $f != *.so* ]] && ! grep -q 'Flags:.*PIE' <<<"$dyn"; then
		missing+=("PIE flag (-pie)")
	fi
	grep -q ' __stack_chk_fail' <<<"$syms" || missing+=("stack protector (__stack_chk_fail)")
	if [ "${PTG_EXPECT_FORTIFY:-1}" = 1 ] &&
		! grep -v __stack_chk_fail <<<"$syms" | grep -Eq ' __[a-z0-9_]+_chk(@|$)'; then
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
