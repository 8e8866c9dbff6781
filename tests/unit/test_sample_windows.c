// SPDX-License-Identifier: MIT
/*
 * The sampler's BPF walk (bpf/sample.bpf.c) reads PTG_SAMPLE_WINDOW bytes of
 * each frame (from its start) and of its code object (from the row's code
 * block, py_offsets_blocks()), then takes its fields out of those copies: a
 * u64 at off when off <= PTG_SAMPLE_WINDOW - 8, a u8 when off <
 * PTG_SAMPLE_WINDOW, otherwise one more read of target memory. For every
 * row of the version table, each field the walk takes lies in its window,
 * so a sampled frame costs two reads: a row for which this fails still
 * samples right, one read per field more.
 */
#include <linux/types.h>

#include "ptrace_gpu/sample.h"
#include "pyinterp/pyinterp.h"
#include "test.h"

static void in_window(const char *ver, const char *what, uint32_t start, uint32_t field,
		      uint32_t width)
{
	char name[96];

	snprintf(name, sizeof(name), "%s %s in the sampler's window", ver, what);
	ASSERT_TRUE(field >= start && field - start <= PTG_SAMPLE_WINDOW - width, name);
}

static void check_version(const struct py_version_info *vi)
{
	struct ptg_py_offsets o = vi->off;

	if (!ASSERT_EQ(py_offsets_blocks(&o, vi->code_adaptive), 0, vi->name))
		return;
	in_window(vi->name, "frame owner", 0, o.frame_owner, 1);
	in_window(vi->name, "frame previous", 0, o.frame_previous, 8);
	in_window(vi->name, "frame code", 0, o.frame_code, 8);
	in_window(vi->name, "frame prev_instr", 0, o.frame_prev_instr, 8);
	if (o.frame_is_entry != PTG_OFF_NONE)
		in_window(vi->name, "frame is_entry", 0, o.frame_is_entry, 1);
	/* the code fields are read as u64 (co_firstlineno: its low 32 bits) */
	in_window(vi->name, "co_qualname", o.code_block, o.code_qualname, 8);
	in_window(vi->name, "co_filename", o.code_block, o.code_filename, 8);
	in_window(vi->name, "co_firstlineno", o.code_block, o.code_firstlineno, 8);
	printf("%s: frame fields below %u, code fields at [%u, %u) of the code object\n", vi->name,
	       o.frame_head_size, o.code_block, o.code_block + o.code_block_size);
}

int main(void)
{
	const struct py_version_info *vi, *newest = py_version_newest();

	for (uint32_t minor = 11;; minor++) {
		vi = py_version_lookup(0x03000000u | minor << 16 | 0xf0);
		if (!ASSERT_TRUE(vi != NULL, "a row for each minor version up to the newest"))
			break;
		check_version(vi);
		if (vi == newest)
			break;
	}
	return TEST_DONE();
}
