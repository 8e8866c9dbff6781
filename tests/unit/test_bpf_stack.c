// SPDX-License-Identifier: MIT
/*
 * No BPF program may rely on a private stack (issue 33). Kernels before 6.13
 * refuse a program whose call chain (main program, the subprograms it calls,
 * bpf_loop callbacks and global __noinline functions included) has more than
 * 512 bytes of stack in all; newer ones may give a uprobe program a stack of
 * its own and then take more, which hides the bug on the machine that tests.
 *
 * So every program of every object (build/bpf/NAME.bpf.o: the folders and
 * objects named as arguments, or $PTG_BPF_DIR) is loaded here, alone, with
 * the verifier's statistics ("stack depth A+B+C", one number a subprogram, in
 * subprogram order), and its call graph is rebuilt from its instructions: a
 * BPF_CALL with src_reg BPF_PSEUDO_CALL calls the subprogram at i + imm + 1,
 * and an ldimm64 with src_reg BPF_PSEUDO_FUNC (a bpf_loop callback) counts as
 * a call of the function there too; subprograms start at 0 and at every such
 * target, in order. The deepest chain, each frame rounded up to 32 bytes as
 * kernels before 6.8 and the interpreter do (round_up(max(depth, 1), 32)),
 * must be within 512 bytes whatever the kernel under the test grants. A
 * program the verifier refuses fails too, with the verifier's last lines.
 *
 * Which instructions: the verifier prints its statistics last, after its
 * rewrites. When it refused the program, that is before any, and the depths
 * are those of libbpf's instructions (bpf_program__insns()). When it took it,
 * it had dropped the subprograms it never reached (with the all-zero .rodata
 * of a bare object: whatever a const volatile turns off) and given one whose
 * bpf_loop it inlined 24 bytes more (the loop's spills, added after the stack
 * check). So the depths come from the program as the kernel holds it (its
 * xlated instructions, where a call's target is i + off + 1, its subprograms
 * named by their BTF), an inlined bpf_loop (its opening "if r1 <= 0x800000
 * goto +2; w0 = -E2BIG") taken off again; and the chains from libbpf's
 * instructions, as the stack check walked them, a subprogram never reached
 * counted at depth 0 as it was there. Names of libbpf's subprograms come from
 * the object's .text symbols.
 *
 * What it cannot see: a subprogram that the all-zero .rodata leaves
 * unreached may use more stack with the loader's .rodata; and kernels since
 * 6.12 drop spills around bpf_fastcall helpers before the stack check, which
 * older ones count (a clang that knows bpf_fastcall emits them on purpose;
 * clang 14 does not).
 *
 *   test_bpf_stack [DIR|OBJ.bpf.o]...     (default $PTG_BPF_DIR)
 *
 * Needs root and bpf(): exits 77 (skipped) otherwise. A program the kernel
 * cannot take at all (a program type or an attach target it lacks) is
 * reported as skipped, not passed. PTG_BPF_STACK_DEBUG=1 shows libbpf's
 * messages and each call graph.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "test.h"

#define STACK_LIMIT	512	  /* MAX_BPF_STACK */
#define MAX_SUBPROGS	256	  /* BPF_MAX_SUBPROGS */
#define MAX_FRAMES	8	  /* MAX_CALL_FRAMES */
#define BPF_LOOP_SPILLS 24	  /* inline_bpf_loop(): r6-r8 */
#define BPF_LOOP_MAX	(1 << 23) /* BPF_MAX_LOOPS */
#define STATS_LOG_LEN	(1 << 20)
#define FULL_LOG_LEN	(64 << 20)
#define LAST_LINES	20

static int nr_passed, nr_failed, nr_skipped;
static bool debug;

/* libbpf's own messages: kept (the last few KiB) to say why a load failed;
 * printed as they come with PTG_BPF_STACK_DEBUG set. */
static char libbpf_msgs[8192];

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[1024];
	size_t have, add;

	if (debug) {
		va_list aq;

		va_copy(aq, ap);
		vfprintf(stderr, fmt, aq);
		va_end(aq);
	}
	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	have = strlen(libbpf_msgs);
	add = strlen(line);
	if (have + add >= sizeof(libbpf_msgs)) {
		libbpf_msgs[0] = '\0';
		have = 0;
	}
	memcpy(libbpf_msgs + have, line, add + 1);
	return 0;
}

