// SPDX-License-Identifier: MIT
/*
 * The interactive SVG of a stack trie, as flamegraph.pl draws it: frames
 * side by side by name, widths by weight, colors by kind of frame.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/utf8.h"
#include "output/stacks_svg.h"

#define SVG_W	    1200
#define SVG_XPAD    10
#define SVG_FRAME_H 16
#define SVG_TOP	    72
#define SVG_BOTTOM  34
#define SVG_FONT_W  (12 * 0.59) /* average glyph width of 12px Verdana */
#define SVG_MIN_PX  0.1		/* narrower frames are left out, as flamegraph.pl does */

/*
 * Interactions, all client-side: hover shows a frame's name, weight and share
 * of the total; click zooms into a frame (its ancestors span the width, half
 * transparent); Search (or Ctrl-F) highlights frames matching a regular
 * expression and shows what share of the total they cover, nested matches
 * counted once; Reset Zoom / Escape go back.
 */
static const char svg_script[] =
    "\"use strict\";\n"
    "var W = 1200, XPAD = 10, FONTW = 12 * 0.59, GPU = \"[gpu] \", frames = [], total = 0;\n"
    "var details, matched, resetbtn, searchbtn, searching = false;\n"
    "function init(evt) {\n"
    "\tvar gs = document.getElementById(\"frames\").getElementsByTagName(\"g\");\n"
    "\ttotal = +document.documentElement.getAttribute(\"data-total\");\n"
    "\tdetails = document.getElementById(\"details\").firstChild;\n"
    "\tmatched = document.getElementById(\"matched\").firstChild;\n"
    "\tresetbtn = document.getElementById(\"reset\");\n"
    "\tsearchbtn = document.getElementById(\"search\");\n"
    "\tfor (var i = 0; i < gs.length; i++)\n"
    "\t\tframes.push(frame_of(gs[i]));\n"
    "\tresetbtn.addEventListener(\"click\", unzoom);\n"
    "\tsearchbtn.addEventListener(\"click\", search_prompt);\n"
    "\twindow.addEventListener(\"keydown\", function (e) {\n"
    "\t\tif (e.keyCode === 114 || ((e.ctrlKey || e.metaKey) && e.keyCode === 70)) {\n"
    "\t\t\te.preventDefault();\n"
    "\t\t\tsearch_prompt();\n"
    "\t\t} else if (e.keyCode === 27) {\n"
    "\t\t\tunzoom();\n"
    "\t\t\treset_search();\n"
    "\t\t}\n"
    "\t});\n"
    "\tdraw(frames[0]);\n"
    "}\n"
    "function frame_of(g) {\n"
    "\tvar info = g.getElementsByTagName(\"title\")[0].textContent;\n"
    "\tvar f = { g: g, info: info, name: info.substring(0, info.lastIndexOf(\" (\")),\n"
    "\t\trect: g.getElementsByTagName(\"rect\")[0], text: g.getElementsByTagName(\"text\")[0],\n"
    "\t\tx: +g.getAttribute(\"data-x\"), n: +g.getAttribute(\"data-n\"),\n"
    "\t\td: +g.getAttribute(\"data-d\") };\n"
    "\tf.fill = f.rect.getAttribute(\"fill\");\n"
    "\tg.addEventListener(\"click\", function () { zoom(f); });\n"
    "\tg.addEventListener(\"mouseover\", function () { details.nodeValue = f.info; });\n"
    "\tg.addEventListener(\"mouseout\", function () { details.nodeValue = \" \"; });\n"
    "\treturn f;\n"
    "}\n"
    "function label(f, w) {\n"
    "\tvar max = Math.floor((w - 6) / FONTW), name = f.name;\n"
    "\tif (max < 3)\n"
    "\t\treturn \"\";\n"
    "\tif (name.length > max && name.indexOf(GPU) === 0)\n"
    "\t\tname = name.substring(GPU.length);\n"
    "\treturn name.length <= max ? name : name.substring(0, max - 2) + \"..\";\n"
    "}\n"
    "function draw(z) {\n"
    "\tvar scale = z.n ? (W - 2 * XPAD) / z.n : 0;\n"
    "\tframes.forEach(function (f) {\n"
    "\t\tvar above = f.d >= z.d, x = XPAD, w = W - 2 * XPAD, show;\n"
    "\t\tif (above) {\n"
    "\t\t\tshow = f.x >= z.x && f.x + f.n <= z.x + z.n;\n"
    "\t\t\tx = XPAD + (f.x - z.x) * scale;\n"
    "\t\t\tw = z.n ? f.n * scale : W - 2 * XPAD;\n"
    "\t\t} else {\n"
    "\t\t\tshow = f.x <= z.x && f.x + f.n >= z.x + z.n;\n"
    "\t\t}\n"
    "\t\tf.g.style.display = show ? \"\" : \"none\";\n"
    "\t\tif (!show)\n"
    "\t\t\treturn;\n"
    "\t\tf.g.style.opacity = above ? 1 : 0.5;\n"
    "\t\tf.rect.setAttribute(\"x\", x.toFixed(2));\n"
    "\t\tf.rect.setAttribute(\"width\", w.toFixed(2));\n"
    "\t\tf.text.setAttribute(\"x\", (x + 3).toFixed(2));\n"
    "\t\tf.text.textContent = label(f, w);\n"
    "\t});\n"
    "}\n"
    "function zoom(f) {\n"
    "\tif (f === frames[0])\n"
    "\t\treturn unzoom();\n"
    "\tresetbtn.style.display = \"\";\n"
    "\tdraw(f);\n"
    "}\n"
    "function unzoom() {\n"
    "\tresetbtn.style.display = \"none\";\n"
    "\tdraw(frames[0]);\n"
    "}\n"
    "function search_prompt() {\n"
    "\tif (searching)\n"
    "\t\treturn reset_search();\n"
    "\tvar term = prompt(\"Search frames (regular expression):\", \"\");\n"
    "\tif (term)\n"
    "\t\tsearch(term);\n"
    "}\n"
    "function search(term) {\n"
    "\tvar re, hits = [], sum = 0, end = -1;\n"
    "\ttry {\n"
    "\t\tre = new RegExp(term);\n"
    "\t} catch (e) {\n"
    "\t\talert(\"not a regular expression: \" + e.message);\n"
    "\t\treturn;\n"
    "\t}\n"
    "\tframes.forEach(function (f) {\n"
    "\t\tvar hit = f.d > 0 && re.test(f.name);\n"
    "\t\tf.rect.setAttribute(\"fill\", hit ? \"rgb(230,0,230)\" : f.fill);\n"
    "\t\tif (hit)\n"
    "\t\t\thits.push(f);\n"
    "\t});\n"
    "\t/* frames nest or are disjoint: count a hit inside a counted one once */\n"
    "\thits.sort(function (a, b) { return a.x - b.x || b.n - a.n; });\n"
    "\thits.forEach(function (f) {\n"
    "\t\tif (f.x >= end) {\n"
    "\t\t\tsum += f.n;\n"
    "\t\t\tend = f.x + f.n;\n"
    "\t\t}\n"
    "\t});\n"
    "\tsearching = true;\n"
    "\tsearchbtn.firstChild.nodeValue = \"Reset Search\";\n"
    "\tmatched.nodeValue = \"Matched: \" + (total ? 100 * sum / total : 0).toFixed(2) + \"%\";\n"
    "}\n"
    "function reset_search() {\n"
    "\tsearching = false;\n"
    "\tframes.forEach(function (f) { f.rect.setAttribute(\"fill\", f.fill); });\n"
    "\tsearchbtn.firstChild.nodeValue = \"Search\";\n"
    "\tmatched.nodeValue = \" \";\n"
    "}\n";

