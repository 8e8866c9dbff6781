// SPDX-License-Identifier: MIT
/*
 * The target of tests/integration/test_kill_safe.py: rounds of a
 * deterministic computation whose values live in x87, SSE and (where the
 * CPU has it) AVX registers for the whole of a round, so that a register
 * not given back after an injection shows as a wrong checksum. Between
 * rounds it sleeps in clock_nanosleep() and counts the EINTRs it gets.
 * SIGUSR2 stays blocked and an alternate signal stack stays set: both are
 * checked at the end.
 *
 *   kill_safe_target run   prints "ready", then "ROUND CHECKSUM" per round
 *                          until a line comes on stdin, then "end ..."
 *   kill_safe_target ref N prints the N first rounds, no sleep
 */
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INNER 20000

typedef double v4d __attribute__((vector_size(32)));

static double round_sse(unsigned int k)
{
	double a = k * 0.5 + 1.0, b = 0.25, c = 1.0 / (k + 3);
	long double x = k + 0.125L;

	for (int i = 0; i < INNER; i++) {
		a = a * 0.999 + b;
		b = b * 0.5 + c;
		c = c * 0.75 + 0.0625;
		x = x * 0.9995L + 0.5L;
	}
	return a + b * 3 + c * 7 + (double)x;
}

__attribute__((target("avx"))) static double round_avx(unsigned int k)
{
	v4d a = {k, k + 1.0, k + 2.0, k + 3.0}, b = {0.25, 0.5, 0.75, 1.0};
	v4d m = {0.999, 0.998, 0.997, 0.996}, c = {1.0 / (k + 5), 0.125, 0.0625, 0.03125};

	for (int i = 0; i < INNER; i++) {
		a = a * m + b;
		b = b * 0.5 + c;
		c = c * 0.75 + 0.0625;
	}
	return a[0] + a[1] * 2 + a[2] * 3 + a[3] * 4 + b[0] + b[3] + c[1];
}

static double compute(unsigned int k, bool avx)
{
	return round_sse(k) + (avx ? round_avx(k) : 0.0);
}

/* 200 us, restarted on EINTR with what is left, as a careful program would */
static unsigned int nap(void)
{
	struct timespec ts = {0, 200000};
	unsigned int eintr = 0;

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts))
		eintr++;
	return eintr;
}

static bool stdin_ready(void)
{
	struct pollfd p = {.fd = 0, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

static bool same_mask(const sigset_t *a, const sigset_t *b)
{
	for (int sig = 1; sig < NSIG; sig++) {
		if (sigismember(a, sig) != sigismember(b, sig))
			return false;
	}
	return true;
}

static int run(bool avx)
{
	static char altstack[1 << 16];
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)}, now;
	sigset_t set, mask;
	unsigned int k, eintr = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	if (sigprocmask(SIG_SETMASK, &set, NULL) || sigaltstack(&ss, NULL))
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (k = 0; !stdin_ready(); k++) {
		printf("%u %a\n", k, compute(k, avx));
		fflush(stdout);
		eintr += nap();
	}
	sigemptyset(&mask);
	sigprocmask(SIG_SETMASK, NULL, &mask);
	sigaltstack(NULL, &now);
	printf("end mask=%s altstack=%s eintr=%u\n", same_mask(&mask, &set) ? "ok" : "changed",
	       now.ss_sp == altstack && now.ss_size == sizeof(altstack) && !now.ss_flags
		   ? "ok"
		   : "changed",
	       eintr);
	return 0;
}

int main(int argc, char **argv)
{
	bool avx = __builtin_cpu_supports("avx");

	if (argc == 2 && !strcmp(argv[1], "run"))
		return run(avx);
	if (argc == 3 && !strcmp(argv[1], "ref")) {
		for (unsigned int k = 0, n = (unsigned int)atoi(argv[2]); k < n; k++)
			printf("%u %a\n", k, compute(k, avx));
		return 0;
	}
	fprintf(stderr, "usage: kill_safe_target run | ref N\n");
	return 2;
}
