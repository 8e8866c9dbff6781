// SPDX-License-Identifier: MIT
/*
 * Opening a target's objects as mapped (proc/procopen.c), on our own
 * mappings: a FIFO or a link where the path points is refused without an
 * open that could block, a file with another inode is refused, a deleted
 * one is read through map_files (root) or refused (others), and the maps
 * line's device is what fstat says. Runs as any user.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "proc/procfs.h"
#include "proc/procopen.h"
#include "test.h"

struct find {
	uint64_t start;
	struct proc_map m;
	bool found;
};

static int find_start(const struct proc_map *m, void *ctx)
{
	struct find *f = ctx;

	if (m->start != f->start)
		return 0;
	f->m = *m;
	f->found = true;
	return 1;
}

static struct proc_map mapping_at(void *addr)
{
	struct find f = {.start = (uint64_t)(uintptr_t)addr};

	proc_maps__for_each(getpid(), find_start, &f);
	ASSERT_TRUE(f.found, "our mapping in maps");
	return f.m;
}

/* A map entry naming path with the inode and device it has, unmapped (no map_files). */
static struct proc_map by_path(const char *path, const char *as)
{
	struct proc_map m = {};
	struct stat st;

	if (stat(path, &st))
		memset(&st, 0, sizeof(st));
	m.inode = st.st_ino;
	m.dev = st.st_dev;
	snprintf(m.path, sizeof(m.path), "%s", as);
	return m;
}

int main(void)
{
	char dir[] = "/tmp/ptg-procopen-XXXXXX", lib[128], fifo[128], link[128], gone[160];
	char kept1[64], kept2[64];
	struct proc_map m, bad;
	struct stat st;
	void *addr;
	int fd;

	ASSERT_TRUE(mkdtemp(dir) != NULL, "temp dir");
	snprintf(lib, sizeof(lib), "%s/libx.so", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	fd = open(lib, O_RDWR | O_CREAT | O_EXCL, 0644);
	ASSERT_TRUE(fd >= 0 && !ftruncate(fd, 4096), "a 4 KiB file");
	addr = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	ASSERT_TRUE(addr != MAP_FAILED, "mapped");
	fstat(fd, &st);
	close(fd);

	m = mapping_at(addr);
	ASSERT_EQ(m.dev, st.st_dev, "maps' MAJOR:MINOR is st_dev");
	fd = proc_map_open(getpid(), &m);
	ASSERT_TRUE(fd >= 0, "the mapped file opens");
	if (fd >= 0) {
		struct stat got;

		ASSERT_TRUE(!fstat(fd, &got) && got.st_ino == st.st_ino, "and is that file");
		ASSERT_EQ(proc_keep_fd(fd, kept1, sizeof(kept1)), 0, "kept");
		ASSERT_EQ(proc_map_path(getpid(), &m, kept2, sizeof(kept2)), 0, "kept again");
		ASSERT_STREQ(kept2, kept1, "one fd per file");
	}
	bad = m;
	bad.inode++;
	ASSERT_EQ(proc_map_open(getpid(), &bad), -ESTALE, "another inode: refused");

	/* by path (no mapping): a FIFO is refused, not opened (it would block) */
	ASSERT_EQ(mkfifo(fifo, 0600), 0, "a FIFO");
	bad = by_path(fifo, fifo);
	ASSERT_EQ(proc_map_open(getpid(), &bad), -EPERM, "a FIFO: refused at once");
	ASSERT_EQ(proc_root_open(getpid(), fifo, true, false), -EPERM, "in the root too");
	/* a link to the very file: the kernel's paths have none, so refused */
	ASSERT_EQ(symlink(lib, link), 0, "a link");
	bad = by_path(lib, link);
	ASSERT_EQ(proc_map_open(getpid(), &bad), -EPERM, "a link: refused");
	fd = proc_root_open(getpid(), link, true, false);
	ASSERT_TRUE(fd >= 0, "a link inside the root, where following is asked for");
	if (fd >= 0)
		close(fd);

	/* deleted, and a FIFO where maps points: map_files (root) or a refusal */
	ASSERT_EQ(unlink(lib), 0, "deleted");
	snprintf(gone, sizeof(gone), "%s (deleted)", lib);
	ASSERT_EQ(mkfifo(gone, 0600), 0, "a FIFO at the deleted name");
	m = mapping_at(addr);
	ASSERT_STREQ(m.path, gone, "maps names it deleted");
	fd = proc_map_open(getpid(), &m);
	if (geteuid() == 0) {
		ASSERT_TRUE(fd >= 0, "root: through map_files");
	} else {
		ASSERT_EQ(fd, -ESTALE, "no map_files: refused");
	}
	if (fd >= 0)
		close(fd);
	ASSERT_TRUE(proc_open_refusals() >= 3, "refusals counted");

	munmap(addr, 4096);
	unlink(gone);
	unlink(fifo);
	unlink(link);
	rmdir(dir);
	printf("%d passed, %d failed\n", test_checks - test_failures, test_failures);
	return test_failures ? 1 : 0;
}
