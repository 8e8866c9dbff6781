/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The BPF cookie of a uprobe on a kernel without cookies (before 5.15),
 * for the legacy builds of the uprobe objects (CMakeLists.txt's
 * BPF_LEGACY): the loader attaches with none, and puts each site's cookie
 * in site_cookies under the probed file's inode and the site's offset in
 * it. The program gets there from the address it was hit at, through the
 * mapping of the current process that holds it: like a real cookie, that
 * serves every process that maps the file (a set, a fork) wherever it maps
 * it, with one entry per site.
 *
 * Included after the object's own maps: site_cookies is one more map at the
 * end, which the normal build's skeleton (whose maps are found by name)
 * leaves alone.
 */
#ifndef PTG_SITECOOKIE_BPF_H
#define PTG_SITECOOKIE_BPF_H

#include <bpf/bpf_core_read.h>

#include "task.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PTG_SITE_COOKIES_MAX);
	__type(key, struct ptg_site_key);
	__type(value, __u64);
} site_cookies SEC(".maps");

/* A process's mappings before 6.1's maple tree, in an rbtree by address. */
struct mm_struct___rb {
	struct rb_root mm_rb;
} __attribute__((preserve_access_index));

struct vm_area_struct___rb {
	unsigned long vm_start;
	unsigned long vm_end;
	struct rb_node vm_rb;
	unsigned long vm_pgoff;
	struct file *vm_file;
} __attribute__((preserve_access_index));

/* 2 log2(n + 1) bounds a red-black tree's height: 2^24 mappings */
#define PTG_VMA_TREE_DEPTH 48

/* The site addr as (inode, file offset), through the current process's mapping of it. */
static __always_inline int ptg_site_of(__u64 addr, struct ptg_site_key *key)
{
	struct task_struct *task = ptg_current_task();
	struct mm_struct___rb *mm = (void *)BPF_CORE_READ(task, mm);
	__u64 rb_off = bpf_core_field_offset(struct vm_area_struct___rb, vm_rb);
	struct vm_area_struct___rb *vma;
	struct rb_node *n;

	/* a kernel of cookies (and maple trees, 6.1) never runs this; it only loads it */
	if (!bpf_core_field_exists(mm->mm_rb))
		return -1;
	n = BPF_CORE_READ(mm, mm_rb.rb_node);
	for (int i = 0; i < PTG_VMA_TREE_DEPTH && n; i++) {
		vma = (void *)n - rb_off;
		if (addr < BPF_CORE_READ(vma, vm_start)) {
			n = BPF_CORE_READ(n, rb_left);
		} else if (addr >= BPF_CORE_READ(vma, vm_end)) {
			n = BPF_CORE_READ(n, rb_right);
		} else {
			key->ino = BPF_CORE_READ(vma, vm_file, f_inode, i_ino);
			key->off = addr - BPF_CORE_READ(vma, vm_start) +
				   (BPF_CORE_READ(vma, vm_pgoff) << 12);
			return 0;
		}
	}
	return -1;
}

/*
 * The cookie the loader gave the site this uprobe was hit at, in *cookie;
 * -1 when it gave none. The int3 has trapped, but handle_swbp() sets ip
 * back to the probed address before it calls the handlers (seen on 5.10).
 */
static __always_inline int ptg_site_cookie(struct pt_regs *ctx, __u64 *cookie)
{
	struct ptg_site_key key = {};
	__u64 *c;

	if (ptg_site_of(PT_REGS_IP(ctx), &key))
		return -1;
	c = bpf_map_lookup_elem(&site_cookies, &key);
	if (!c)
		return -1;
	*cookie = *c;
	return 0;
}

#endif /* PTG_SITECOOKIE_BPF_H */