struct svg_ctx {
	struct stacks *st;
	const char *what;
	FILE *out;
	double px_per_ns;
	unsigned int max_depth;
	int height;
};

/* Characters of s, counting an invalid byte as one (it prints as U+FFFD). */
static size_t utf8_chars(const char *s)
{
	size_t n = 0, len;

	for (const unsigned char *p = (const unsigned char *)s; *p; p += len ? len : 1, n++)
		len = utf8_seq_len(p);
	return n;
}

/*
 * s as XML character data, at most max characters ("..": cut). Control
 * characters and invalid UTF-8 would make the whole file unreadable to an
 * XML parser: they become ' ' and U+FFFD.
 */
static void svg_text(FILE *out, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = utf8_chars(s), len;

	if (n > max && max < 3)
		return; /* not one character and the ".." */
	if (n > max)
		max -= 2;
	for (size_t i = 0; *p && i < max; i++, p += len ? len : 1) {
		len = utf8_seq_len(p);
		if (!len)
			fputs(UTF8_REPLACEMENT, out);
		else if (*p == '&')
			fputs("&amp;", out);
		else if (*p == '<')
			fputs("&lt;", out);
		else if (*p == '>')
			fputs("&gt;", out);
		else if (*p < 0x20)
			fputc(' ', out);
		else
			fwrite(p, 1, len, out);
	}
	if (n > max && *p)
		fputs("..", out);
}

