// SPDX-License-Identifier: MIT
/*
 * The library handed to the target in a memfd of its own. A copy in the
 * target's /tmp (user/base/trusted.c) is safe against other users, but in a
 * container the directory belongs to the container's root, who can rename
 * ours away between our write and the target's dlopen, and a container may
 * have no /tmp that qualifies. A memfd has no path anyone could plant: the
 * target makes it (memfd_create through the borrowed thread), we write into
 * it through a duplicate of that very descriptor (pidfd_getfd, never by a
 * path of the target's), seal it, and the target opens it as
 * /proc/self/fd/N: its own descriptor, whatever pid namespace it is in,
 * which the /proc/<ptrace-gpu>/fd/N of a memfd of ours is not.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/trusted.h"
#include "base/u64map.h"
#include "inject/inject.h"
#include "inject/inject_int.h"
#include "proc/procfs.h"

#define MFD_CLOEXEC_	   0x1u
#define MFD_ALLOW_SEALING_ 0x2u
#define MFD_EXEC_	   0x10u /* Linux 6.3: executable even under vm.memfd_noexec=1 */
#define PROC_SUPER_MAGIC_  0x9fa0
#define TMPFS_MAGIC_	   0x01021994
#define MAX_LIB_SIZE	   (256u << 20)

#ifdef __x86_64__

/*
 * Another thread of the target may have put something else at that fd
 * number meanwhile: only an empty, unlinked, unsealed shmem file (what
 * memfd_create makes; a tmpfs file has F_SEAL_SEAL) is written. Written
 * through the target's own open file, nothing gets more access than the
 * target had.
 */
static int fill(struct target *t, const struct inject_src *src)
{
	struct statfs sfs;
	struct stat st;
	size_t off = 0;
	ssize_t n;
	int fd, err = 0;

	fd = inject_target_fd(t, t->tfd);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || fstatfs(fd, &sfs) || !S_ISREG(st.st_mode) || st.st_size ||
	    st.st_nlink || sfs.f_type != TMPFS_MAGIC_ || fcntl(fd, F_GET_SEALS) != 0)
		err = inject_fail(t, -EPERM, "fd %d of pid %d is not the empty memfd it made",
				  t->tfd, t->pid);
	while (!err && off < src->len) {
		n = pwrite(fd, src->bytes + off, src->len - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			err = inject_fail(t, n < 0 ? -errno : -EIO,
					  "cannot write the library into a memfd of pid %d: %s",
					  t->pid, n < 0 ? strerror(errno) : "short write");
		else
			off += (size_t)n;
	}
	/* from here on the bytes the target maps are the ones we read: nobody can change them */
	if (!err &&
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE))
		err = inject_fail(t, -errno, "cannot seal the memfd in pid %d: %s", t->pid,
				  strerror(errno));
	close(fd);
	return err;
}

static int memfd_place(struct target *t, struct inject_src *src)
{
	char path[INJECT_FD_PATH_MAX];
	struct user_regs_struct r;
	uint64_t ret = 0;
	unsigned int flags = MFD_CLOEXEC_ | MFD_ALLOW_SEALING_ | MFD_EXEC_;
	int err;

	for (;;) {
		err = inject_syscall(t, SYS_memfd_create, t->str_a, flags, 0, &ret);
		err = err ?: inject_run_to(t, PARKED, &r);
		if (err)
			return err;
		if ((int64_t)ret != -EINVAL || !(flags & MFD_EXEC_))
			break;
		flags &= ~MFD_EXEC_; /* a kernel before 6.3: memfds are executable anyway */
	}
	if ((int64_t)ret < 0 || ret > INT32_MAX) {
		src->fallback = true;
		return inject_fail(t, (int64_t)ret < 0 ? (int)ret : -EBADF,
				   "memfd_create in pid %d failed: %s", t->pid,
				   strerror((int64_t)ret < 0 ? -(int)ret : EBADF));
	}
	t->tfd = (int)ret; /* closed after dlopen, or by unpark() */
	err = fill(t, src);
	if (err) {
		src->fallback = true;
		return err;
	}
	/* over the name at str_a, whose room is INJECT_FD_PATH_MAX (load) */
	strcpy(path, "/proc/self/fd/");
	for (int i = 0; i < INJECT_PATH_BITS; i++)
		strcat(path, src->hash >> i & 1 ? "../fd/" : "./");
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "%d", t->tfd);
	return inject_mem_write(t, t->str_a, path, strlen(path) + 1);
}

struct find_ctx {
	char want[sizeof("/memfd:") + sizeof(((struct inject_src *)0)->memfd_name) +
		  sizeof(" (deleted)")];
	uint64_t bias; /* the start of the mapping of offset 0 */
	bool at_bias;  /* memfd_check_loaded: only the mapping at this bias counts */
	bool found;
};

