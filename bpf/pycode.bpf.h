/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Code objects for pyframe.bpf.c: what names one (its qualname, filename
 * and first line, and their fingerprint), sending those names once per
 * object (seen_code), and forgetting them when the object is freed
 * (code_dealloc). Included by pyframe.bpf.c after its ring buffer, its
 * offsets (off) and count_loss().
 */
#ifndef PTG_PYCODE_BPF_H
#define PTG_PYCODE_BPF_H

#include "ptrace_gpu/fingerprint.h"

/*
 * code objects whose names were sent: (address, fingerprint, process). Two
 * processes forked from one another allocate alike: a code object of one
 * may have the address and fingerprint of another's.
 */
struct code_key {
	__u64 code;
	__u32 fingerprint;
	__u32 tgid;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct code_key);
	__type(value, __u8);
} seen_code SEC(".maps");

/*
 * A code object that is freed leaves its address to the next, whose
 * fingerprint can be the same: its name string may take the freed name's
 * address too (functions made one after another by exec() in a loop, same
 * file, same line). With code_frees (a probe on code_dealloc), a free
 * deletes the freed object's seen_code entry and moves code_epoch, which
 * makes every CPU's cached entry stale (pycache.bpf.h): the next object at
 * that address sends its names again.
 */
const volatile bool code_frees = false;
__u64 code_epoch = 0;

/* What names a code object: its qualname and filename strs and first line. */
struct code_id {
	__u64 name;
	__u64 file;
	__u32 line;
	__u32 fingerprint;
};

/*
 * One read for the three fields, into blk (PTG_PY_CODE_BLOCK_MAX bytes),
 * with units the first instructions too: a call's RESUME is among them. A
 * code object with fewer instructions may end before the block does: if
 * that makes the read fail, the fields are read alone. A failed read leaves
 * them 0, as each read of its own did. Returns the bytes read.
 */
static __always_inline __u32 read_code_id(__u64 code, struct code_id *id, __u64 *blk, bool units)
{
	__u32 n = off.code_block_size, all = off.code_block_units_size, start = off.code_block;

	if (n > PTG_PY_CODE_BLOCK_MAX || all > PTG_PY_CODE_BLOCK_MAX)
		n = all = 0; /* cannot be: user space checked it */
	if (!code)
		n = 0;
	else if (units && !bpf_probe_read_user(blk, all, (const void *)(code + start)))
		n = all;
	else if (bpf_probe_read_user(blk, n, (const void *)(code + start)))
		n = 0;
	if (!n) {
		id->name = id->file = 0;
		id->line = 0;
	} else {
		id->name = blk_u64(blk, PTG_PY_CODE_BLOCK_MAX, off.code_qualname - start);
		id->file = blk_u64(blk, PTG_PY_CODE_BLOCK_MAX, off.code_filename - start);
		id->line = blk_u32(blk, PTG_PY_CODE_BLOCK_MAX, off.code_firstlineno - start);
	}
	id->fingerprint = ptg_code_fingerprint(id->name, id->file, id->line);
	return n;
}

/* Copies a compact str's characters; width 0 when it cannot. */
static __always_inline void read_str(__u64 str, __u8 *dst, __u32 max, __u8 *width, __u16 *chars)
{
	__u32 state = 0, w;
	__s64 len = 0;
	__u64 n;

	*width = 0;
	*chars = 0;
	if (!str ||
	    bpf_probe_read_user(&len, sizeof(len), (const void *)(str + off.unicode_length)) ||
	    bpf_probe_read_user(&state, sizeof(state), (const void *)(str + off.unicode_state)))
		return;
	/* state bits: interned:2, kind:3, compact:1, ascii:1 */
	if (!(state & (1 << 5)) || len < 0)
		return;
	w = state & (1 << 6) ? 1 : (state >> 2) & 7;
	if (w != 1 && w != 2 && w != 4)
		return;
	n = (__u64)len * w;
	if (n > max)
		n = max; /* chars = n / w drops a cut character */
	if (bpf_probe_read_user(
		dst, n,
		(const void *)(str + (w == 1 && (state & (1 << 6)) ? off.unicode_ascii_data
								   : off.unicode_compact_data))))
		return;
	*width = w;
	*chars = n / w;
}

/*
 * Sends the names of a code object the first time it is seen: user space
 * could read them later from /proc/PID/mem, but not once the process is gone.
 * 0 once user space has them (sent now or before). A global function: the
 * verifier checks it once, on its own, instead of in every path of every
 * caller.
 */
__noinline int send_code(__u64 code, __u32 fingerprint, __u64 name, __u64 file, __u32 line)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct code_key key = {.code = code, .fingerprint = fingerprint, .tgid = id >> 32};
	struct ptg_code_event *c;
	__u8 one = 1;

	if (!code)
		return -1;
	if (bpf_map_lookup_elem(&seen_code, &key))
		return 0;
	c = bpf_ringbuf_reserve(&events, sizeof(*c), 0);
	if (!c) {
		count_loss(PTG_LOSS_PY_CODE);
		return -1;
	}
	c->hdr.ts = bpf_ktime_get_ns();
	c->hdr.pid = id >> 32;
	c->hdr.tid = (__u32)id;
	c->hdr.kind = PTG_EV_PY_CODE;
	c->hdr.cpu = bpf_get_smp_processor_id();
	c->hdr.aux = fingerprint;
	c->hdr.a = code;
	c->hdr.b = line;
	c->hdr.c = 0;
	c->hdr.d = 0;
	c->pad = 0;
	read_str(name, c->name, PTG_CODE_NAME_BYTES, &c->name_width, &c->name_chars);
	read_str(file, c->file, PTG_CODE_FILE_BYTES, &c->file_width, &c->file_chars);
	/* rare, and what follows needs it resolved: wake the loader now */
	bpf_ringbuf_submit(c, BPF_RB_FORCE_WAKEUP);
	bpf_map_update_elem(&seen_code, &key, &one, BPF_ANY);
	return 0;
}

/*
 * code_dealloc(PyCodeObject *co): co is about to be freed, still whole.
 * Its names must be sent again for whatever takes its address (code_frees).
 * A global function, like send_code: verified once, on its own stack.
 */
__noinline int code_freed(__u64 code)
{
	struct code_key key = {};
	struct cpu_cache *cc;
	struct code_id id;
	struct scratch *s;
	__u32 zero = 0;

	if (!code)
		return 0;
	__sync_fetch_and_add(&code_epoch, 1);
	cc = bpf_map_lookup_elem(&cpu_cache, &zero);
	s = cc ? scratch_get(cc) : 0;
	if (!s) {
		/* its entry stays: a successor with its fingerprint would go unnamed */
		count_loss(PTG_LOSS_PY_CODE);
		return 0;
	}
	read_code_id(code, &id, s->code, false);
	scratch_put(s);
	key.code = code;
	key.fingerprint = id.fingerprint;
	key.tgid = bpf_get_current_pid_tgid() >> 32;
	bpf_map_delete_elem(&seen_code, &key);
	return 0;
}

#endif /* PTG_PYCODE_BPF_H */
