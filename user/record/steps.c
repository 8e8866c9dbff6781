// SPDX-License-Identifier: MIT
/*
 * Step detection rides on the tracer's stacks: a step() frame is remembered
 * by its stack index and frame address when it starts (the outermost one of
 * its thread only), and has ended once a later event of the thread finds
 * that slot gone, be it by a return or by an exception.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/numarg.h"
#include "base/threads.h"
#include "base/u64map.h"
#include "pyinterp/pycode.h"
#include "record/steps.h"
#include "trace/slice.h"

#define STEP_SUFFIX    ".step"
#define OPTIM_DIR      "/torch/optim/"
#define SCHEDULER_FILE "/torch/optim/lr_scheduler.py"
#define SWA_FILE       "/torch/optim/swa_utils.py"

enum { ACTION_NONE, ACTION_WARMUP, ACTION_RECORD, ACTION_RECORD_AND_SAVE };

struct step_thread {
	bool active;
	uint32_t idx; /* tracer stack index of the open step() frame */
	uint64_t frame;
};

struct steps {
	struct tracer *t;
	const struct py_version_info *vi;
	int memfd;
	struct steps_opts o;
	char fn_file[PATH_MAX]; /* --step-function: file suffix ("pkg/mod.py"), "" for any */
	char fn_qualname[256];
	struct u64map codes;	/* code -> fingerprint << 32 | 1 + is_step */
	struct threads threads; /* of struct step_thread */
	uint64_t *bounds;	/* bounds[k]: start of step k; bounds[count]: end of the last */
	size_t nbounds, bounds_cap;
	uint32_t count;
	bool done;
};

