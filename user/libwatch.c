// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "elf_file.h"
#include "libwatch.h"
#include "libwatch.skel.h"
#include "u64map.h"

#define MAX_SUBSCRIBERS 8

struct subscriber {
	libwatch_fn fn;
	void *ctx;
};

struct libwatch {
	struct tracer *t;
	pid_t pid;
	struct libwatch_bpf *skel;
	struct bpf_link *link;
	struct subscriber subs[MAX_SUBSCRIBERS];
	int nsubs;
	struct u64map seen; /* inode -> 1 */
};

static int on_map(const struct proc_map *m, void *arg)
{
	struct libwatch *lw = arg;
	char path[PATH_MAX + 32];
	uint64_t bias;
	int err = 0;

	if (m->perms[2] != 'x' || m->path[0] != '/' || !m->inode || u64map__get(&lw->seen, m->inode))
		return 0;
	if (u64map__put(&lw->seen, m->inode, 1))
		return -ENOMEM;
	proc_target_path(lw->pid, m->path, m->inode, path, sizeof(path));
	if (elf_load_bias(path, m->start, m->offset, &bias))
		return 0; /* not an ELF object we can read: nothing to probe there */
	for (int i = 0; !err && i < lw->nsubs; i++)
		err = lw->subs[i].fn(lw->subs[i].ctx, m, path, bias);
	return err;
}

static int scan(struct libwatch *lw)
{
	int err = proc_maps__for_each(lw->pid, on_map, lw);

	/* the process may be gone by the time its last loader event is read */
	return err == -ENOENT || err == -ESRCH ? 0 : err;
}

static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	return scan(ctx);
}

static int write_losses(struct tracer *t, void *ctx)
{
	struct libwatch *lw = ctx;

	if (!lw->skel->bss->lost)
		return 0;
	return trace_writer__loss(tracer__writer(t), "lib_event", UINT32_MAX, lw->skel->bss->lost);
}

int libwatch__open(struct tracer *t, pid_t pid, struct libwatch **out)
{
	struct libwatch *lw;
	int err;

	lw = calloc(1, sizeof(*lw));
	if (!lw)
		return -ENOMEM;
	lw->t = t;
	lw->pid = pid;
	lw->skel = libwatch_bpf__open();
	if (!lw->skel) {
		err = -errno;
		goto cleanup;
	}
	err = bpf_map__reuse_fd(lw->skel->maps.events, tracer__ringbuf_fd(t));
	err = err ?: libwatch_bpf__load(lw->skel);
	err = err ?: tracer__on(t, PTG_EV_LIB_CHANGE, PTG_EV_LIB_CHANGE, handle_event,
				write_losses, lw);
	if (err)
		goto cleanup;
	*out = lw;
	return 0;
cleanup:
	fprintf(stderr, "libwatch: cannot load the loader probe: %s\n", strerror(-err));
	libwatch__destroy(lw);
	return err;
}

int libwatch__subscribe(struct libwatch *lw, libwatch_fn fn, void *ctx)
{
	if (lw->nsubs == MAX_SUBSCRIBERS)
		return -E2BIG;
	lw->subs[lw->nsubs++] = (struct subscriber){ .fn = fn, .ctx = ctx };
	return 0;
}

struct find_ld {
	char path[PATH_MAX];
	uint64_t inode;
};

static int find_ld(const struct proc_map *m, void *arg)
{
	struct find_ld *f = arg;
	const char *base = strrchr(m->path, '/');

	if (!base || strncmp(base + 1, "ld-linux", 8))
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", m->path);
	f->inode = m->inode;
	return 1;
}

int libwatch__attach(struct libwatch *lw)
{
	struct find_ld ld = {};
	char path[PATH_MAX + 32];
	int err;

	/* a static executable has no dynamic loader, and then maps nothing later */
	if (proc_maps__for_each(lw->pid, find_ld, &ld) == 1) {
		proc_target_path(lw->pid, ld.path, ld.inode, path, sizeof(path));
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "_dl_debug_state");
		lw->link = bpf_program__attach_uprobe_opts(lw->skel->progs.dl_debug_state,
							   lw->pid, path, 0, &opts);
		if (!lw->link) {
			err = -errno;
			fprintf(stderr, "libwatch: cannot attach to %s: %s\n", ld.path,
				strerror(-err));
			return err;
		}
	}
	return scan(lw);
}

void libwatch__detach(struct libwatch *lw)
{
	bpf_link__destroy(lw->link);
	lw->link = NULL;
}

void libwatch__destroy(struct libwatch *lw)
{
	if (!lw)
		return;
	libwatch__detach(lw);
	libwatch_bpf__destroy(lw->skel);
	u64map__free(&lw->seen);
	free(lw);
}
