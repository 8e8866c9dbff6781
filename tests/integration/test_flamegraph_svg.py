# SPDX-License-Identifier: MIT
"""flamegraph -o OUT.svg on a real Kineto trace with GPU kernels (imported
with `ptrace-gpu import`), read with the standard library's XML parser:
hover titles give the whole name and a weight in ns/µs/ms/s, never a raw
count of ns past 1 µs; GPU frames' labels show the kernel's name, not
"[gpu]..", and every cut label is the start of its frame's name."""
import os
import re
import tempfile
import unittest
import xml.etree.ElementTree as ET

import ptg

SVG = "{http://www.w3.org/2000/svg}"
TITLE = re.compile(r"^(.*) \((\d+ ns|[0-9]+\.[0-9]{3} (?:µs|ms|s)), [0-9.]+%\)$")
UNIT = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}


class FlamegraphSvg(unittest.TestCase):
    def test_kineto_gpu_weights(self):
        kdir = os.path.join(os.environ.get("PTG_SHARED_DIR", ""), "traces", "kineto")
        src = os.path.join(kdir, "train_rank0.json.gz")
        if not os.path.exists(src):
            self.skipTest(f"no {src}")
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "t.ptg")
            svg = os.path.join(tmp, "t.svg")
            self.assertEqual(ptg.run(["import", src, "-o", trace]).returncode, 0)
            res = ptg.run(["flamegraph", "--weight", "gpu", "-o", svg, trace])
            self.assertEqual(res.returncode, 0, res.stderr)
            root = ET.parse(svg).getroot()
        gpu_labels = 0
        for g in root.iter(SVG + "g"):
            if g.get("class") != "f":
                continue
            title = g.find(SVG + "title").text
            m = TITLE.match(title)
            self.assertTrue(m, title)
            name, weight = m.group(1), m.group(2)
            value, unit = weight.split(" ")
            ns = int(g.get("data-n"))
            # the unit is the largest that keeps the value at 1 or more
            self.assertAlmostEqual(float(value) * UNIT[unit], ns, delta=UNIT[unit] * 0.0006)
            self.assertTrue(unit == "ns" or ns >= UNIT[unit], title)
            label = g.find(SVG + "text").text or ""
            self.assertFalse(label.startswith("[gpu].."), title)
            if name.startswith("[gpu] ") and label:
                gpu_labels += 1
            if label.endswith(".."):
                base = name[6:] if name.startswith("[gpu] ") else name
                self.assertTrue(base.startswith(label[:-2]) or name.startswith(label[:-2]),
                                (label, name))
            elif label:
                self.assertIn(label, (name, name[6:]))
        self.assertGreater(gpu_labels, 0, "no GPU frame wide enough for a label")


if __name__ == "__main__":
    ptg.main()
