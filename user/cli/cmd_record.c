// SPDX-License-Identifier: MIT
/*
 * ptrace-gpu record: attach to a process (-p) or start one (-- CMD), write a
 * trace. The options are read in user/cli/record_opts.c; the recording is
 * user/record/session.c.
 */
#include "cli/commands.h"
#include "cli/record_opts.h"
#include "record/record.h"

int cmd_record(int argc, char **argv)
{
	struct record_opts o;
	int status = 0;

	if (record_parse_opts(argc, argv, &o))
		return 2;
	/* 1 when recording failed, said by the recorder; else -- CMD's own status */
	return record_run(&o, &status) ? 1 : status;
}
