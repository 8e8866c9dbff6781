// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "elf_file.h"
#include "libwatch.h"
#include "libwatch.skel.h"
#include "u64map.h"

#define MAX_SUBSCRIBERS 8

/* offered ahead, before it was mapped (and offered again once mapped) */
#define SEEN_AHEAD  1
#define SEEN_MAPPED 2

struct subscriber {
	libwatch_fn fn;
	void *ctx;
};

struct libwatch {
	struct tracer *t;
	pid_t pid;
	struct libwatch_bpf *skel;
	struct bpf_link *link;
	uint64_t ld_inode; /* of the loader link is on */
	struct subscriber subs[MAX_SUBSCRIBERS];
	int nsubs;
	struct u64map seen; /* inode -> SEEN_* */
};

static int on_map(const struct proc_map *m, void *arg)
{
	struct libwatch *lw = arg;
	char path[PATH_MAX + 32];
	uint64_t bias, *seen;
	int err = 0;

	if (m->perms[2] != 'x' || m->path[0] != '/' || !m->inode)
		return 0;
	seen = u64map__get(&lw->seen, m->inode);
	if (seen && *seen == SEEN_MAPPED)
		return 0;
	if (u64map__put(&lw->seen, m->inode, SEEN_MAPPED))
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
	return e->aux == PTG_LIB_EXEC ? libwatch__exec(ctx) : scan(ctx);
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
	if (!err) {
		__u32 tgid = (__u32)pid;
		__u8 one = 1;

		if (bpf_map_update_elem(bpf_map__fd(lw->skel->maps.tgids), &tgid, &one, BPF_ANY))
			err = -errno;
	}
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

/*
 * Libraries a target maps late (PyTorch maps libcuda at its first CUDA call)
 * whose first calls matter: probed by path before they are mapped, since a
 * uprobe lives on the file and goes live as the file is mapped, while one
 * attached after the loader's notification misses the calls made meanwhile.
 */
static const char *const late_libs[] = { "libcuda.so.1", "libcudart.so.1[1-3]*",
					  "libtorch_cpu.so*" };

/* The loader's own directories, searched after LD_LIBRARY_PATH. */
static const char *const default_dirs[] = { "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
					    "/lib64", "/usr/lib64", "/lib", "/usr/lib" };

#define MAX_DIRS 32

struct search_path {
	char env[4096]; /* LD_LIBRARY_PATH, split in place */
	const char *dirs[MAX_DIRS];
	int n;
};

/* The target's LD_LIBRARY_PATH, as its loader read it at exec. */
static void read_ld_library_path(pid_t pid, struct search_path *sp)
{
	char path[64], buf[65536];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i += strlen(buf + i) + 1) {
		if (!strncmp(buf + i, "LD_LIBRARY_PATH=", 16)) {
			snprintf(sp->env, sizeof(sp->env), "%s", buf + i + 16);
			break;
		}
	}
	for (char *save, *d = strtok_r(sp->env, ":", &save); d && sp->n < MAX_DIRS;
	     d = strtok_r(NULL, ":", &save)) {
		/* relative entries depend on the target's working directory: not guessed */
		if (d[0] == '/')
			sp->dirs[sp->n++] = d;
	}
}

/*
 * Offers subscribers the file dir/name of the target's root, when it is a
 * regular file not offered yet. 1 when it is a regular file, 0 when not.
 */
static int offer_ahead(struct libwatch *lw, const char *dir, const char *name, int *err)
{
	struct proc_map m = { .perms = "r-xp" };
	char path[PATH_MAX + 32];
	struct stat st;

	snprintf(m.path, sizeof(m.path), "%s/%s", dir, name);
	snprintf(path, sizeof(path), "/proc/%d/root%s", lw->pid, m.path);
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return 0;
	m.inode = st.st_ino;
	if (u64map__get(&lw->seen, m.inode))
		return 1;
	if (u64map__put(&lw->seen, m.inode, SEEN_AHEAD)) {
		*err = -ENOMEM;
		return 1;
	}
	for (int j = 0; !*err && j < lw->nsubs; j++)
		*err = lw->subs[j].fn(lw->subs[j].ctx, &m, path, 0);
	return 1;
}

