// SPDX-License-Identifier: MIT
#include <errno.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ptrace_gpu/events.h"
#include "tracer/sitecookie.h"

int sitecookie_map(struct bpf_object *obj)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, "site_cookies");
	int fd = m ? bpf_map__fd(m) : -ENOENT;

	return fd < 0 ? -ENOENT : fd;
}

int sitecookie_put(int fd, uint64_t ino, uint64_t off, uint64_t cookie)
{
	struct ptg_site_key key = {.ino = ino, .off = off};

	return bpf_map_update_elem(fd, &key, &cookie, BPF_ANY) ? -errno : 0;
}