static int parse_u32(const char *s, size_t len, uint32_t *out)
{
	char buf[16];
	uint64_t v;

	if (!len || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (parse_u64(buf, 0, UINT32_MAX, &v))
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int steps_parse_schedule(const char *s, struct steps_opts *o)
{
	static const char *const keys[] = {"wait", "warmup", "active", "repeat", "skip_first"};
	uint32_t *vals[] = {&o->wait, &o->warmup, &o->active, &o->repeat, &o->skip_first};
	unsigned int seen = 0;

	o->wait = o->warmup = o->active = o->repeat = o->skip_first = 0;
	while (*s) {
		const char *eq = strchr(s, '='), *end = strchrnul(s, ',');
		size_t i;

		if (!eq || eq > end)
			return -EINVAL;
		for (i = 0; i < 5; i++) {
			if (strlen(keys[i]) == (size_t)(eq - s) && !strncmp(s, keys[i], eq - s))
				break;
		}
		if (i == 5 || (seen & 1u << i) || parse_u32(eq + 1, end - eq - 1, vals[i]))
			return -EINVAL;
		seen |= 1u << i;
		s = *end ? end + 1 : end;
	}
	/* torch.profiler.schedule() asserts the same */
	if (!(seen & 1u << 2) || !o->active)
		return -EINVAL;
	o->schedule = true;
	return 0;
}

int steps_check_function(const char *s)
{
	const char *colon = strchr(s, ':');

	return colon && colon != s && colon[1] && !strchr(colon + 1, ':') ? 0 : -EINVAL;
}

int steps_action(const struct steps_opts *o, uint32_t k)
{
	uint32_t n = o->wait + o->warmup + o->active, mod;

	if (k < o->skip_first)
		return ACTION_NONE;
	k -= o->skip_first;
	if (o->repeat && k / n >= o->repeat)
		return ACTION_NONE;
	mod = k % n;
	if (mod < o->wait)
		return ACTION_NONE;
	if (mod < o->wait + o->warmup)
		return ACTION_WARMUP;
	return mod < n - 1 ? ACTION_RECORD : ACTION_RECORD_AND_SAVE;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static bool is_step_code(const struct steps *s, const struct py_code_info *ci)
{
	if (s->o.function) {
		if (strcmp(ci->qualname, s->fn_qualname))
			return false;
		return !s->fn_file[0] || ends_with(ci->filename, s->fn_file);
	}
	/* lr_scheduler's step() ends no training step */
	return ends_with(ci->qualname, STEP_SUFFIX) && strstr(ci->filename, OPTIM_DIR) &&
	       !ends_with(ci->filename, SCHEDULER_FILE) && !ends_with(ci->filename, SWA_FILE);
}

static bool is_step(struct steps *s, uint64_t code, uint32_t fingerprint)
{
	uint64_t *known = u64map__get(&s->codes, code);
	struct py_code_info ci;
	bool yes;

	if (known && (uint32_t)(*known >> 32) == fingerprint)
		return (*known & 0xff) == 2;
	yes = !py_read_code(s->memfd, s->vi, code, &ci) && ci.fingerprint == fingerprint &&
	      is_step_code(s, &ci);
	u64map__put(&s->codes, code, (uint64_t)fingerprint << 32 | (yes ? 2 : 1));
	return yes;
}

static struct step_thread *step_thread(struct steps *s, uint32_t pid, uint32_t tid)
{
	return threads__get(&s->threads, pid, tid, NULL);
}

static int add_bound(struct steps *s, uint64_t ts)
{
	if (s->nbounds == s->bounds_cap) {
		size_t cap = s->bounds_cap ? s->bounds_cap * 2 : 64;
		uint64_t *n = realloc(s->bounds, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->bounds = n;
		s->bounds_cap = cap;
	}
	s->bounds[s->nbounds++] = ts;
	return 0;
}

static bool all_done(const struct steps *s)
{
	const struct steps_opts *o = &s->o;

	if (o->max_steps && s->count >= o->max_steps)
		return true;
	return o->schedule && o->repeat &&
	       s->count >= o->skip_first + o->repeat * (o->wait + o->warmup + o->active);
}

/* Step k ended at ts on this thread: ProfilerStep#k covers it. */
static int end_step(struct steps *s, const struct ptg_event *e)
{
	struct trace_writer *w = tracer__writer(s->t);
	struct ptg_record r = {.kind = PTG_REC_SPAN, .pid = e->pid, .tid = e->tid};
	char name[32];
	int err;

	if (!s->nbounds && (err = add_bound(s, tracer__start_ts(s->t))))
		return err;
	if ((err = add_bound(s, e->ts)))
		return err;
	snprintf(name, sizeof(name), "ProfilerStep#%u", s->count);
	r.ts = s->bounds[s->count];
	r.dur = e->ts > r.ts ? e->ts - r.ts : 0;
	r.sym = trace_writer__sym(w, PTG_SYM_STRING, name, "", 0);
	/* Kineto's category of ProfilerStep spans */
	r.aux[0] = trace_writer__sym(w, PTG_SYM_STRING, "user_annotation", "", 0);
	s->count++;
	s->done = s->done || all_done(s);
	return trace_writer__record(w, &r);
}

/*
 * The names the BPF side read at a code object's first sight: whether it is
 * a step function is known before its first call, even if the code (or the
 * whole process) is gone by the time we would read it from memory.
 */
static int learn_code(struct steps *s, const struct ptg_code_event *c)
{
	struct py_code_info ci;

	if (py_code_from_event(c, &ci))
		return 0; /* is_step() reads it from memory */
	return u64map__put(&s->codes, c->hdr.a,
			   (uint64_t)c->hdr.aux << 32 | (is_step_code(s, &ci) ? 2 : 1));
}

static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct steps *s = ctx;
	const struct tracer_thread *th;
	const struct tracer_slot *slot;
	struct step_thread *st;
	int err;

	if (e->kind == PTG_EV_PY_CODE)
		return size >= sizeof(struct ptg_code_event)
			   ? learn_code(s, (const struct ptg_code_event *)e)
			   : 0;
	th = tracer__thread(t, e->pid, e->tid, e->ts);
	st = step_thread(s, e->pid, e->tid);
	if (!th || !st)
		return -ENOMEM;
	if (st->active) {
		slot = st->idx < th->depth ? &th->stack[st->idx] : NULL;
		if (!slot || slot->kind != PTG_REC_PY_ENTER || slot->key != st->frame) {
			st->active = false;
			if ((err = end_step(s, e)))
				return err;
		}
	}
	if (st->active || e->kind != PTG_EV_PY_START || !th->depth)
		return 0;
	slot = &th->stack[th->depth - 1];
	if (slot->key != e->a || !is_step(s, e->b, e->aux))
		return 0;
	*st = (struct step_thread){.active = true, .idx = th->depth - 1, .frame = e->a};
	return 0;
}

/* "pkg.mod:Class.step" -> file suffix "pkg/mod.py" (any file for __main__) and qualname */
static void split_function(struct steps *s, const char *fn)
{
	const char *colon = strchr(fn, ':');
	size_t n = (size_t)(colon - fn);
	char *p;

	snprintf(s->fn_qualname, sizeof(s->fn_qualname), "%s", colon + 1);
	if (n == strlen("__main__") && !strncmp(fn, "__main__", n))
		return;
	snprintf(s->fn_file, sizeof(s->fn_file), "/%.*s.py", (int)n, fn);
	for (p = s->fn_file; *p; p++)
		*p = *p == '.' && strcmp(p, ".py") ? '/' : *p;
}

int steps__open(struct tracer *t, const struct py_interp *py, const struct steps_opts *o,
		struct steps **out)
{
	struct steps *s;
	char path[64];
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->t = t;
	s->threads = THREADS_INIT(struct step_thread);
	s->memfd = -1;
	s->vi = py->info;
	s->o = *o;
	if (o->function)
		split_function(s, o->function);
	snprintf(path, sizeof(path), "/proc/%d/mem", py->pid);
	s->memfd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->memfd < 0) {
		err = -errno;
		pr_err("steps: cannot open %s: %s", path, strerror(-err));
		goto cleanup;
	}
	err = tracer__on(t, PTG_EV_PY_START, PTG_EV_PY_CODE, handle_event, NULL, s);
	if (err)
		goto cleanup;
	*out = s;
	return 0;
cleanup:
	steps__destroy(s);
	return err;
}

bool steps__done(const struct steps *s)
{
	return s->done;
}

uint32_t steps__count(const struct steps *s)
{
	return s->count;
}

/* out with ".cycleC" before a ".ptg" extension, or at its end */
static void cycle_path(const char *out, uint32_t cycle, char *buf, size_t len)
{
	size_t n = strlen(out);

	if (ends_with(out, ".ptg"))
		snprintf(buf, len, "%.*s.cycle%u.ptg", (int)(n - 4), out, cycle);
	else
		snprintf(buf, len, "%s.cycle%u", out, cycle);
}

/* nk steps from step k0 on, the last ending at t1, into path. */
static int write_window(const struct steps *s, const char *tmp, const char *path, uint32_t k0,
			uint32_t nk, uint64_t t1, const char *reason)
{
	char steps[64], stop[32];
	struct slice_meta meta[] = {
	    {"steps", steps},
	    {"stop.reason", reason},
	    {"stop.monotonic_ns", stop},
	};

	if (nk)
		snprintf(steps, sizeof(steps), "ProfilerStep#%u-#%u", k0, k0 + nk - 1);
	else
		snprintf(steps, sizeof(steps), "none ended");
	snprintf(stop, sizeof(stop), "%llu", (unsigned long long)t1);
	return trace_slice(tmp, path, s->bounds[k0], t1, meta, 3);
}

static int write_steps(const struct steps *s, const char *tmp, const char *out, uint64_t stop_ts)
{
	bool all = s->o.max_steps && s->count >= s->o.max_steps;
	uint32_t n = all ? s->o.max_steps : s->count;
	char reason[64];

	if (all)
		snprintf(reason, sizeof(reason), "%u steps recorded", n);
	else
		snprintf(reason, sizeof(reason), "recording stopped after %u of %u steps", n,
			 s->o.max_steps);
	return write_window(s, tmp, out, 0, n, all ? s->bounds[n] : stop_ts, reason);
}

static int write_cycles(const struct steps *s, const char *tmp, const char *out, uint64_t stop_ts,
			bool quiet)
{
	const struct steps_opts *o = &s->o;
	uint32_t n = o->wait + o->warmup + o->active, files = 0;
	uint32_t limit = o->max_steps && s->count >= o->max_steps ? o->max_steps : s->count;
	bool cut = limit < s->count || s->done;
	char path[PATH_MAX + 32], reason[64];
	int err;

	for (uint32_t c = 0; !o->repeat || c < o->repeat; c++) {
		uint32_t k0 = o->skip_first + c * n + o->wait + o->warmup, k1 = k0 + o->active - 1;
		bool whole = k1 < limit;

		/* a cycle begun when recording stopped is saved, as torch.profiler does on exit */
		if (k0 > limit || (k0 == limit && cut))
			break;
		snprintf(reason, sizeof(reason), "active cycle %u%s", c + 1,
			 whole ? "" : ", cut short by the end of recording");
		cycle_path(out, c + 1, path, sizeof(path));
		err = write_window(s, tmp, path, k0, whole ? o->active : limit - k0,
				   whole ? s->bounds[k1 + 1] : stop_ts, reason);
		if (err)
			return err;
		if (!quiet)
			pr_info("wrote %s (from ProfilerStep#%u, %u steps)", path, k0,
				whole ? o->active : limit - k0);
		files++;
	}
	return (int)files;
}

int steps__write(struct steps *s, const char *tmp, const char *out, uint64_t stop_ts, bool quiet)
{
	int err;

	/* no step ended: the first one started when recording did */
	if (!s->nbounds && (err = add_bound(s, tracer__start_ts(s->t))))
		return err;
	if (!s->o.schedule) {
		err = write_steps(s, tmp, out, stop_ts);
		return err ?: 1;
	}
	return write_cycles(s, tmp, out, stop_ts, quiet);
}

void steps__destroy(struct steps *s)
{
	if (!s)
		return;
	if (s->memfd >= 0)
		close(s->memfd);
	u64map__free(&s->codes);
	threads__free(&s->threads, NULL);
	free(s->bounds);
	free(s);
}
