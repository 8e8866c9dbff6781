"""What `ptrace-gpu --help` and `ptrace-gpu COMMAND --help` list: the one
reading of them that the man page and completion tests share (and that
dist/bash-completion/ptrace-gpu makes in bash, the same way).
"""
import os
import re
import subprocess

PTRACE_GPU = os.environ.get("PTRACE_GPU", "build/ptrace-gpu")
SOURCE = os.environ.get("PTG_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# an option in a usage line: after a space, '[', '(' or '|'
USAGE_OPT = re.compile(r"(?:^|[\[ (|])(--?[A-Za-z][A-Za-z0-9-]*)")
# a line of an option list: indented at most 8 (a description's next line is
# indented more), then -x, --long or both
LIST_OPT = re.compile(r"^ {1,8}(-[A-Za-z0-9])?(?:, )?(--[A-Za-z][A-Za-z0-9-]*)?")


def help_text(*args):
    out = subprocess.run([PTRACE_GPU, *args, "--help"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, f"{' '.join(args)} --help: exit {out.returncode}: {out.stderr}"
    return out.stdout


def options(text):
    """The options of a --help text: its usage lines' and its option list's."""
    opts = set()
    lines = text.splitlines()
    i = 0
    while i < len(lines) and lines[i].strip():
        opts.update(USAGE_OPT.findall(lines[i]))
        i += 1
    for line in lines[i:]:
        m = LIST_OPT.match(line)
        if m:
            opts.update(o for o in m.groups() if o)
    return opts


def commands(text):
    """The commands that `ptrace-gpu --help` lists under "commands:"."""
    cmds, inside = [], False
    for line in text.splitlines():
        if line.startswith("commands:"):
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            m = re.match(r"^ +([a-z][a-z0-9-]*) ", line)
            if m:
                cmds.append(m.group(1))
    return cmds
