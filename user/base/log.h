/* SPDX-License-Identifier: MIT */
/*
 * One way to speak on stderr. Every message is one line that starts
 * "ptrace-gpu: ", warnings "ptrace-gpu: warning: ", with a context word first
 * in the message where it helps: pr_err("record: bad PID '%s'", arg) prints
 * "ptrace-gpu: record: bad PID '12x'". The message has no trailing newline
 * (one is tolerated, not doubled); the line goes out in one write, so lines
 * of threads do not mix.
 *
 * Verbosity (ptrace-gpu -q/-v COMMAND): quiet drops pr_info, verbose adds
 * pr_debug and libbpf's own DEBUG/INFO messages. Errors and warnings always go
 * out.
 *
 * libbpf's WARN messages: most come from failures the caller expects and
 * handles (an optional probe that does not attach, a BTF field some kernels
 * lack), and printed as they come they would spill over our own one-line
 * answer. So they are kept, the last LOG_LIBBPF_KEEP of them, and go out
 * ("ptrace-gpu: libbpf: ...") only when useful: at once with -v, or when the
 * caller gives up with an error and calls log_libbpf_flush() just before its
 * pr_err(), so the libbpf detail comes first and our summary is the last line.
 * A caller that handled the failure may drop them with log_libbpf_discard().
 * main() flushes what is left when a command fails, so an error path that
 * does not flush still shows them (after its error line); a command that
 * succeeds never shows them without -v.
 */
#ifndef PTG_LOG_H
#define PTG_LOG_H

#include <stdio.h>

enum ptg_level {
	PTG_LOG_ERR,
	PTG_LOG_WARN,
	PTG_LOG_INFO,
	PTG_LOG_DEBUG,
};

enum ptg_verbosity {
	PTG_QUIET,   /* errors and warnings only */
	PTG_NORMAL,  /* and pr_info */
	PTG_VERBOSE, /* and pr_debug, and every libbpf message as it comes */
};

#define LOG_LIBBPF_KEEP 8 /* libbpf warnings kept for log_libbpf_flush() */

void ptg_log(enum ptg_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pr_err(...)   ptg_log(PTG_LOG_ERR, __VA_ARGS__)
#define pr_warn(...)  ptg_log(PTG_LOG_WARN, __VA_ARGS__)
#define pr_info(...)  ptg_log(PTG_LOG_INFO, __VA_ARGS__)
#define pr_debug(...) ptg_log(PTG_LOG_DEBUG, __VA_ARGS__)

/*
 * A command-line mistake: "ptrace-gpu CMD: MESSAGE (see ptrace-gpu CMD --help)".
 * The one other shape, because it names the command line as typed, like
 * "usage: ptrace-gpu CMD" (and tests pin it).
 */
void pr_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The context word of an older "who" argument ("ptrace-gpu report",
 * "ptrace-gpu: idle", "slice"): what follows "ptrace-gpu" and its ": " or " ",
 * or who itself; "" for plain "ptrace-gpu". For functions that take a who
 * from their callers (trace_open, parse_u64_flag).
 */
const char *log_context(const char *who);

void log_set_verbosity(enum ptg_verbosity v);
enum ptg_verbosity log_verbosity(void);

/* Where lines go: stderr unless set (unit tests). NULL means stderr. */
void log_set_stream(FILE *f);

/* Installs the libbpf print callback (libbpf_set_print); main calls it once. */
void log_init(void);

/* Prints the kept libbpf warnings, oldest first, and forgets them. */
void log_libbpf_flush(void);
/* Forgets the kept libbpf warnings: their failure was expected and handled. */
void log_libbpf_discard(void);

#endif /* PTG_LOG_H */
