// SPDX-License-Identifier: MIT
/* One log function, one prefix style, and libbpf's messages only when useful (log.h). */
#include <bpf/libbpf.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define PREFIX	       "ptrace-gpu: "
#define LIBBPF_MSG_MAX 4096 /* a kept message longer than this keeps its end */

static enum ptg_verbosity verbosity = PTG_NORMAL;
static FILE *stream;

/* libbpf may call back from any thread that loads or attaches: the ring has a lock */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static char *kept[LOG_LIBBPF_KEEP];
static unsigned int kept_next, kept_n;

void log_set_verbosity(enum ptg_verbosity v)
{
	verbosity = v;
}

enum ptg_verbosity log_verbosity(void)
{
	return verbosity;
}

void log_set_stream(FILE *f)
{
	stream = f;
}

static FILE *out(void)
{
	return stream ? stream : stderr;
}

/* The formatted message in a malloc'd string, or NULL when out of memory. */
static char *format(const char *fmt, va_list ap)
{
	va_list aq;
	char *s;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (s)
		vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

/*
 * Writes prefix then msg, each line of a multi-line msg prefixed the same
 * way, with one trailing newline; one fputs so that lines of threads do not
 * mix.
 */
static void emit(const char *prefix, const char *msg)
{
	size_t plen = strlen(prefix), lines = 1, len = strlen(msg), n = 0;
	const char *p;
	char *buf;

	while (len && msg[len - 1] == '\n')
		len--;
	for (p = msg; p < msg + len; p++)
		lines += *p == '\n';
	buf = malloc(len + lines * plen + 2);
	if (!buf) {
		fprintf(out(), "%s%.*s\n", prefix, (int)len, msg);
		return;
	}
	memcpy(buf, prefix, plen);
	n = plen;
	for (p = msg; p < msg + len; p++) {
		buf[n++] = *p;
		if (*p == '\n') {
			memcpy(buf + n, prefix, plen);
			n += plen;
		}
	}
	buf[n++] = '\n';
	buf[n] = '\0';
	fputs(buf, out());
	fflush(out());
	free(buf);
}

static bool wanted(enum ptg_level level)
{
	if (level == PTG_LOG_INFO)
		return verbosity >= PTG_NORMAL;
	if (level == PTG_LOG_DEBUG)
		return verbosity >= PTG_VERBOSE;
	return true;
}

void ptg_log(enum ptg_level level, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (!wanted(level))
		return;
	va_start(ap, fmt);
	msg = format(fmt, ap);
	va_end(ap);
	emit(level == PTG_LOG_WARN ? PREFIX "warning: " : PREFIX, msg ? msg : fmt);
	free(msg);
}

void pr_usage(const char *cmd, const char *fmt, ...)
{
	char prefix[128];
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = format(fmt, ap);
	va_end(ap);
	snprintf(prefix, sizeof(prefix), "ptrace-gpu %s: ", cmd);
	fprintf(out(), "%s%s (see ptrace-gpu %s --help)\n", prefix, msg ? msg : fmt, cmd);
	fflush(out());
	free(msg);
}

const char *log_context(const char *who)
{
	static const char name[] = "ptrace-gpu";

	if (strncmp(who, name, sizeof(name) - 1))
		return who;
	who += sizeof(name) - 1;
	if (*who == ':')
		who++;
	while (*who == ' ')
		who++;
	return who;
}

/* Keeps msg (taking it), the oldest dropped when the ring is full. */
static void keep(char *msg)
{
	size_t len = strlen(msg);

	if (len > LIBBPF_MSG_MAX) {
		/* a verifier log says why at its end */
		memmove(msg + 6, msg + len - (LIBBPF_MSG_MAX - 6), LIBBPF_MSG_MAX - 6 + 1);
		memcpy(msg, "[...] ", 6);
	}
	pthread_mutex_lock(&kept_lock);
	free(kept[kept_next]);
	kept[kept_next] = msg;
	kept_next = (kept_next + 1) % LOG_LIBBPF_KEEP;
	if (kept_n < LOG_LIBBPF_KEEP)
		kept_n++;
	pthread_mutex_unlock(&kept_lock);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char *msg = format(fmt, ap);
	const char *text;

	if (!msg)
		return 0;
	/* libbpf starts most of its messages with its own "libbpf: " */
	text = strncmp(msg, "libbpf: ", 8) ? msg : msg + 8;
	if (verbosity >= PTG_VERBOSE)
		emit(PREFIX "libbpf: ", text);
	else if (level == LIBBPF_WARN) {
		memmove(msg, text, strlen(text) + 1);
		keep(msg);
		return 0;
	}
	free(msg);
	return 0;
}

void log_init(void)
{
	libbpf_set_print(libbpf_print);
}

static void drain(bool print)
{
	unsigned int first, i;

	pthread_mutex_lock(&kept_lock);
	first = (kept_next + LOG_LIBBPF_KEEP - kept_n) % LOG_LIBBPF_KEEP;
	for (i = 0; i < kept_n; i++) {
		char **m = &kept[(first + i) % LOG_LIBBPF_KEEP];

		if (print)
			emit(PREFIX "libbpf: ", *m);
		free(*m);
		*m = NULL;
	}
	kept_n = 0;
	kept_next = 0;
	pthread_mutex_unlock(&kept_lock);
}

void log_libbpf_flush(void)
{
	drain(true);
}

void log_libbpf_discard(void)
{
	drain(false);
}
