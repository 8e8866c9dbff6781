// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>

#include "base/fdlimit.h"

static struct rlimit original;
static bool raised;

/* fs.nr_open: the most any process may have open; 0 when it cannot be read. */
static rlim_t nr_open(void)
{
	unsigned long long v = 0;
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return (rlim_t)v;
}

void fdlimit_raise(void)
{
	struct rlimit want;
	rlim_t max = nr_open();

	if (getrlimit(RLIMIT_NOFILE, &original))
		return;
	raised = true;
	want = original;
	/* a privileged process may raise the hard limit too (CAP_SYS_RESOURCE) */
	if (max > want.rlim_max) {
		want.rlim_cur = want.rlim_max = max;
		if (!setrlimit(RLIMIT_NOFILE, &want))
			return;
		want = original;
	}
	want.rlim_cur = want.rlim_max;
	setrlimit(RLIMIT_NOFILE, &want);
}

void fdlimit_restore(void)
{
	if (raised)
		setrlimit(RLIMIT_NOFILE, &original);
}
