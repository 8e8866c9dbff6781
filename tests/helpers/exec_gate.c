// SPDX-License-Identifier: MIT
/*
 * A C launcher with no Python: says "ready PID", then reads lines from
 * stdin; each SIGUSR1 it gets is answered "usr1 N" on stdout (N counts
 * them), so that a test can check that every signal sent to it while a
 * recorder holds it reached it. The line "go" makes it exec COMMAND.
 *
 * usage: exec_gate COMMAND [ARG..]
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
	char buf[32];
	int n;

	(void)sig;
	usr1++;
	n = snprintf(buf, sizeof(buf), "usr1 %d\n", (int)usr1);
	if (write(STDOUT_FILENO, buf, (size_t)n) != n)
		_exit(3);
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
	char line[64];

	if (argc < 2) {
		fprintf(stderr, "usage: exec_gate COMMAND [ARG..]\n");
		return 2;
	}
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (strcmp(line, "go\n"))
			continue;
		execvp(argv[1], argv + 1);
		perror("exec_gate: exec");
		return 127;
	}
	return 1;
}
