// SPDX-License-Identifier: MIT
/*
 * The args blobs of imported Kineto events (kineto_args.h). Numbers are
 * written with the text json-c kept from the input, so 0.6 stays 0.6 and an
 * epoch timestamp keeps every digit.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "trace/kineto_args.h"

static void put_key(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void put_value(FILE *f, json_object *o)
{
	size_t i, n;
	bool first = true;

	switch (json_object_get_type(o)) {
	case json_type_object:
		fputc('{', f);
		json_object_object_foreach(o, k, v)
		{
			fputs(first ? "" : ", ", f);
			first = false;
			put_key(f, k);
			fputs(": ", f);
			put_value(f, v);
		}
		fputc('}', f);
		break;
	case json_type_array:
		fputc('[', f);
		n = json_object_array_length(o);
		for (i = 0; i < n; i++) {
			fputs(i ? ", " : "", f);
			put_value(f, json_object_array_get_idx(o, i));
		}
		fputc(']', f);
		break;
	default:
		/* null, booleans, numbers as they were written, strings escaped as json-c does */
		fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							    JSON_C_TO_STRING_NOSLASHESCAPE),
		      f);
	}
}

char *kineto_json_text(json_object *o, size_t *len)
{
	size_t n = 0;
	char *buf = NULL;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return NULL;
	put_value(f, o);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	if (len)
		*len = n;
	return buf;
}

char *kineto_json_respace(const char *s)
{
	json_object *o = json_tokener_parse(s);
	char *text;

	if (!o)
		return NULL;
	text = kineto_json_text(o, NULL);
	json_object_put(o);
	return text;
}

static bool modeled(json_object *ev, const char *key, enum kineto_shape shape)
{
	static const char *const common[] = {"ph", "cat", "name", "pid", "tid", "ts"};
	json_object *v;
	size_t i;

	for (i = 0; i < sizeof(common) / sizeof(common[0]); i++) {
		if (!strcmp(key, common[i]))
			return true;
	}
	switch (shape) {
	case KINETO_SHAPE_X:
		return !strcmp(key, "dur");
	case KINETO_SHAPE_FLOW:
		/* export writes "bp": "e" from a flag; any other value is kept as it is */
		if (!strcmp(key, "bp"))
			return json_object_object_get_ex(ev, "bp", &v) &&
			       json_object_is_type(v, json_type_string) &&
			       !strcmp(json_object_get_string(v), "e");
		return !strcmp(key, "id");
	case KINETO_SHAPE_META:
		return !strcmp(key, "args");
	}
	return false;
}

static int keep(struct kineto_args *ka, char *text, const char **out)
{
	if (!text)
		return -ENOMEM;
	if (array_grow((void **)&ka->texts, &ka->cap, ka->n + 1, sizeof(*ka->texts))) {
		free(text);
		return -ENOMEM;
	}
	ka->texts[ka->n++] = text;
	*out = text;
	return 0;
}

int kineto_args__extra(struct kineto_args *ka, json_object *ev, enum kineto_shape shape,
		       const char **text, size_t *len)
{
	json_object *extra = json_object_new_object();
	int err = 0;

	*text = NULL;
	*len = 0;
	if (!extra)
		return -ENOMEM;
	json_object_object_foreach(ev, k, v)
	{
		if (modeled(ev, k, shape))
			continue;
		if (json_object_object_add(extra, k, json_object_get(v))) {
			err = -ENOMEM;
			break;
		}
	}
	/* an X event without args must come back without them, not with derived ones */
	if (!err && (shape == KINETO_SHAPE_X || json_object_object_length(extra)))
		err = keep(ka, kineto_json_text(extra, len), text);
	json_object_put(extra);
	return err;
}

int kineto_args__event(struct kineto_args *ka, json_object *ev, const char **text, size_t *len)
{
	return keep(ka, kineto_json_text(ev, len), text);
}

void kineto_args__free(struct kineto_args *ka)
{
	size_t i;

	for (i = 0; i < ka->n; i++)
		free(ka->texts[i]);
	free(ka->texts);
	memset(ka, 0, sizeof(*ka));
}
