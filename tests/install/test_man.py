"""One man page per command (man/ptrace-gpu-COMMAND.1, and ptrace-gpu.1),
each naming every option its command's --help lists, with the sections a
user looks for; and each renders without a warning from groff.
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import helpopts  # noqa: E402

MAN = os.path.join(helpopts.SOURCE, "man")
SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "EXAMPLES", "SEE ALSO"]


def page_path(cmd):
    return os.path.join(MAN, "ptrace-gpu.1" if cmd is None else f"ptrace-gpu-{cmd}.1")


def plain(src):
    """A page's source with troff's escapes and fonts taken out."""
    text = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", src)
    text = text.replace("\\-", "-").replace("\\&", "").replace("\\(em", "-")
    return text


def mentions(text, opt):
    return re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", text) is not None


class ManPages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.main_help = helpopts.help_text()
        cls.cmds = helpopts.commands(cls.main_help)

    def check_page(self, cmd, opts):
        path = page_path(cmd)
        name = "ptrace-gpu" if cmd is None else f"ptrace-gpu-{cmd}"
        self.assertTrue(os.path.exists(path), f"{cmd or 'ptrace-gpu'}: no man page {path}")
        with open(path, encoding="utf-8") as f:
            src = f.read()
        th = re.search(r"^\.TH (\S+) 1 ", src, re.M)
        self.assertIsNotNone(th, f"{path}: no .TH line of section 1")
        self.assertEqual(th.group(1), name.upper(), f"{path}: .TH names {th.group(1)}")
        self.assertRegex(src, rf"(?m)^{re.escape(name)} \\- \S", f"{path}: NAME line")
        heads = re.findall(r'^\.SH "?([^"\n]+)"?$', src, re.M)
        want = SECTIONS + (["OPTIONS"] if opts else [])
        missing = [s for s in want if s not in heads]
        self.assertFalse(missing, f"{path}: sections {missing} missing (has {heads})")
        # each option where a reader looks for it: under OPTIONS
        m = re.search(r"(?ms)^\.SH OPTIONS\n(.*?)(?=^\.SH |\Z)", src)
        text = plain(m.group(1)) if m else ""
        missing = sorted(o for o in opts if not mentions(text, o))
        self.assertFalse(missing, f"{path}: options of `{name.replace('-gpu-', '-gpu ')} "
                         f"--help` not on the page: {missing}")

    def test_every_command_has_a_page(self):
        self.assertIn("record", self.cmds, "ptrace-gpu --help lists no commands")
        for cmd in self.cmds:
            with self.subTest(cmd=cmd):
                self.check_page(cmd, helpopts.options(helpopts.help_text(cmd)))

    def test_main_page(self):
        opts = helpopts.options(self.main_help) | {"--help", "--version"}
        self.check_page(None, opts)
        with open(page_path(None), encoding="utf-8") as f:
            text = plain(f.read())
        for cmd in self.cmds:
            self.assertTrue(mentions(text, f"ptrace-gpu-{cmd}"),
                            f"ptrace-gpu.1 does not refer to ptrace-gpu-{cmd}(1)")

    def test_no_page_of_no_command(self):
        pages = {f for f in os.listdir(MAN) if f.endswith(".1")}
        known = {"ptrace-gpu.1"} | {f"ptrace-gpu-{c}.1" for c in self.cmds}
        self.assertFalse(pages - known, f"pages of commands --help does not list: "
                         f"{sorted(pages - known)}")

    def test_pages_render(self):
        groff = shutil.which("groff")
        if not groff:
            self.skipTest("no groff (Debian: groff-base)")
        for page in sorted(os.listdir(MAN)):
            with self.subTest(page=page):
                out = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z",
                                      os.path.join(MAN, page)],
                                     capture_output=True, text=True, timeout=60,
                                     env=dict(os.environ, LC_ALL="C.UTF-8"))
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertEqual(out.stderr, "", f"{page}: groff warns")


if __name__ == "__main__":
    unittest.main(verbosity=2)
