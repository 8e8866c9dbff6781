#!/usr/bin/env bash
# Checks that every C file git tracks (but the generated vmlinux.h) is as
# clang-format makes it with the project's .clang-format. Run by ctest as
# style.clang_format; exit 77 (skipped) without clang-format or git.
#   tools/check-format.sh           check, list what is off
#   tools/check-format.sh --fix     format those files in place
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null || ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "skip: no clang-format, or not a git checkout"
	exit 77
fi
mapfile -t files < <(git ls-files '*.c' '*.h' | grep -v '^vmlinux/')
if [ "${1:-}" = --fix ]; then
	clang-format -i "${files[@]}"
	exit 0
fi
off=()
for f in "${files[@]}"; do
	clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || off+=("$f")
done
if [ ${#off[@]} -gt 0 ]; then
	printf 'check-format: not in .clang-format style (tools/check-format.sh --fix): %s\n' "${off[@]}" >&2
	exit 1
fi
echo "check-format: ${#files[@]} files in .clang-format style"
