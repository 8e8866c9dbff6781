// SPDX-License-Identifier: MIT
/* record's command line: --help, and the options into a struct record_opts. */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/numarg.h"
#include "cli/cli.h"
#include "cli/record_opts.h"
#include "proc/procfs.h"
#include "pyinterp/pyinterp.h"
#include "record/record.h"
#include "record/steps.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: ptrace-gpu record [-p PID[,PID...] | --uid USER | --cgroup DIR | -- CMD ...]\n"
	    "                         [--children] [--hold] [--per-process] [-o FILE]\n"
	    "                         [-d SECONDS]\n\n"
	    "Records every Python call of a running CPython process, with no restart\n"
	    "and no change in it, or of a command started under the tracer; and, when the\n"
	    "process has them, PyTorch dispatcher ops, CUDA driver/runtime calls, GPU\n"
	    "activity (CUPTI agent) and off-CPU intervals of its threads. CUDA and\n"
	    "PyTorch libraries it loads later are probed before they are mapped, where\n"
	    "its loader will find them (docs/late-libs.md).\n"
	    "Any process can be recorded: one with no Python (a C/C++ program, a shell)\n"
	    "gets its CUDA calls, GPU activity and off-CPU intervals; when it execs a\n"
	    "Python interpreter or loads libpython, its Python calls are recorded from\n"
	    "then on: from the first one for an exec (the process is held under ptrace\n"
	    "until it execs; its exec waits while the probes go in; under another\n"
	    "tracer, strace or gdb, -p finds it once it runs), and for a libpython\n"
	    "on its search path, probed before it is mapped, or off it (the loader's\n"
	    "notice that maps it waits while it is probed).\n\n"
	    "  -p, --pid PID[,PID..] attach to the running process PID; with several,\n"
	    "                        one trace of all of them (each record has its pid;\n"
	    "                        Python calls, ops, CUDA calls, off-CPU intervals\n"
	    "                        and GPU activity of each); any of them may run\n"
	    "                        no Python (a launcher, a C++ program)\n"
	    "      --children        also the processes they started, and every one\n"
	    "                        they start (fork, exec) from its first call, as\n"
	    "                        perf record --inherit and strace -f do (alias\n"
	    "                        --inherit); until all ended;\n"
	    "                        -- CMD or -p PID may then be a script or launcher\n"
	    "                        that starts Python; each process of a set is held\n"
	    "                        under ptrace: its exec waits while what it runs is\n"
	    "                        probed, as does a library it loads by full path,\n"
	    "                        and its forks wait for record\n"
	    "                        (meanwhile its interpreter's probes trap in every\n"
	    "                        process that runs that interpreter file: about\n"
	    "                        1 us per Python call of the others; docs/design.md)\n"
	    "      --hold            hold each process given under ptrace, each of its\n"
	    "                        threads, as --children does, without following\n"
	    "                        what it starts: a CUDA or PyTorch library any of\n"
	    "                        its threads loads by a full path from off its\n"
	    "                        search path then waits at the loader's notice\n"
	    "                        until probed, its first call recorded (unheld,\n"
	    "                        the calls made until the probes are in are\n"
	    "                        missing, and said); its exec waits too.\n"
	    "                        Meanwhile its signals pass through record, and no\n"
	    "                        debugger can attach to it (docs/late-libs.md).\n"
	    "                        A set (-p A,B, --children, --uid, --cgroup) is\n"
	    "                        held always; a process with no Python (-p) too\n"
	    "      --uid USER        every Python process of USER (a name or a uid):\n"
	    "                        those running, those that start (exec) while\n"
	    "                        recording, and what they fork; until -d or Ctrl-C\n"
	    "      --cgroup DIR      the same for a cgroup v2 directory (and those below\n"
	    "                        it), e.g. /sys/fs/cgroup/system.slice/train.service\n"
	    "      --per-process     one trace per process that ran Python (or made CUDA\n"
	    "                        calls, or was given with -p) instead:\n"
	    "                        FILE.rankR.ptg where RANK (or LOCAL_RANK) is in its\n"
	    "                        environment, with the rank in its metadata for\n"
	    "                        export; else FILE.pidP.ptg\n"
	    "  -o, --output FILE     trace file (default: ptrace-gpu.ptg): a new file, mode\n"
	    "                        0600, that replaces FILE once complete\n"
	    "  -d, --duration SECS   stop after SECS seconds (default: until Ctrl-C,\n"
	    "                        SIGTERM, or the target exits)\n"
	    "      --ringbuf-mb N    size of the BPF ring buffer in MiB, a power of two\n"
	    "                        (default 8: lost nothing at 1.1 M events/s; it is\n"
	    "                        mapped twice, so it adds 2 N MiB to the memory);\n"
	    "                        also of the ring shared with the in-process agent\n"
	    "                        (default 32 for Python calls in-process: a\n"
	    "                        call-dense target makes ~10 M events/s; 8 for\n"
	    "                        ops alone)\n"
	    "      --no-cuda         no probes on the CUDA driver and runtime libraries\n"
	    "      --no-cupti        no GPU activity: do not load the CUPTI agent into\n"
	    "                        the target (docs/gpu.md)\n"
	    "      --no-sched        no off-CPU intervals from the kernel scheduler\n"
	    "      --no-ops          no PyTorch dispatcher ops\n"
	    "      --ops-from WHERE  how ops are recorded in a running process (-p PID,\n"
	    "                        -p A,B) that has PyTorch loaded, or in a command\n"
	    "                        from its first op (it is held under ptrace until\n"
	    "                        then): 'callback' (the default): a global\n"
	    "                        RecordFunction callback\n"
	    "                        (torch.profiler's hook) registered by\n"
	    "                        libptg_pymon.so, loaded into the target for it,\n"
	    "                        about 0.6 us an op, torch.profiler's op set;\n"
	    "                        removed at the end or when ptrace-gpu dies (the\n"
	    "                        library stays loaded, idle). 'probes': uprobes\n"
	    "                        on the dispatcher, nothing loaded into the\n"
	    "                        target, 1-9 us an op. --children, --uid,\n"
	    "                        --cgroup, a container's process, PyTorch\n"
	    "                        imported later by a running process, a first\n"
	    "                        op the command runs off its main thread:\n"
	    "                        always probes (docs/torch.md)\n"
	    "      --in-process      Python calls from inside the target, and an\n"
	    "                        error where that cannot be. The default where it\n"
	    "                        can: each -p PID (-p A,B: an agent in each,\n"
	    "                        --hold, --per-process too) of Python 3.11+ in\n"
	    "                        our pid namespace, with a trusted\n"
	    "                        libptg_pymon.so; and -- CMD from where its\n"
	    "                        script starts (its interpreter's start-up by\n"
	    "                        uprobes, its main thread held under ptrace\n"
	    "                        until then); about cProfile's cost per call\n"
	    "                        (0.1-0.2 us here), the same exact calls as the\n"
	    "                        uprobes. It changes the target: loads\n"
	    "                        libptg_pymon.so into it and registers a\n"
	    "                        sys.monitoring tool (the first free id of 2..5;\n"
	    "                        cProfile takes 2) with C callbacks, or on 3.11 a\n"
	    "                        C profile function on every thread and\n"
	    "                        threading's profile hook (refused if a profiler\n"
	    "                        is in), and keeps the code objects it saw alive\n"
	    "                        (at most 4 x 32768 at a time). With PyTorch\n"
	    "                        loaded, its ops come from a global\n"
	    "                        RecordFunction callback (torch.profiler's hook)\n"
	    "                        instead of uprobes; --no-ops: none. All is\n"
	    "                        removed when the recording ends or ptrace-gpu\n"
	    "                        dies (the library stays loaded, idle). Not\n"
	    "                        given with -- CMD, --children, --uid or\n"
	    "                        --cgroup; an exec ends a process's Python\n"
	    "                        calls (docs/design.md)\n"
	    "      --uprobes         Python calls by uprobes on the interpreter's eval\n"
	    "                        loop, nothing loaded into the target for them:\n"
	    "                        two traps a call (1-20 us, by machine: record\n"
	    "                        measures it at start). Always so with\n"
	    "                        --children, --uid, --cgroup, a process in\n"
	    "                        another pid namespace, or where the agent cannot\n"
	    "                        go in (its tool ids taken, a profiler in, the\n"
	    "                        injection refused: record then starts again with\n"
	    "                        the uprobes); for -- CMD until its script starts,\n"
	    "                        and after where another thread runs Python\n"
	    "                        then; the status line says which and why\n"
	    "      --steps N         stop after N training steps (each return of an\n"
	    "                        optimizer's step(); needs Python in the target;\n"
	    "                        ProfilerStep#0.. spans)\n"
	    "      --schedule wait=W,warmup=U,active=A[,repeat=R][,skip_first=S]\n"
	    "                        torch.profiler.schedule(): keep the active steps,\n"
	    "                        one trace per active cycle, FILE.cycleC.ptg\n"
	    "      --step-function MODULE:QUALNAME\n"
	    "                        the function whose return ends a step (default:\n"
	    "                        *.step of torch/optim/); MODULE __main__: any file\n"
	    "  -q, --quiet           no live status line and no summary (the status line\n"
	    "                        is drawn only on a terminal the target does not\n"
	    "                        write to: never with -- CMD, whose output it is)\n"
	    "  -h, --help            this help\n\n"
	    "Exit status: 1 when recording failed; with -- CMD, else the command's own\n"
	    "status (128+N when signal N killed it); else 0.\n"
	    "Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE). Supported Python: %s.\n",
	    py_supported_versions());
}

