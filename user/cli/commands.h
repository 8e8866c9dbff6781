/* SPDX-License-Identifier: MIT */
/* One function per subcommand, each in user/cmd_<verb>.c; main() only dispatches. */
#ifndef PTG_COMMANDS_H
#define PTG_COMMANDS_H

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_idle(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_inject(int argc, char **argv);
int cmd_check(int argc, char **argv);

#endif /* PTG_COMMANDS_H */