/* A stable color per name; the palette tells the kind of frame. */
static void svg_color(FILE *out, enum stacks_kind kind, const char *name)
{
	uint32_t h = 2166136261u;
	double v1, v2, v3;

	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	v1 = (h & 0xff) / 255.0;
	v2 = (h >> 8 & 0xff) / 255.0;
	v3 = (h >> 16 & 0xff) / 255.0;
	if (kind == STACKS_KIND_UNRESOLVED)
		fprintf(out, "rgb(%d,%d,%d)", 180 + (int)(40 * v1), 180 + (int)(40 * v1),
			180 + (int)(40 * v1));
	else if (kind == STACKS_KIND_PYTHON)
		fprintf(out, "rgb(%d,%d,%d)", 205 + (int)(50 * v3), (int)(230 * v1),
			(int)(55 * v2));
	else if (kind == STACKS_KIND_OP)
		fprintf(out, "rgb(%d,%d,%d)", 50 + (int)(60 * v1), 165 + (int)(55 * v2),
			165 + (int)(55 * v2));
	else if (kind == STACKS_KIND_KERNEL)
		fprintf(out, "rgb(%d,%d,%d)", 40 + (int)(50 * v1), 170 + (int)(70 * v2),
			40 + (int)(50 * v3));
	else
		fprintf(out, "rgb(%d,%d,%d)", 200 + (int)(55 * v1), 200 + (int)(55 * v1),
			(int)(90 * v2));
}

