"""dist/bash-completion/ptrace-gpu, sourced in bash as bash-completion does:
the commands and each command's options are what --help lists (the same
reading as the man page test's), pids after -p, trace files for reports.
"""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import helpopts  # noqa: E402

SCRIPT = os.path.join(helpopts.SOURCE, "dist/bash-completion/ptrace-gpu")

# COMPREPLY for the words given, the last being the one completed, one a line
COMPLETE = """
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
complete -p ptrace-gpu >/dev/null || exit 3
_ptrace_gpu
printf '%s\\n' "${COMPREPLY[@]}"
"""


def complete(*words, cwd=None):
    exe = os.path.abspath(helpopts.PTRACE_GPU)
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", COMPLETE, "complete", SCRIPT,
                          exe, *words], capture_output=True, text=True, timeout=60, cwd=cwd)
    assert out.returncode == 0, f"{words}: exit {out.returncode}: {out.stderr}"
    return [w for w in out.stdout.splitlines() if w]


class Completion(unittest.TestCase):
    def test_commands(self):
        cmds = helpopts.commands(helpopts.help_text())
        self.assertEqual(sorted(complete("")), sorted(cmds))
        self.assertEqual(sorted(complete("re")), ["record", "report"])
        self.assertEqual(complete("-v", "flame"), ["flamegraph"])
        self.assertIn("--version", complete("--v"))

    def test_options_per_command(self):
        for cmd in helpopts.commands(helpopts.help_text()):
            with self.subTest(cmd=cmd):
                want = helpopts.options(helpopts.help_text(cmd))
                self.assertEqual(set(complete(cmd, "-")), want)
        self.assertEqual(sorted(complete("record", "--no-c")), ["--no-cuda", "--no-cupti"])
        self.assertEqual(complete("report", "--sort", "tot"), ["tottime"])

    def test_pids(self):
        me = str(os.getpid())
        self.assertIn(me, complete("record", "-p", me[:-1]))
        self.assertIn(f"1,{me}", complete("sample", "--pid", f"1,{me}"))

    def test_trace_files(self):
        with tempfile.TemporaryDirectory() as d:
            for name in ("run.ptg", "notes.txt", "trace.json.gz"):
                open(os.path.join(d, name), "w").close()
            os.mkdir(os.path.join(d, "ranks"))
            self.assertEqual(sorted(complete("report", "", cwd=d)), ["ranks", "run.ptg"])
            self.assertEqual(sorted(complete("idle", "-n", "3", "r", cwd=d)), ["ranks", "run.ptg"])
            self.assertEqual(complete("import", "tr", cwd=d), ["trace.json.gz"])

    def test_command_after_dashes(self):
        self.assertIn("python3", complete("record", "-o", "x.ptg", "--", "python"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
