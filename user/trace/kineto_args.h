/* SPDX-License-Identifier: MIT */
/*
 * What a Kineto event holds beyond the fields of its record: kineto.c keeps it
 * as the record's args blob (trace.h) so that export writes every arg and
 * every unknown key back as it came. Also the JSON text writer that import and
 * export share, with the spacing Kineto and Python's json.dumps use
 * ({"rank": 0, "world_size": 2}): some readers match it as text (HTA finds a
 * trace's rank with the pattern "rank":\s+N).
 */
#ifndef PTG_KINETO_ARGS_H
#define PTG_KINETO_ARGS_H

#include <stddef.h>

#include <json-c/json.h>

/* Which members of an event its record holds in fields. */
enum kineto_shape {
	KINETO_SHAPE_X,	   /* ph, cat, name, pid, tid, ts, dur */
	KINETO_SHAPE_FLOW, /* ph, cat, name, id, pid, tid, ts; bp when it is "e" */
	KINETO_SHAPE_META, /* ph, name, pid, tid, ts, args */
};

/* The texts handed out, freed together. */
struct kineto_args {
	char **texts;
	size_t n, cap;
};

/*
 * The JSON object of ev's members that a record of this shape does not hold,
 * in their order; for X events always (args included), for the others only
 * when there are any (*text = NULL otherwise). The text lives until
 * kineto_args__free(). Returns 0 or -ENOMEM.
 */
int kineto_args__extra(struct kineto_args *ka, json_object *ev, enum kineto_shape shape,
		       const char **text, size_t *len);

/* The whole event as JSON text, for PTG_REC_EVENT. Returns 0 or -ENOMEM. */
int kineto_args__event(struct kineto_args *ka, json_object *ev, const char **text, size_t *len);

void kineto_args__free(struct kineto_args *ka);

/* o as JSON text with ", " and ": " separators; malloc'ed, NULL when out of memory. */
char *kineto_json_text(json_object *o, size_t *len);

/*
 * The JSON text s rewritten with that spacing (numbers and strings as they
 * are); NULL when s does not parse or memory runs out.
 */
char *kineto_json_respace(const char *s);

#endif /* PTG_KINETO_ARGS_H */