/* Prints the last n lines of text, each indented. */
static void print_last_lines(const char *text, int n)
{
	const char *p = text + strlen(text), *end;

	while (p > text && p[-1] == '\n')
		p--;
	end = p;
	for (int lines = 0; p > text; p--)
		if (p[-1] == '\n' && ++lines == n)
			break;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		printf("    | %.*s\n", (int)len, p);
		p += len + (nl ? 1 : 0);
	}
}

/* "stack depth 424+0+32": the numbers, in subprogram order; -1 if absent. */
static int parse_stack_depths(const char *log, int *depth, int max)
{
	const char *p = NULL, *q = log;
	int n = 0;

	while ((q = strstr(q, "stack depth ")) != NULL) {
		if (q == log || q[-1] == '\n')
			p = q;
		q++;
	}
	if (!p)
		return -1;
	p += strlen("stack depth ");
	for (;;) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p || n == max)
			return -1;
		depth[n++] = (int)v;
		if (*end != '+')
			return n;
		p = end + 1;
	}
}

static int round_up(int v, int to)
{
	return (v + to - 1) / to * to;
}

/* A frame as kernels before 6.8 (and the interpreter) count it. */
static int frame32(int depth)
{
	return round_up(depth > 1 ? depth : 1, 32);
}

/* A frame as later kernels count it when the program is JITed. */
static int frame16(int depth)
{
	return round_up(depth, 16);
}

struct callgraph {
	int nr;			     /* subprograms */
	int start[MAX_SUBPROGS];     /* first instruction of each */
	int nr_calls[MAX_SUBPROGS];  /* calls (and callback references) from each */
	int *calls[MAX_SUBPROGS];    /* their callees */
	bool callback[MAX_SUBPROGS]; /* referenced by an ldimm64 (bpf_loop & co) */
	const char *error;	     /* why no graph could be built */
};

static bool is_call(const struct bpf_insn *in)
{
	return in->code == (BPF_JMP | BPF_CALL) && in->src_reg == BPF_PSEUDO_CALL;
}

static bool is_func_ref(const struct bpf_insn *in)
{
	return in->code == (BPF_LD | BPF_IMM | BPF_DW) && in->src_reg == BPF_PSEUDO_FUNC;
}

/*
 * Where a call or callback reference at i goes. In libbpf's instructions
 * both hold the distance in imm; in the kernel's (xlated) ones a call holds it
 * in off (imm is the callee's index, or the interpreter's helper).
 */
static int target(const struct bpf_insn *insn, int i, bool xlated)
{
	return i + (xlated && is_call(&insn[i]) ? insn[i].off : insn[i].imm) + 1;
}