/* A weight in the unit that reads best: ns, µs, ms or s with three decimals. */
static void svg_time(FILE *out, uint64_t ns)
{
	if (ns < 1000)
		fprintf(out, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		fprintf(out, "%.3f \xc2\xb5s", ns / 1e3);
	else if (ns < 1000000000)
		fprintf(out, "%.3f ms", ns / 1e6);
	else
		fprintf(out, "%.3f s", ns / 1e9);
}

/*
 * The label in a frame's box: a GPU frame that does not fit loses its
 * "[gpu] " prefix first (its color says it is one), so that the kernel's
 * name shows rather than "[gpu]..". The hover title keeps the whole name.
 */
static const char *svg_label(const char *name, double fits)
{
	static const char gpu[] = "[gpu] ";

	if (!strncmp(name, gpu, sizeof(gpu) - 1) && utf8_chars(name) > fits)
		return name + sizeof(gpu) - 1;
	return name;
}

static void svg_frame(struct svg_ctx *c, uint32_t node, unsigned int depth, uint64_t x_ns)
{
	const struct stacks_node *n = &c->st->nodes[node];
	char cut[STACKS_CUT_NAME_LEN];
	const char *name = node == STACKS_ROOT ? "all" : stacks__node_name(c->st, node, cut);
	uint64_t total = c->st->nodes[STACKS_ROOT].total;
	int y = c->height - SVG_BOTTOM - (int)(depth + 1) * SVG_FRAME_H;
	double x = SVG_XPAD + x_ns * c->px_per_ns, w = n->total * c->px_per_ns, fits;

	/* "all" spans the width even when there is nothing to weigh */
	if (node == STACKS_ROOT)
		w = SVG_W - 2 * SVG_XPAD;
	fits = (w - 6) / SVG_FONT_W;

	fprintf(c->out,
		"<g class=\"f\" data-x=\"%" PRIu64 "\" data-n=\"%" PRIu64 "\" data-d=\"%u\">", x_ns,
		n->total, depth);
	fputs("<title>", c->out);
	svg_text(c->out, name, SIZE_MAX);
	fputs(" (", c->out);
	svg_time(c->out, n->total);
	fprintf(c->out, ", %.2f%%)</title>", total ? n->total * 100.0 / total : 100.0);
	fprintf(c->out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"", x, y, w,
		SVG_FRAME_H - 1);
	svg_color(c->out, stacks__kind(c->st, node == STACKS_ROOT ? 0 : n->frame), name);
	fprintf(c->out, "\" rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.1f\">", x + 3, y + 10.5);
	svg_text(c->out, svg_label(name, fits), fits >= 3 ? (size_t)fits : 0);
	fputs("</text></g>\n", c->out);
}

/*
 * Depth-first, children left to right by name, in a loop (no C recursion as
 * deep as the trie); emit = false only measures.
 */
static int svg_walk(struct svg_ctx *c, bool emit)
{
	const struct stacks_node *nodes = c->st->nodes;
	uint64_t *xs = NULL, x = 0; /* xs[d]: x of the open node at level d */
	size_t xs_cap = 0;
	uint32_t node = STACKS_ROOT;
	unsigned int d = 0;

	for (;;) {
		if (node == STACKS_ROOT || nodes[node].total * c->px_per_ns >= SVG_MIN_PX) {
			if (d > c->max_depth)
				c->max_depth = d;
			if (emit)
				svg_frame(c, node, d, x);
			if (nodes[node].child != STACKS_NONE) {
				if (array_grow((void **)&xs, &xs_cap, d + 1, sizeof(*xs))) {
					free(xs);
					return -ENOMEM;
				}
				xs[d++] = x;
				node = nodes[node].child;
				continue;
			}
		}
		/* on to the next sibling, of this node or of the nearest ancestor */
		for (;;) {
			if (node == STACKS_ROOT) {
				free(xs);
				return 0;
			}
			x += nodes[node].total;
			if (nodes[node].sibling != STACKS_NONE) {
				node = nodes[node].sibling;
				break;
			}
			node = nodes[node].parent;
			x = xs[--d];
		}
	}
}

static void svg_head(struct svg_ctx *c, const char *title)
{
	FILE *out = c->out;

	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"onload=\"init(evt)\" data-total=\"%" PRIu64 "\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style type=\"text/css\">\n"
		"text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
		"#title { text-anchor: middle; font-size: 17px; }\n"
		"#subtitle { text-anchor: middle; fill: rgb(80,80,80); }\n"
		"#search, #matched { text-anchor: end; }\n"
		"#search, #reset { cursor: pointer; }\n"
		"#search:hover, #reset:hover { opacity: 0.7; }\n"
		".f:hover rect { stroke: black; stroke-width: 0.5; cursor: pointer; }\n"
		"</style>\n"
		"<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n",
		SVG_W, c->height, SVG_W, c->height, c->st->nodes[STACKS_ROOT].total, svg_script);
	fprintf(out,
		"<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"rgb(245,245,235)\"/>\n",
		SVG_W, c->height);
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"24\">Flame Graph: %s</text>\n", SVG_W / 2,
		c->what);
	fprintf(out, "<text id=\"subtitle\" x=\"%d\" y=\"44\">", SVG_W / 2);
	svg_text(out, title, SIZE_MAX);
	fprintf(out, "</text>\n");
	fprintf(out,
		"<text id=\"reset\" x=\"%d\" y=\"24\" style=\"display:none\">Reset Zoom</text>\n",
		SVG_XPAD);
	fprintf(out, "<text id=\"search\" x=\"%d\" y=\"24\">Search</text>\n", SVG_W - SVG_XPAD);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", SVG_XPAD, c->height - 12);
	fprintf(out, "<text id=\"matched\" x=\"%d\" y=\"%d\"> </text>\n", SVG_W - SVG_XPAD,
		c->height - 12);
}

int stacks__write_svg(struct stacks *st, FILE *out, const char *what, const char *title)
{
	struct svg_ctx c = {.st = st, .what = what, .out = out};
	int err;

	err = stacks__sort(st);
	if (err)
		return err;
	stacks__totals(st);
	if (st->nodes[STACKS_ROOT].total)
		c.px_per_ns = (double)(SVG_W - 2 * SVG_XPAD) / st->nodes[STACKS_ROOT].total;
	err = svg_walk(&c, false);
	if (err)
		return err;
	c.height = SVG_TOP + (int)(c.max_depth + 1) * SVG_FRAME_H + SVG_BOTTOM;
	if (!st->nodes[STACKS_ROOT].total)
		c.px_per_ns = 0;
	svg_head(&c, title);
	fputs("<g id=\"frames\">\n", out);
	err = svg_walk(&c, true);
	fputs("</g>\n</svg>\n", out);
	return err;
}
