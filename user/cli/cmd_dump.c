// SPDX-License-Identifier: MIT
/* ptrace-gpu dump: every record of a trace as one line of text, like perf script. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cli/commands.h"
#include "trace/trace.h"
#include "trace/trace_open.h"

static const char *const kind_names[PTG_REC_NR_KINDS] = {
    [PTG_REC_PY_ENTER] = "py_enter", [PTG_REC_PY_EXIT] = "py_exit",
    [PTG_REC_OP_ENTER] = "op_enter", [PTG_REC_OP_EXIT] = "op_exit",
    [PTG_REC_SPAN] = "span",	     [PTG_REC_CUDA_CALL] = "cuda_call",
    [PTG_REC_GPU_KERNEL] = "kernel", [PTG_REC_GPU_MEMCPY] = "memcpy",
    [PTG_REC_GPU_MEMSET] = "memset", [PTG_REC_GPU_SYNC] = "gpu_sync",
    [PTG_REC_SCHED] = "sched",	     [PTG_REC_SAMPLE] = "sample",
    [PTG_REC_THREAD] = "thread",     [PTG_REC_FLOW] = "flow",
    [PTG_REC_EVENT] = "event",
};

static void print_sym(const struct trace_reader *r, uint32_t id)
{
	const struct ptg_sym *s = trace_reader__sym(r, id);

	if (!s)
		return;
	printf(" %s", s->name);
	if (s->file && s->file[0])
		printf(" (%s:%u)", s->file, s->line);
}

/* One line per value: a command line may hold newlines (python -c "...") */
static void print_escaped(const char *s)
{
	for (; *s; s++) {
		if (*s == '\n')
			fputs("\\n", stdout);
		else if (*s == '\\')
			fputs("\\\\", stdout);
		else
			putchar(*s);
	}
}

static void print_record(const struct trace_reader *r, const struct ptg_record *rec)
{
	const char *kind = rec->kind < PTG_REC_NR_KINDS ? kind_names[rec->kind] : NULL;

	printf("%" PRIu64 " %u/%u %s flags=%#x", rec->ts, rec->pid, rec->tid, kind ? kind : "?",
	       rec->flags);
	if (rec->dur)
		printf(" dur=%" PRIu64, rec->dur);
	if (rec->stream)
		printf(" stream=%" PRIu64, rec->stream);
	if (rec->corr)
		printf(" corr=%" PRIu64, rec->corr);
	if (rec->ext)
		printf(" ext=%" PRIu64, rec->ext);
	for (int i = 0; i < 4; i++) {
		/* a recorded thread's pid and tid in its container (docs/trace-format.md) */
		if (rec->aux[i] && rec->kind == PTG_REC_THREAD && i >= 2)
			printf(" container_%s=%" PRId64, i == 2 ? "pid" : "tid", rec->aux[i]);
		else if (rec->aux[i])
			printf(" aux%d=%" PRId64, i, rec->aux[i]);
	}
	print_sym(r, rec->sym);
	if (trace_reader__args(r, NULL)) {
		fputs(" args=", stdout);
		print_escaped(trace_reader__args(r, NULL));
	}
	putchar('\n');
}

static void print_header(const struct trace_reader *r)
{
	const char *key, *value;
	const struct ptg_loss *l;
	size_t n;

	for (size_t i = 0; trace_reader__meta_at(r, i, &key, &value); i++) {
		printf("# %s: ", key);
		print_escaped(value);
		putchar('\n');
	}
	l = trace_reader__losses(r, &n);
	for (size_t i = 0; i < n; i++)
		printf("# lost %s cpu=%d: %" PRIu64 "\n", ptg_loss_name(&l[i]),
		       l[i].cpu == UINT32_MAX ? -1 : (int)l[i].cpu, l[i].count);
}

int cmd_dump(int argc, char **argv)
{
	struct trace_reader *r = NULL;
	struct ptg_record rec;
	int ret;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf(
		    "usage: ptrace-gpu dump FILE\n\n"
		    "Prints the trace's metadata and loss counters as '# ' lines, then one line\n"
		    "per record: timestamp (ns), pid/tid, kind, flags, fields, symbol, args.\n"
		    "A thread record of a process in a container has its pid and tid there as\n"
		    "container_pid= and container_tid=.\n");
		return 0;
	}
	if (argc != 2 || (argv[1][0] == '-' && argv[1][1])) {
		pr_usage("dump", "expected one trace FILE");
		return 2;
	}
	if (trace_open("ptrace-gpu", argv[1], &r))
		return 1;
	print_header(r);
	while ((ret = trace_reader__next(r, &rec)) == 1)
		print_record(r, &rec);
	if (ret < 0)
		pr_err("%s: %s", argv[1], trace_reader__error(r));
	trace_reader__close(r);
	return ret < 0 ? 1 : 0;
}