static int subprog_of(const struct callgraph *g, int insn)
{
	int lo = 0, hi = g->nr - 1;

	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;

		if (g->start[mid] <= insn)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static int subprog_end(const struct callgraph *g, int sub, int cnt)
{
	return sub + 1 < g->nr ? g->start[sub + 1] : cnt;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void build_callgraph(struct callgraph *g, const struct bpf_insn *insn, int cnt, bool xlated)
{
	memset(g, 0, sizeof(*g));
	g->start[g->nr++] = 0;
	for (int i = 0; i < cnt; i++) {
		if (is_call(&insn[i]) || is_func_ref(&insn[i])) {
			int t = target(insn, i, xlated), k;

			if (t < 0 || t >= cnt) {
				g->error = "a call out of the program";
				return;
			}
			for (k = 0; k < g->nr && g->start[k] != t; k++)
				;
			if (k == g->nr) {
				if (g->nr == MAX_SUBPROGS) {
					g->error = "too many subprograms";
					return;
				}
				g->start[g->nr++] = t;
			}
		}
		if (insn[i].code == (BPF_LD | BPF_IMM | BPF_DW))
			i++; /* the second half of ldimm64 */
	}
	qsort(g->start, (size_t)g->nr, sizeof(g->start[0]), cmp_int);
	for (int i = 0; i < cnt; i++) {
		if (is_call(&insn[i]) || is_func_ref(&insn[i])) {
			int s = subprog_of(g, i), t = subprog_of(g, target(insn, i, xlated));
			int *calls =
			    realloc(g->calls[s], (size_t)(g->nr_calls[s] + 1) * sizeof(int));

			if (!calls) {
				g->error = "out of memory";
				return;
			}
			calls[g->nr_calls[s]++] = t;
			g->calls[s] = calls;
			if (is_func_ref(&insn[i]))
				g->callback[t] = true;
		}
		if (insn[i].code == (BPF_LD | BPF_IMM | BPF_DW))
			i++;
	}
}

static void free_callgraph(struct callgraph *g)
{
	for (int i = 0; i < g->nr; i++)
		free(g->calls[i]);
}

/* A bpf_loop the verifier inlined (inline_bpf_loop()) within [from, to). */
static bool has_inlined_loop(const struct bpf_insn *insn, int from, int to)
{
	for (int i = from; i + 1 < to; i++)
		if (insn[i].code == (BPF_JMP | BPF_JLE | BPF_K) && insn[i].dst_reg == BPF_REG_1 &&
		    insn[i].imm == BPF_LOOP_MAX && insn[i].off == 2 &&
		    insn[i + 1].code == (BPF_ALU | BPF_MOV | BPF_K) &&
		    insn[i + 1].dst_reg == BPF_REG_0 && insn[i + 1].imm == -E2BIG)
			return true;
	return false;
}

/*
 * Names of libbpf's subprograms, for the report: the object's .text
 * functions, matched by length and opcodes (libbpf appends them whole,
 * changing only immediates, map references and CO-RE offsets). Unnamed
 * where none or several match.
 */
struct textfns {
	int nr;
	struct {
		char name[64];
		const struct bpf_insn *insn;
		int cnt;
	} fn[MAX_SUBPROGS];
	struct bpf_insn *text;
};

static void read_textfns(const char *path, struct textfns *t)
{
	Elf_Scn *scn = NULL, *text_scn = NULL, *sym_scn = NULL;
	size_t shstrndx, text_ndx = 0, text_cnt = 0;
	GElf_Shdr sh, sym_sh = {0};
	Elf_Data *data;
	Elf *elf;
	int fd;

	memset(t, 0, sizeof(*t));
	if (elf_version(EV_CURRENT) == EV_NONE || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		goto out;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sh.sh_type == SHT_SYMTAB) {
			sym_scn = scn;
			sym_sh = sh;
		} else if (name && strcmp(name, ".text") == 0 && sh.sh_type == SHT_PROGBITS) {
			text_scn = scn;
			text_ndx = elf_ndxscn(scn);
		}
	}
	if (!text_scn || !sym_scn || !(data = elf_getdata(text_scn, NULL)) || !data->d_buf)
		goto out;
	text_cnt = data->d_size / sizeof(struct bpf_insn);
	t->text = malloc(data->d_size ? data->d_size : 1);
	if (!t->text)
		goto out;
	memcpy(t->text, data->d_buf, data->d_size);
	data = elf_getdata(sym_scn, NULL);
	for (size_t i = 0; data && sym_sh.sh_entsize && i < sym_sh.sh_size / sym_sh.sh_entsize;
	     i++) {
		GElf_Sym sym;
		const char *name;
		size_t first, cnt;

		if (!gelf_getsym(data, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx != text_ndx || t->nr == MAX_SUBPROGS)
			continue;
		name = elf_strptr(elf, sym_sh.sh_link, sym.st_name);
		first = sym.st_value / sizeof(struct bpf_insn);
		cnt = sym.st_size / sizeof(struct bpf_insn);
		if (!name || !cnt || first + cnt > text_cnt)
			continue;
		snprintf(t->fn[t->nr].name, sizeof(t->fn[0].name), "%s", name);
		t->fn[t->nr].insn = t->text + first;
		t->fn[t->nr].cnt = (int)cnt;
		t->nr++;
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
}

static bool same_shape(const struct bpf_insn *a, const struct bpf_insn *b, int cnt)
{
	for (int i = 0; i < cnt; i++) {
		if (a[i].code != b[i].code || a[i].dst_reg != b[i].dst_reg)
			return false;
		/* jumps keep their offsets; memory accesses may be CO-RE-relocated */
		if (BPF_CLASS(a[i].code) == BPF_JMP || BPF_CLASS(a[i].code) == BPF_JMP32) {
			if (a[i].off != b[i].off || a[i].src_reg != b[i].src_reg)
				return false;
		}
		if (a[i].code == (BPF_LD | BPF_IMM | BPF_DW))
			i++;
	}
	return true;
}

static const char *textfn_name(const struct textfns *t, const struct bpf_insn *insn, int cnt)
{
	const char *found = NULL;

	for (int i = 0; t && i < t->nr; i++) {
		if (t->fn[i].cnt != cnt || !same_shape(insn, t->fn[i].insn, cnt))
			continue;
		if (found)
			return NULL;
		found = t->fn[i].name;
	}
	return found;
}

/* The program as the kernel holds it: instructions and subprograms' BTF ids. */
struct xlated {
	struct bpf_insn *insn;
	int cnt;
	struct bpf_func_info *func;
	int nr_func;
};

static int get_xlated(int fd, struct xlated *x)
{
	struct bpf_prog_info info = {0};
	__u32 len = sizeof(info), insn_len, nr_func;

	memset(x, 0, sizeof(*x));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	insn_len = info.xlated_prog_len;
	nr_func = info.nr_func_info;
	if (!insn_len)
		return -EPERM; /* not shown to us (kernel.kptr_restrict?) */
	x->insn = malloc(insn_len);
	x->func = calloc(nr_func ? nr_func : 1, sizeof(*x->func));
	if (!x->insn || !x->func)
		return -ENOMEM;
	memset(&info, 0, sizeof(info));
	info.xlated_prog_len = insn_len;
	info.xlated_prog_insns = (__u64)(unsigned long)x->insn;
	info.nr_func_info = nr_func;
	info.func_info_rec_size = sizeof(*x->func);
	info.func_info = (__u64)(unsigned long)x->func;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	x->cnt = (int)(insn_len / sizeof(struct bpf_insn));
	x->nr_func = (int)nr_func;
	return 0;
}

static void free_xlated(struct xlated *x)
{
	free(x->insn);
	free(x->func);
}

struct chain {
	int nr;
	int sub[MAX_FRAMES + 1];
};

struct walk {
	const struct callgraph *g;
	const int *depth; /* as the stack check saw them */
	struct chain path;
	struct chain deepest; /* by 32-byte frames */
	int deepest32, deepest16;
	/* the verifier's "combined stack size of N calls is M": a chain of N
	 * frames that sums to M under one of the two roundings */
	int verifier_calls, verifier_size;
	bool verifier_matched;
	bool too_deep; /* more than MAX_FRAMES frames, or recursion */
};

static void walk(struct walk *w, int sub, int sum32, int sum16)
{
	const struct callgraph *g = w->g;

	for (int i = 0; i < w->path.nr; i++)
		if (w->path.sub[i] == sub) {
			w->too_deep = true; /* recursion: the verifier refuses it */
			return;
		}
	if (w->path.nr == MAX_FRAMES) {
		w->too_deep = true;
		return;
	}
	w->path.sub[w->path.nr++] = sub;
	sum32 += frame32(w->depth[sub]);
	sum16 += frame16(w->depth[sub]);
	if (w->path.nr == w->verifier_calls &&
	    (sum16 == w->verifier_size || sum32 == w->verifier_size))
		w->verifier_matched = true;
	if (sum32 > w->deepest32) {
		w->deepest32 = sum32;
		w->deepest = w->path;
	}
	if (sum16 > w->deepest16)
		w->deepest16 = sum16;
	for (int i = 0; i < g->nr_calls[sub]; i++)
		walk(w, g->calls[sub][i], sum32, sum16);
	w->path.nr--;
}

/* Opens the object with only prog_name to load, maps sized 0 given a size. */
static struct bpf_object *open_one(const char *path, const char *prog_name,
				   struct bpf_program **prog)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_program *p;
	struct bpf_map *m;

	if (!obj)
		return NULL;
	*prog = NULL;
	bpf_object__for_each_program(p, obj)
	{
		bool me = strcmp(bpf_program__name(p), prog_name) == 0;

		bpf_program__set_autoload(p, me);
		if (me)
			*prog = p;
	}
	/* sized by the loader at run time: any size verifies the same */
	bpf_object__for_each_map(m, obj)
	{
		if (bpf_map__max_entries(m) != 0)
			continue;
		if (bpf_map__type(m) == BPF_MAP_TYPE_RINGBUF ||
		    bpf_map__type(m) == BPF_MAP_TYPE_USER_RINGBUF)
			bpf_map__set_max_entries(m, (__u32)sysconf(_SC_PAGESIZE));
		else if (bpf_map__type(m) != BPF_MAP_TYPE_PERF_EVENT_ARRAY)
			bpf_map__set_max_entries(m, 1);
	}
	return obj;
}

/* Loads prog_name of path at log_level into log; 0 or a negative errno. */
static int load_one(const char *path, const char *prog_name, __u32 log_level, char *log,
		    size_t log_len, struct bpf_object **objp, struct bpf_program **progp)
{
	struct bpf_program *prog;
	struct bpf_object *obj;

	libbpf_msgs[0] = '\0';
	log[0] = '\0';
	*objp = NULL;
	*progp = NULL;
	obj = open_one(path, prog_name, &prog);
	if (!obj)
		return -errno;
	*objp = obj;
	if (!prog)
		return -ENOENT;
	*progp = prog;
	bpf_program__set_log_level(prog, log_level);
	bpf_program__set_log_buf(prog, log, log_len);
	return bpf_object__load(obj);
}

static void report_load_failure(const char *label, const char *path, const char *prog_name, int err,
				const char *stats_log)
{
	static char *full;
	struct bpf_object *obj;
	struct bpf_program *prog;

	printf("  %s: load failed: %s (%d)\n", label, strerror(-err), err);
	if (!full)
		full = malloc(FULL_LOG_LEN);
	/* again with the verifier's trace, for the instructions before the end */
	if (full) {
		load_one(path, prog_name, 1 | 4, full, FULL_LOG_LEN, &obj, &prog);
		bpf_object__close(obj);
	}
	if (full && full[0]) {
		printf("  verifier's last lines:\n");
		print_last_lines(full, LAST_LINES);
	} else if (stats_log[0]) {
		printf("  verifier's log:\n");
		print_last_lines(stats_log, LAST_LINES);
	} else if (libbpf_msgs[0]) {
		printf("  libbpf said:\n");
		print_last_lines(libbpf_msgs, LAST_LINES);
	}
}

/* What the stack check saw of one program: its call graph and its depths. */
struct view {
	struct callgraph g;
	int depth[MAX_SUBPROGS];    /* as the stack check saw them */
	int logged[MAX_SUBPROGS];   /* as the verifier's statistics give them */
	bool inlined[MAX_SUBPROGS]; /* a bpf_loop inlined there (24 bytes more) */
	bool dropped[MAX_SUBPROGS]; /* never reached, dropped after the stack check */
	const char *name[MAX_SUBPROGS];
	int nr_dropped;
	bool unplaced; /* dropped ones not told apart: the kernel's graph, without them */
};

static void mismatch(struct view *v, const char *which, int nr_logged)
{
	static char why[128];

	snprintf(why, sizeof(why),
		 "%d subprograms in the %s instructions, %d stack depths in the log", v->g.nr,
		 which, nr_logged);
	v->g.error = why;
}

/* The program refused: libbpf's instructions, which the verifier never rewrote. */
static void view_refused(struct view *v, struct bpf_program *prog, const char *prog_name,
			 const struct textfns *t, const int *logged, int nr_logged)
{
	const struct bpf_insn *insn = bpf_program__insns(prog);
	int cnt = (int)bpf_program__insn_cnt(prog);

	build_callgraph(&v->g, insn, cnt, false);
	if (!v->g.error && v->g.nr != nr_logged)
		mismatch(v, "libbpf", nr_logged);
	for (int i = 0; !v->g.error && i < v->g.nr; i++) {
		int from = v->g.start[i], to = subprog_end(&v->g, i, cnt);

		v->name[i] = i ? textfn_name(t, insn + from, to - from) : prog_name;
		v->depth[i] = v->logged[i] = logged[i];
	}
}

/*
 * The program taken: the kernel's (xlated) instructions, after the verifier's
 * rewrites, give the depths; libbpf's, by the subprograms' names, the graph
 * the stack check walked, with those never reached (depth 0) in it.
 */
static void view_loaded(struct view *v, struct bpf_object *obj, struct bpf_program *prog,
			const char *prog_name, const struct textfns *t, const int *logged,
			int nr_logged)
{
	const struct bpf_insn *insn = bpf_program__insns(prog);
	int cnt = (int)bpf_program__insn_cnt(prog);
	const struct btf *btf = bpf_object__btf(obj);
	static struct callgraph before;
	static struct view after;
	int to_before[MAX_SUBPROGS];
	bool placed = true;
	struct xlated x;

	memset(&after, 0, sizeof(after));
	if (get_xlated(bpf_program__fd(prog), &x)) {
		v->g.error = "no xlated instructions from the kernel";
		free_xlated(&x);
		return;
	}
	build_callgraph(&after.g, x.insn, x.cnt, true);
	if (!after.g.error && x.nr_func && x.nr_func != after.g.nr)
		after.g.error = "the kernel's subprograms are not the calls' targets";
	if (!after.g.error && after.g.nr != nr_logged)
		mismatch(&after, "xlated", nr_logged);
	for (int j = 0; !after.g.error && j < after.g.nr; j++) {
		int from = after.g.start[j], to = subprog_end(&after.g, j, x.cnt);

		after.logged[j] = logged[j];
		after.inlined[j] = has_inlined_loop(x.insn, from, to);
		after.depth[j] = logged[j];
		if (after.inlined[j])
			after.depth[j] =
			    logged[j] > BPF_LOOP_SPILLS ? logged[j] - BPF_LOOP_SPILLS : 0;
		after.name[j] = j ? NULL : prog_name;
		if (j && btf && x.nr_func == after.g.nr && (int)x.func[j].insn_off == from) {
			const struct btf_type *bt = btf__type_by_id(btf, x.func[j].type_id);

			after.name[j] = bt ? btf__name_by_offset(btf, bt->name_off) : NULL;
		}
	}
	free_xlated(&x);
	if (after.g.error) {
		*v = after;
		return;
	}

	build_callgraph(&before, insn, cnt, false);
	placed = !before.error && before.nr >= after.g.nr;
	for (int j = 0; placed && j < after.g.nr; j++) {
		to_before[j] = -1;
		for (int i = 0; i < before.nr; i++) {
			int from = before.start[i], to = subprog_end(&before, i, cnt);
			const char *name = i ? textfn_name(t, insn + from, to - from) : prog_name;

			if (!name || !after.name[j] || strcmp(name, after.name[j]) != 0)
				continue;
			if (to_before[j] >= 0)
				placed = false; /* two of that name */
			to_before[j] = i;
		}
		for (int k = 0; k < j; k++)
			if (to_before[k] == to_before[j])
				placed = false;
		if (to_before[j] < 0)
			placed = false;
	}
	if (!placed) {
		*v = after;
		v->nr_dropped = before.error ? 0 : before.nr - after.g.nr;
		v->unplaced = v->nr_dropped > 0;
		free_callgraph(&before);
		return;
	}
	memset(v, 0, sizeof(*v));
	v->g = before;
	for (int i = 0; i < before.nr; i++) {
		int from = before.start[i], to = subprog_end(&before, i, cnt);

		v->name[i] = i ? textfn_name(t, insn + from, to - from) : prog_name;
		v->dropped[i] = true;
	}
	for (int j = 0; j < after.g.nr; j++) {
		int i = to_before[j];

		v->dropped[i] = false;
		v->depth[i] = after.depth[j];
		v->logged[i] = after.logged[j];
		v->inlined[i] = after.inlined[j];
	}
	for (int i = 0; i < before.nr; i++)
		v->nr_dropped += v->dropped[i];
	free_callgraph(&after.g);
}

static void print_graph(const struct view *v)
{
	for (int i = 0; i < v->g.nr; i++) {
		printf("    #%d %s at %d, depth %d%s%s%s, calls", i, v->name[i] ?: "?",
		       v->g.start[i], v->logged[i], v->inlined[i] ? " (bpf_loop inlined)" : "",
		       v->g.callback[i] ? " (callback)" : "",
		       v->dropped[i] ? " (never reached)" : "");
		for (int k = 0; k < v->g.nr_calls[i]; k++)
			printf(" #%d", v->g.calls[i][k]);
		printf("\n");
	}
}

/* Checks one program of one object. */
static void check_prog(const char *path, const char *obj_name, const char *prog_name,
		       enum bpf_prog_type type, const struct textfns *t)
{
	static char log[STATS_LOG_LEN];
	static struct view v;
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct walk w = {0};
	char label[256];
	bool loads_within_512 = false;
	int logged[MAX_SUBPROGS], nr_logged, err;
	const char *m;

	snprintf(label, sizeof(label), "%.120s/%.120s", obj_name, prog_name);
	memset(&v, 0, sizeof(v));
	err = load_one(path, prog_name, 4 /* BPF_LOG_STATS */, log, sizeof(log), &obj, &prog);
	if (err && !log[0]) {
		/* the kernel never saw it: libbpf could not prepare it here */
		const char *why = NULL;

		if (err == -ESRCH)
			why = "its attach target is not in this kernel";
		else if (libbpf_probe_bpf_prog_type(type, NULL) == 0)
			why = "this kernel has no such program type";
		if (why) {
			nr_skipped++;
			printf("%s: SKIP (%s, %s: %s)\n", label, why,
			       libbpf_bpf_prog_type_str(type) ?: "?", strerror(-err));
			if (libbpf_msgs[0])
				print_last_lines(libbpf_msgs, 4);
			bpf_object__close(obj);
			return;
		}
	}
	if (!prog) {
		printf("%s: cannot open: %s  FAIL\n", label, strerror(-err));
		print_last_lines(libbpf_msgs, LAST_LINES);
		bpf_object__close(obj);
		goto verdict;
	}

	nr_logged = parse_stack_depths(log, logged, MAX_SUBPROGS);
	if (nr_logged < 0)
		; /* no statistics */
	else if (err)
		view_refused(&v, prog, prog_name, t, logged, nr_logged);
	else
		view_loaded(&v, obj, prog, prog_name, t, logged, nr_logged);
	if (debug && !v.g.error) {
		printf("%s: call graph of the %s instructions:\n", label,
		       err || !v.unplaced ? "libbpf" : "xlated");
		print_graph(&v);
	}
	if (nr_logged < 0) {
		printf("%s: no \"stack depth\" in the verifier's log  FAIL\n", label);
	} else if (v.g.error) {
		printf("%s: no call graph: %s  FAIL\n", label, v.g.error);
	} else {
		w.g = &v.g;
		w.depth = v.depth;
		m = strstr(log, "combined stack size of ");
		if (m && sscanf(m, "combined stack size of %d calls is %d", &w.verifier_calls,
				&w.verifier_size) != 2)
			w.verifier_calls = 0;
		walk(&w, 0, 0, 0);
		loads_within_512 = !err && !w.too_deep && w.deepest32 <= STACK_LIMIT;
		printf("%s: ", label);
		for (int i = 0; i < w.deepest.nr; i++)
			printf("%s%d", i ? "+" : "", frame32(v.depth[w.deepest.sub[i]]));
		printf(" = %d %s %d  %s\n", w.deepest32,
		       w.deepest32 > STACK_LIMIT ? ">" : "<=", STACK_LIMIT,
		       loads_within_512 ? "ok" : "FAIL");
		if (w.deepest.nr > 1 || w.deepest32 > STACK_LIMIT) {
			printf("  chain (#subprogram name: stack depth -> 32-byte frame):");
			for (int i = 0; i < w.deepest.nr; i++) {
				int s = w.deepest.sub[i];

				printf("%s #%d %s%s%s: %d -> %d", i ? " >" : "", s,
				       v.name[s] ?: "?", v.g.callback[s] ? " (callback)" : "",
				       v.dropped[s] ? " (never reached)" : "", v.depth[s],
				       frame32(v.depth[s]));
			}
			printf("\n");
		}
		for (int i = 0; i < v.g.nr; i++)
			if (v.inlined[i])
				printf(
				    "  #%d %s: bpf_loop inlined, %d in the log less its %d bytes "
				    "of spills\n",
				    i, v.name[i] ?: "?", v.logged[i], BPF_LOOP_SPILLS);
		if (v.nr_dropped && v.unplaced) {
			printf(
			    "  %d subprogram(s) never reached with the object's all-zero .rodata, "
			    "dropped by the verifier: not counted (not told apart)\n",
			    v.nr_dropped);
		} else if (v.nr_dropped) {
			printf("  never reached with the object's all-zero .rodata, counted at "
			       "depth 0 as the stack check does:");
			for (int i = 0; i < v.g.nr; i++)
				if (v.dropped[i])
					printf(" #%d %s", i, v.name[i] ?: "?");
			printf("\n");
		}
		if (w.deepest32 > STACK_LIMIT || w.too_deep) {
			printf("  stack depth per subprogram, as the verifier gave them:");
			for (int i = 0; i < v.g.nr; i++)
				printf(" #%d %s=%d", i, v.name[i] ?: "?", v.logged[i]);
			printf(
			    "\n  with 16-byte frames (JIT, kernels since 6.8) the deepest is %d\n",
			    w.deepest16);
			if (w.too_deep)
				printf("  a chain deeper than %d frames, or a recursion\n",
				       MAX_FRAMES);
		}
		if (w.verifier_calls)
			printf("  verifier: \"combined stack size of %d calls is %d\": %s\n",
			       w.verifier_calls, w.verifier_size,
			       w.verifier_matched
				   ? "a chain of the call graph rebuilt here sums to that"
				   : "NO chain of the call graph rebuilt here sums to that");
	}
	free_callgraph(&v.g);
	if (err)
		report_load_failure(label, path, prog_name, err, log);
	bpf_object__close(obj);
verdict:
	if (ASSERT_TRUE(loads_within_512, label))
		nr_passed++;
	else
		nr_failed++;
}

/* Every program (not subprogram) of the object at path. */
static void check_object(const char *path)
{
	const char *base = strrchr(path, '/');
	struct bpf_object *obj;
	struct bpf_program *p;
	struct textfns *t;
	char name[256];
	char *dot;
	int n = 0;

	snprintf(name, sizeof(name), "%s", base ? base + 1 : path);
	if ((dot = strstr(name, ".bpf.o")) || (dot = strrchr(name, '.')))
		*dot = '\0';
	libbpf_msgs[0] = '\0';
	obj = bpf_object__open_file(path, NULL);
	if (!ASSERT_TRUE(obj != NULL, path)) {
		printf("%s: cannot open %s: %s  FAIL\n", name, path, strerror(errno));
		print_last_lines(libbpf_msgs, LAST_LINES);
		nr_failed++;
		return;
	}
	t = calloc(1, sizeof(*t));
	if (t)
		read_textfns(path, t);
	bpf_object__for_each_program(p, obj)
	{
		check_prog(path, name, bpf_program__name(p), bpf_program__type(p), t);
		n++;
	}
	if (!n)
		printf("%s: no programs\n", name);
	if (t)
		free(t->text);
	free(t);
	bpf_object__close(obj);
}

static void check_path(const char *path)
{
	struct stat st;
	char pattern[4096];
	glob_t gl;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(pattern, sizeof(pattern), "%s/*.bpf.o", path);
		if (!ASSERT_TRUE(glob(pattern, 0, NULL, &gl) == 0, "BPF objects built")) {
			printf("%s: no BPF objects (*.bpf.o)  FAIL\n", path);
			nr_failed++;
			return;
		}
		for (size_t i = 0; i < gl.gl_pathc; i++)
			check_object(gl.gl_pathv[i]);
		globfree(&gl);
	} else {
		check_object(path);
	}
}

int main(int argc, char **argv)
{
	struct rlimit unlimited = {RLIM_INFINITY, RLIM_INFINITY};
	const char *dir = getenv("PTG_BPF_DIR");
	int fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2 && !dir) {
		fprintf(stderr, "usage: %s DIR|OBJ.bpf.o... (or PTG_BPF_DIR=DIR)\n", argv[0]);
		return 2;
	}
	if (geteuid() != 0) {
		printf("skip: loading BPF programs needs root\n");
		return 77;
	}
	setrlimit(RLIMIT_MEMLOCK, &unlimited);
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, NULL, 4, 4, 1, NULL);
	if (fd < 0) {
		printf("skip: no bpf() here: %s\n", strerror(errno));
		return 77;
	}
	close(fd);
	dir = getenv("PTG_BPF_STACK_DEBUG");
	debug = dir && *dir && strcmp(dir, "0") != 0;
	dir = getenv("PTG_BPF_DIR");
	libbpf_set_print(libbpf_print);

	if (argc < 2)
		check_path(dir);
	for (int i = 1; i < argc; i++)
		check_path(argv[i]);
	if (nr_skipped)
		printf("%d skipped (the kernel lacks what they need)\n", nr_skipped);
	printf("%d passed, %d failed\n", nr_passed, nr_failed);
	if (!nr_passed && !nr_failed)
		return 77;
	return test_failures ? 1 : 0;
}
