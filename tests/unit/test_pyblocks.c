// SPDX-License-Identifier: MIT
/*
 * The blocks record's BPF hot path reads at once (py_offsets_blocks()): for
 * every version in the table, each field it takes from a block lies inside
 * that block and naturally aligned in it (the BPF stack allows no other
 * access), and each block fits its BPF buffer. A row that breaks this would
 * make record refuse that version at load.
 */
#include <errno.h>

#include "pyinterp/pyinterp.h"
#include "test.h"

static void check_field(const char *ver, const char *what, uint32_t start, uint32_t size,
			uint32_t field, uint32_t width)
{
	char name[96];

	snprintf(name, sizeof(name), "%s %s in its block", ver, what);
	ASSERT_TRUE(field >= start && field + width <= start + size, name);
	snprintf(name, sizeof(name), "%s %s aligned in its block", ver, what);
	ASSERT_EQ((field - start) % width, 0, name);
}

static void check_version(const struct py_version_info *vi)
{
	struct ptg_py_offsets o = vi->off;
	uint32_t frame_ptr;

	if (!ASSERT_EQ(py_offsets_blocks(&o, vi->code_adaptive), 0, vi->name))
		return;
	frame_ptr = o.tstate_cframe != PTG_OFF_NONE ? o.tstate_cframe : o.cframe_current_frame;
	check_field(vi->name, "native_thread_id", o.tstate_block, o.tstate_block_size,
		    o.tstate_native_tid, 8);
	check_field(vi->name, "cframe / current_frame", o.tstate_block, o.tstate_block_size,
		    frame_ptr, 8);
	check_field(vi->name, "frame code", 0, o.frame_head_size, o.frame_code, 8);
	check_field(vi->name, "frame previous", 0, o.frame_head_size, o.frame_previous, 8);
	check_field(vi->name, "frame prev_instr", 0, o.frame_head_size, o.frame_prev_instr, 8);
	check_field(vi->name, "frame owner", 0, o.frame_head_size, o.frame_owner, 1);
	check_field(vi->name, "localsplus[0]", 0, o.frame_block_size, o.frame_localsplus, 8);
	check_field(vi->name, "co_qualname", o.code_block, o.code_block_size, o.code_qualname, 8);
	check_field(vi->name, "co_filename", o.code_block, o.code_block_size, o.code_filename, 8);
	check_field(vi->name, "co_firstlineno", o.code_block, o.code_block_size, o.code_firstlineno,
		    4);
	check_field(vi->name, "unit before the first instruction", o.code_block,
		    o.code_block_units_size, vi->code_adaptive - 2, 2);
	check_field(vi->name, "first instructions", o.code_block, o.code_block_units_size,
		    vi->code_adaptive, 2);
	check_field(vi->name, "last unit of the first instructions", o.code_block,
		    o.code_block_units_size, vi->code_adaptive + PTG_PY_CODE_UNIT_BYTES - 2, 2);
	ASSERT_TRUE(o.code_block_size <= o.code_block_units_size, "fingerprint fields first");
	ASSERT_EQ(o.tstate_block % 8, 0, "tstate block starts 8-aligned");
	ASSERT_EQ(o.code_block % 8, 0, "code block starts 8-aligned");
	ASSERT_TRUE(o.frame_head_size <= o.frame_block_size, "the head is part of the block");
	printf("%s: tstate [%u, +%u), frame [0, +%u / +%u), code [%u, +%u / +%u)\n", vi->name,
	       o.tstate_block, o.tstate_block_size, o.frame_head_size, o.frame_block_size,
	       o.code_block, o.code_block_size, o.code_block_units_size);
}

static void check_refusal(void)
{
	const struct py_version_info *vi = py_version_newest();
	struct ptg_py_offsets o = vi->off;

	/* a field past what the buffer holds: refused, not read out of bounds */
	o.code_firstlineno = o.code_qualname + PTG_PY_CODE_BLOCK_MAX;
	ASSERT_EQ(py_offsets_blocks(&o, vi->code_adaptive), -E2BIG,
		  "code block larger than its buffer");
	o = vi->off;
	ASSERT_EQ(py_offsets_blocks(&o, o.code_qualname + PTG_PY_CODE_BLOCK_MAX), -E2BIG,
		  "instructions beyond the code buffer");
	o = vi->off;
	o.frame_localsplus = PTG_PY_FRAME_BLOCK_MAX;
	ASSERT_EQ(py_offsets_blocks(&o, vi->code_adaptive), -E2BIG,
		  "frame block larger than its buffer");
}

int main(void)
{
	const struct py_version_info *newest = py_version_newest(), *vi;
	int n = 0;

	/* every row: one lookup per minor version from 3.11 to the newest */
	for (uint32_t minor = 11; minor < 64; minor++) {
		vi = py_version_lookup(0x03000000 | minor << 16 | 0xf0);
		if (!vi)
			continue;
		check_version(vi);
		n++;
		if (vi == newest)
			break;
	}
	ASSERT_TRUE(n >= 5, "rows 3.11 to 3.15 checked");
	check_refusal();
	return TEST_DONE();
}
