// SPDX-License-Identifier: MIT
/*
 * Bringing the CUPTI agent into one process: whether the libcuda it maps is
 * NVIDIA's driver, the injection and the handing over of its socket, and
 * the warnings that name the process. For one target (gpu/gpu.c) and for each
 * process of a set (cupti_set.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "gpu/cupti_int.h"
#include "inject/inject.h"
#include "proc/elf_file.h"
#include "ptg_cupti_proto.h"

#ifdef PTG_HAVE_CUPTI

void cupti_warn(const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	pr_warn("%s", msg ? msg : fmt);
	free(msg);
}

/* CUPTI reaches into NVIDIA's driver through this export: a stand-in libcuda lacks it. */
bool cupti_nvidia_driver(const char *path)
{
	struct elf_sym_info s;
	struct elf_file *ef;
	bool ret;

	if (elf_file__open(path, &ef))
		return false;
	ret = !elf_file__find_sym(ef, "cuGetExportTable", false, &s);
	elf_file__close(ef);
	return ret;
}

int cupti_inject(struct cupti *c, pid_t pid, uint64_t start_time)
{
	/* a socketpair the target makes: no name for others to connect to */
	struct inject_opts o = {
	    .entry = PTG_CUPTI_ATTACH_SYM, .start_time = start_time, .pass_socket = true};
	struct inject_result res;
	char err[PATH_MAX + 640], who[32] = "";
	int ret;

	/* in a set, the one process of several that gets none is named */
	if (c->is_set)
		snprintf(who, sizeof(who), " of pid %d", pid);
	/*
	 * the target gets the bytes of the fd we checked, in a memfd of its own
	 * (or a copy in its /tmp): our path may mean another file in its mount
	 * namespace, and /proc/OUR_PID/fd/N is closed to a target that is not
	 * root or in another pid namespace
	 */
	ret = inject_library_fd(pid, c->agent_fd, "libptg_cupti.so", &o, &res, err, sizeof(err));
	if (ret) {
		cupti_warn("no GPU activity%s: cannot load the CUPTI agent: %s", who, err);
		return ret;
	}
	if (res.entry_ret < 0) {
		close(res.sock);
		cupti_warn("no GPU activity: the CUPTI agent in pid %d did not start: %s", pid,
			   strerror(-res.entry_ret));
		return res.entry_ret;
	}
	if (res.entry_ret == 1) {
		close(res.sock);
		cupti_warn(
		    "no GPU activity: the CUPTI agent in pid %d is busy with another recording",
		    pid);
		return -EBUSY;
	}
	ret = cupti_adopt(c, res.sock);
	if (ret) {
		close(res.sock);
		cupti_warn("no GPU activity of pid %d: cannot take the CUPTI agent's socket: %s",
			   pid, strerror(-ret));
	}
	return ret;
}

void cupti_warn_no_connect(pid_t pid)
{
	cupti_warn("no GPU activity: the CUPTI agent in pid %d did not connect", pid);
}

#endif /* PTG_HAVE_CUPTI */
