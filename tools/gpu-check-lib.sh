# shellcheck shell=bash
# SPDX-License-Identifier: MIT
# Sourced by tools/gpu-check.sh and tools/gpu-check-nopy.sh.

# wait_for FILE TEXT SECONDS PID: until FILE has TEXT; fails if PID ends first
wait_for() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$4" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
