// SPDX-License-Identifier: MIT
/* ptrace-gpu import: a torch.profiler / Kineto Chrome trace -> .ptg. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/outfile.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "import/kineto.h"

static void import_usage(FILE *f)
{
	fprintf(f, "usage: ptrace-gpu import TRACE.json[.gz] [-o OUT.ptg]\n\n"
		   "Converts a Chrome trace written by torch.profiler / Kineto into a .ptg trace,\n"
		   "so that every report works on it. OUT defaults to TRACE without .json[.gz],\n"
		   "plus .ptg: a new file, mode 0600, that replaces OUT once complete; when the\n"
		   "import fails, OUT is left as it was.\n\n"
		   "The JSON is parsed as it is read. Refused: a JSON value (string, number)\n"
		   "over 16 MiB, and input that inflates past 64 MiB and 200 times the file's\n"
		   "size (a gzip bomb). Skipped events are counted per category, the first 64\n"
		   "categories by name, the rest as (other).\n");
}

/* "a/b.json.gz" -> "a/b.ptg" */
static char *default_out(const char *in)
{
	static const char *const exts[] = {".json.gz", ".json", ".gz"};
	size_t len = strlen(in), i, el;
	char *out = malloc(len + 5);

	if (!out)
		return NULL;
	strcpy(out, in);
	for (i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		el = strlen(exts[i]);
		if (len > el && !strcmp(in + len - el, exts[i])) {
			out[len - el] = '\0';
			break;
		}
	}
	strcat(out, ".ptg");
	return out;
}

int cmd_import(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct kineto_stats st = {};
	char *out = NULL;
	int c, err;

	optind = 1;
	while ((c = cli_getopt(argc, argv, "import", "o:h", opts)) != -1) {
		switch (c) {
		case 'o':
			free(out);
			out = strdup(optarg);
			break;
		case 'h':
			import_usage(stdout);
			free(out);
			return 0;
		default:
			free(out);
			return 2;
		}
	}
	if (optind != argc - 1) {
		pr_usage("import", "expected one TRACE.json[.gz]");
		free(out);
		return 2;
	}
	if (!out)
		out = default_out(argv[optind]);
	if (!out) {
		pr_err("import: out of memory");
		return 1;
	}
	if (outfile_is_input(out, argv[optind])) {
		pr_err("import: output %s is the input %s itself", out, argv[optind]);
		free(out);
		return 2;
	}
	err = kineto_import(argv[optind], out, &st);
	if (!err)
		printf("%s: %" PRIu64 " events -> %" PRIu64 " records (%" PRIu64
		       " clipped, %" PRIu64 " kept verbatim) in %s\n",
		       argv[optind], st.events, st.records, st.clipped, st.unknown, out);
	free(out);
	return err ? 1 : 0;
}