static int find_map(const struct proc_map *m, void *ctx)
{
	struct find_ctx *f = ctx;

	if (m->offset || strcmp(m->path, f->want) || (f->at_bias && m->start != f->bias))
		return 0;
	f->bias = m->start;
	f->found = true;
	return 1;
}

static void want_name(struct find_ctx *f, const struct inject_src *src)
{
	snprintf(f->want, sizeof(f->want), "/memfd:%s (deleted)", src->memfd_name);
}

/*
 * dlopen() resolved /proc/self/fd/N in the target's mount namespace, where
 * its root may have put anything at /proc: the object now at the handle's
 * bias must be our memfd (or an earlier one of the same bytes, which a
 * second dlopen of the same path finds) before anything of it is called.
 */
static int memfd_check_loaded(struct target *t, const struct inject_src *src, uint64_t bias)
{
	struct find_ctx f = {.bias = bias, .at_bias = true};

	want_name(&f, src);
	if (proc_maps__for_each(t->pid, find_map, &f) < 0 || !f.found)
		return inject_fail(t, -EPERM,
				   "the dlopen of /proc/self/fd/N in pid %d loaded something other "
				   "than our memfd (is its /proc the kernel's?)",
				   t->pid);
	return 0;
}

/* Whether pid's / has procfs at /proc, its own links not followed. */
static bool procfs_at_proc(pid_t pid)
{
	struct open_how how = {
	    .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char rootp[64];
	struct statfs sfs;
	int root, fd;
	bool ok;

	snprintf(rootp, sizeof(rootp), "/proc/%d/root", pid);
	root = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return false;
	fd = (int)syscall(SYS_openat2, root, "proc", &how, sizeof(how));
	close(root);
	if (fd < 0)
		return false;
	ok = !fstatfs(fd, &sfs) && sfs.f_type == PROC_SUPER_MAGIC_;
	close(fd);
	return ok;
}

static const struct inject_memfd_ops memfd_ops = {
    .place = memfd_place,
    .check_loaded = memfd_check_loaded,
};

/* The bytes of fd, mapped, and the memfd's name from their hash. */
static int map_src(int fd, const char *name, struct inject_src *src, char *err, size_t errlen)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !st.st_size ||
	    (uint64_t)st.st_size > MAX_LIB_SIZE) {
		snprintf(err, errlen,
			 "the library to load is not a regular file of 1 byte to %u MiB",
			 MAX_LIB_SIZE >> 20);
		return -EINVAL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "cannot map the library: %s", strerror(errno));
		return -errno;
	}
	*src = (struct inject_src){
	    .fd = fd, .memfd = &memfd_ops, .bytes = p, .len = (size_t)st.st_size};
	src->hash = u64map_hash(U64MAP_HASH_SEED, p, src->len);
	/* named by content: a second load into the same process finds it mapped */
	snprintf(src->memfd_name, sizeof(src->memfd_name), "ptg-%016llx.%.64s",
		 (unsigned long long)src->hash, name);
	return 0;
}

static int via_copy(pid_t pid, int fd, const char *name, const struct inject_opts *opts,
		    struct inject_result *res, char *err, size_t errlen)
{
	struct inject_src src = {.fd = fd};
	struct lib_copy *lc;
	int ret;

	ret = lib_copy__new(fd, pid, name, &lc, err, errlen);
	if (ret)
		return ret;
	src.path = lib_copy__path(lc);
	ret = inject_run(pid, &src, opts, res, err, errlen);
	/* mapped now, or not at all: the copy is no longer needed */
	lib_copy__free(lc);
	res->via_copy = true;
	return ret;
}

int inject_library_fd(pid_t pid, int fd, const char *name, const struct inject_opts *opts,
		      struct inject_result *res, char *err, size_t errlen)
{
	struct inject_src src;
	struct find_ctx f = {};
	char first[512] = "";
	int ret;

	*res = (struct inject_result){.sock = -1};
	ret = map_src(fd, name, &src, err, errlen);
	if (ret)
		return ret;
	if (procfs_at_proc(pid)) {
		want_name(&f, &src);
		if (proc_maps__for_each(pid, find_map, &f) >= 0 && f.found)
			src.loaded_bias = f.bias;
		ret = inject_run(pid, &src, opts, res, err, errlen);
		if (!ret || !src.fallback)
			goto out;
		snprintf(first, sizeof(first), "%s", err);
	}
	ret = via_copy(pid, fd, name, opts, res, err, errlen);
	if (ret && first[0]) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " (after the memfd failed: %s)", first);
	}
out:
	munmap((void *)src.bytes, src.len);
	return ret;
}

#else /* !__x86_64__ */

int inject_library_fd(pid_t pid, int fd, const char *name, const struct inject_opts *opts,
		      struct inject_result *res, char *err, size_t errlen)
{
	*res = (struct inject_result){.sock = -1};
	snprintf(err, errlen, "injection is implemented for x86-64 only");
	return -ENOTSUP;
}

#endif
