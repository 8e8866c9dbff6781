/* SPDX-License-Identifier: MIT */
/*
 * Reading a Kineto JSON document within bounds: json-c is fed the text piece
 * by piece (never holding it whole), and a value, an inflated gzip file or a
 * document too large for a trace is refused with one line on stderr.
 */
#ifndef PTG_KINETO_JSON_H
#define PTG_KINETO_JSON_H

#include <stddef.h>

#include <json-c/json.h>

/* The document of JSON text in memory, or NULL after one line on stderr. */
json_object *kineto_json_parse(const char *json, size_t len, const char *name);

/*
 * The document of a plain or gzip file into *root. Returns 0 or a negative
 * errno after one line on stderr.
 */
int kineto_json_parse_file(const char *path, json_object **root);

#endif /* PTG_KINETO_JSON_H */
