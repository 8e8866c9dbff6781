/* SPDX-License-Identifier: MIT */
/* record's command line (record_opts.c); the recording itself is user/record/. */
#ifndef PTG_CLI_RECORD_OPTS_H
#define PTG_CLI_RECORD_OPTS_H

#include "record/record.h"

/* record's options into o; 0, -EINVAL after a message, or exits for --help. */
int record_parse_opts(int argc, char **argv, struct record_opts *o);

#endif /* PTG_CLI_RECORD_OPTS_H */