#define WHO "ptrace-gpu: record"

/* A user by name or number (--uid). */
static int parse_user(const char *s, uid_t *uid)
{
	struct passwd *pw;
	uint64_t v;

	if (!parse_u64(s, 0, UINT32_MAX - 1, &v)) {
		*uid = (uid_t)v;
		return 0;
	}
	pw = getpwnam(s);
	if (!pw)
		return -ENOENT;
	*uid = pw->pw_uid;
	return 0;
}

int record_parse_opts(int argc, char **argv, struct record_opts *o)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"children", no_argument, NULL, 'I'},
	    {"inherit", no_argument, NULL, 'I'},
	    {"per-process", no_argument, NULL, 'E'},
	    {"hold", no_argument, NULL, 'H'},
	    {"uid", required_argument, NULL, 'U'},
	    {"cgroup", required_argument, NULL, 'g'},
	    {"output", required_argument, NULL, 'o'},
	    {"duration", required_argument, NULL, 'd'},
	    {"ringbuf-mb", required_argument, NULL, 'R'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"no-cuda", no_argument, NULL, 'C'},
	    {"no-cupti", no_argument, NULL, 'G'},
	    {"no-sched", no_argument, NULL, 'S'},
	    {"no-ops", no_argument, NULL, 'O'},
	    {"in-process", no_argument, NULL, 'P'},
	    {"uprobes", no_argument, NULL, 'Y'},
	    {"ops-from", required_argument, NULL, 'W'},
	    {"steps", required_argument, NULL, 'N'},
	    {"schedule", required_argument, NULL, 'K'},
	    {"step-function", required_argument, NULL, 'F'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	uint64_t v;
	int c, ret;

	/*
	 * 8 MiB: bench/loader.py, one recorder at 1.0-1.1 M events/s on a loaded
	 * 2-core VM, lost 2,000-3,500 events in two runs of three with 4 MiB
	 * and none with 8 MiB. The data pages are mapped twice: 8 MiB peaks at
	 * 26 MiB of RSS, 64 MiB peaked at 148 MiB.
	 */
	*o = (struct record_opts){.output = "ptrace-gpu.ptg", .ringbuf_mb = 8};
	while ((c = cli_getopt(argc, argv, "record", "+p:o:d:qh", longopts)) != -1) {
		switch (c) {
		case 'p':
			/* -p A,B,C, or -p A -p B */
			ret = parse_pid_list(optarg, o->pids, RECORD_MAX_PIDS, &o->npids);
			if (ret == -E2BIG)
				pr_err("record: more than %d PIDs", RECORD_MAX_PIDS);
			else if (ret)
				pr_err("record: bad PID '%s'", optarg);
			if (ret)
				return -EINVAL;
			o->pid = o->pids[0];
			break;
		case 'I':
			o->children = true;
			break;
		case 'E':
			o->per_process = true;
			break;
		case 'H':
			o->hold = true;
			break;
		case 'U':
			if (parse_user(optarg, &o->uid)) {
				pr_err("record: bad --uid '%s': no such user", optarg);
				return -EINVAL;
			}
			o->by_uid = true;
			break;
		case 'g':
			o->cgroup = optarg;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'd':
			if (parse_double_flag(WHO, "--duration", "seconds", optarg, ARG_SECONDS_MIN,
					      ARG_SECONDS_MAX, &o->duration))
				return -EINVAL;
			break;
		case 'R':
			if (parse_u64(optarg, 1, 1024, &v) || (v & (v - 1))) {
				pr_err("record: bad --ringbuf-mb '%s': want a power of two from 1 "
				       "to 1024",
				       optarg);
				return -EINVAL;
			}
			o->ringbuf_mb = (unsigned int)v;
			o->agent_ring_mb = (unsigned int)v;
			break;
		case 'q':
			o->quiet = true;
			log_set_verbosity(PTG_QUIET);
			break;
		case 'C':
			o->no_cuda = true;
			break;
		case 'G':
			o->no_cupti = true;
			break;
		case 'S':
			o->no_sched = true;
			break;
		case 'O':
			o->no_ops = true;
			break;
		case 'P':
		case 'Y':
			if (o->py_from &&
			    o->py_from != (c == 'P' ? RECORD_PY_AGENT : RECORD_PY_UPROBES)) {
				pr_err("record: --in-process and --uprobes are two ways to take "
				       "the same calls: give one");
				return -EINVAL;
			}
			o->py_from = c == 'P' ? RECORD_PY_AGENT : RECORD_PY_UPROBES;
			break;
		case 'W':
			if (strcmp(optarg, "callback") && strcmp(optarg, "probes")) {
				pr_err("record: bad --ops-from '%s' (want callback or probes)",
				       optarg);
				return -EINVAL;
			}
			o->op_probes = !strcmp(optarg, "probes");
			break;
		case 'N':
			if (parse_u64_flag(WHO, "--steps", optarg, 1, UINT32_MAX, &v))
				return -EINVAL;
			o->steps.max_steps = (uint32_t)v;
			break;
		case 'K':
			if (steps_parse_schedule(optarg, &o->steps)) {
				pr_err("record: bad --schedule '%s' (want "
				       "wait=W,warmup=U,active=A with A > 0, and optionally "
				       "repeat=R,skip_first=S)",
				       optarg);
				return -EINVAL;
			}
			break;
		case 'F':
			if (steps_check_function(optarg)) {
				pr_err("record: bad --step-function '%s' (want "
				       "MODULE:QUALNAME)",
				       optarg);
				return -EINVAL;
			}
			o->steps.function = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind < argc)
		o->cmd = &argv[optind];
	/* ptrace-gpu -q record is record -q: no status line either */
	o->quiet = o->quiet || log_verbosity() == PTG_QUIET;
	if ((o->pid != 0) + (o->cmd != NULL) + o->by_uid + (o->cgroup != NULL) != 1) {
		pr_err("record: give one of -p PID, --uid USER, --cgroup DIR "
		       "or -- CMD");
		return -EINVAL;
	}
	/* the agent goes into a running interpreter: a command's starts later, sets are many */
	if (o->py_from == RECORD_PY_AGENT && (o->cmd || o->children || o->by_uid || o->cgroup)) {
		pr_err("record: --in-process takes running processes (-p PID or -p A,B), not "
		       "-- CMD (by default in-process from its script's start), "
		       "--children, --uid or --cgroup");
		return -EINVAL;
	}
	if (record_is_tree(o) && (o->steps.max_steps || o->steps.schedule)) {
		pr_err("record: --steps and --schedule take one process, "
		       "not several, --children, --hold or --per-process");
		return -EINVAL;
	}
	return 0;
}
