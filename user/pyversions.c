// SPDX-License-Identifier: MIT
/*
 * Per-version layouts of CPython, taken from each version's headers
 * (tools/py-offsets.c prints them for an installed version). Adding a
 * version is adding a row: 3.12 keeps tstate->cframe and adds shim frames
 * (owner 3) and RETURN_CONST; 3.13+ drops cframe (tstate_cframe =
 * PTG_OFF_NONE) and publishes these offsets in _PyRuntime._Py_DebugOffsets.
 */
#include <stdio.h>

#include "pyinterp.h"

#define PTG_OFF_NONE 0xffffffffu

static const struct py_version_info versions[] = {
	{
		.name = "3.11",
		.hex_min = 0x030b00a0,
		.hex_max = 0x030bffff,
		.off = {
			.runtime_tstate_current = 576, /* gilstate.tstate_current */
			.tstate_cframe = 56,
			.cframe_current_frame = 8,
			.frame_code = 32,
			.frame_previous = 48,
			.frame_prev_instr = 56,
			.frame_owner = 69,
			.frameobj_frame = 24,
			.frame_localsplus = 72,
			.code_filename = 112,
			.code_qualname = 128,
			.code_firstlineno = 72,
			.owner_cstack = 0xff, /* 3.11 has no shim frames */
			.unicode_length = 16,
			.unicode_state = 32,
			.unicode_ascii_data = 48,
			.unicode_compact_data = 72,
		},
		.code_name = 120,
		.object_type = 8,
		.type_name = 24,
		.runtime_interp_head = 40,
		.interp_threads_head = 16,
		.tstate_next = 8,
		.tstate_native_tid = 160,
		/* Include/internal/pycore_dict.h, pycore_object.h and cpython/object.h of 3.11 */
		.dict = {
			.type_flags = 168,
			.type_dictoffset = 288,
			.heaptype_cached_keys = 872,
			.flag_managed_dict = 1 << 4,
			.managed_dict = -24,   /* ((PyObject **)obj)[-3] */
			.managed_values = -32, /* ((PyDictValues **)obj)[-4] */
			.dict_keys = 32,
			.dict_values = 40,
			.keys_log2_index_bytes = 9,
			.keys_kind = 10,
			.keys_nentries = 24,
			.keys_indices = 32,
			.entry_size = 24,
			.entry_key = 8,
			.entry_value = 16,
			.uentry_size = 16,
			.uentry_key = 0,
			.uentry_value = 8,
			.kind_general = 0, /* DICT_KEYS_GENERAL */
		},
		.op_resume = { 151, 150 }, /* RESUME, RESUME_QUICK */
		.op_return = { 83 },	   /* RETURN_VALUE */
		.op_yield = { 86 },	   /* YIELD_VALUE */
	},
};

const struct py_version_info *py_version_lookup(uint32_t version_hex)
{
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		if (version_hex >= versions[i].hex_min && version_hex <= versions[i].hex_max)
			return &versions[i];
	}
	return NULL;
}

const char *py_supported_versions(void)
{
	static char buf[64];
	size_t n = 0;

	if (buf[0])
		return buf;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? ", " : "", versions[i].name);
	return buf;
}