/*
 * The files matching pattern in the first folder of the search path that
 * has any, as the loader takes the first it finds (versions of one library
 * in one folder are usually links to one file). 0 or -errno.
 */
static int probe_pattern(struct libwatch *lw, const struct search_path *sp, const char *pattern)
{
	int ndefault = sizeof(default_dirs) / sizeof(default_dirs[0]), err = 0, found = 0;
	char path[PATH_MAX + 32];

	for (int i = 0; !found && !err && i < sp->n + ndefault; i++) {
		const char *dir = i < sp->n ? sp->dirs[i] : default_dirs[i - sp->n];
		struct dirent *de;
		DIR *d;

		if (!strpbrk(pattern, "*?[")) {
			found = offer_ahead(lw, dir, pattern, &err);
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/root%s", lw->pid, dir);
		d = opendir(path);
		while (d && !err && (de = readdir(d))) {
			if (!fnmatch(pattern, de->d_name, 0))
				found |= offer_ahead(lw, dir, de->d_name, &err);
		}
		if (d)
			closedir(d);
	}
	return err;
}

/*
 * Offers subscribers the late libraries the target would load, before it
 * maps them; bias 0 since nothing is mapped yet (subscribers that attach by
 * file offset need none). Each is offered again once mapped, for those that
 * need it mapped (CUPTI): the others remember what they probed.
 */
static int probe_ahead(struct libwatch *lw)
{
	struct search_path sp = {};
	int err = 0;

	read_ld_library_path(lw->pid, &sp);
	for (size_t i = 0; !err && i < sizeof(late_libs) / sizeof(late_libs[0]); i++)
		err = probe_pattern(lw, &sp, late_libs[i]);
	return err;
}

/* The probe on the target's dynamic loader, unless it is on that file already. */
static int attach_ld(struct libwatch *lw)
{
	struct find_ld ld = {};
	char path[PATH_MAX + 32];
	int err;

	/* a static executable has no dynamic loader, and then maps nothing later */
	if (proc_maps__for_each(lw->pid, find_ld, &ld) != 1 ||
	    (lw->link && ld.inode == lw->ld_inode))
		return 0;
	bpf_link__destroy(lw->link);
	proc_target_path(lw->pid, ld.path, ld.inode, path, sizeof(path));
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "_dl_debug_state");
	lw->link = bpf_program__attach_uprobe_opts(lw->skel->progs.dl_debug_state, lw->pid, path,
						   0, &opts);
	if (!lw->link) {
		err = -errno;
		fprintf(stderr, "libwatch: cannot attach to %s: %s\n", ld.path, strerror(-err));
		return err;
	}
	lw->ld_inode = ld.inode;
	return 0;
}

int libwatch__attach(struct libwatch *lw)
{
	int err;

	lw->skel->links.lib_exec = bpf_program__attach(lw->skel->progs.lib_exec);
	if (!lw->skel->links.lib_exec) {
		err = -errno;
		fprintf(stderr, "libwatch: cannot attach to sched_process_exec: %s\n",
			strerror(-err));
		return err;
	}
	err = probe_ahead(lw);
	err = err ?: attach_ld(lw);
	return err ?: scan(lw);
}

int libwatch__exec(struct libwatch *lw)
{
	int err = probe_ahead(lw);

	err = err ?: attach_ld(lw);
	err = err ?: scan(lw);
	/* gone already: exited right after its exec */
	return err == -ENOENT || err == -ESRCH ? 0 : err;
}

void libwatch__detach(struct libwatch *lw)
{
	bpf_link__destroy(lw->link);
	lw->link = NULL;
	bpf_link__destroy(lw->skel->links.lib_exec);
	lw->skel->links.lib_exec = NULL;
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
