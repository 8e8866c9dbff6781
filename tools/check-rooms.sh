#!/usr/bin/env bash
# The rooms of user/ (docs/architecture.md) keep their doors one-way at
# compile time: a room sees only its own headers and those of the rooms it
# may use. This checks the other half, at link time: no room's library calls
# a function or uses a variable that only a room it may not use defines (a
# declaration in a lower header with its definition in a higher room would
# compile and, in one binary, link), and that no two files of a room call
# each other. The rooms each may use are the links of BUILD/rooms/ROOM/ that
# CMakeLists.txt's ptg_room() makes.
#   tools/check-rooms.sh [BUILD]
set -euo pipefail
build=${1:-${PTG_BUILD_DIR:-build}}
if [ ! -d "$build/rooms" ] || ! command -v nm >/dev/null; then
	echo "skip: no $build/rooms (not built yet?) or no nm"
	exit 77
fi
declare -A owner
rooms=()
for dir in "$build"/rooms/*/; do
	room=$(basename "$dir")
	lib="$build/libptg_$room.a"
	[ -f "$lib" ] || { echo "check-rooms: $lib is missing" >&2; exit 1; }
	rooms+=("$room")
	while read -r sym; do
		owner[$sym]=$room
	done < <(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 { print $3 }')
done
bad=0
for room in "${rooms[@]}"; do
	allowed=" $(cd "$build/rooms/$room" && echo *) "
	while read -r sym; do
		other=${owner[$sym]:-}
		[ -n "$other" ] && [ "$other" != "$room" ] || continue
		if [[ $allowed != *" $other "* ]]; then
			echo "check-rooms: user/$room uses $sym, defined in user/$other, a room it may not use" >&2
			bad=1
		fi
	done < <(nm -u "$build/libptg_$room.a" 2>/dev/null | awk '$1 == "U" { print $2 }' | sort -u)
done
# Inside a room, its files run one way too: no two of them call each other,
# directly or round a loop (a file cut in two by size rather than by idea).
# tsort(1) names the files of a loop.
for room in "${rooms[@]}"; do
	loop=$(nm -A "$build/libptg_$room.a" 2>/dev/null | awk '
		{ split($1, p, ":"); f = p[2] }
		NF == 3 && $2 == "U" { use[f] = use[f] " " $3 }
		NF == 3 && $2 ~ /^[A-TV-Z]$/ { def[$3] = f }
		END {
			for (f in use) {
				n = split(use[f], u, " ")
				for (i = 1; i <= n; i++)
					if ((u[i] in def) && def[u[i]] != f)
						print f, def[u[i]]
			}
		}' | sort -u | tsort 2>&1 >/dev/null | sed -n 's/^tsort: //p' | grep -v 'input contains a loop' || true)
	if [ -n "$loop" ]; then
		echo "check-rooms: user/$room has files that call each other:" $loop >&2
		bad=1
	fi
done
[ $bad = 0 ] || exit 1
echo "check-rooms: ${#rooms[@]} rooms, every call runs down or across, no two files call each other"
