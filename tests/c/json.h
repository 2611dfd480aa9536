/* SPDX-License-Identifier: MIT */
/* A small JSON reader for the fixture files: the whole document parsed in place into a flat
 * node array. Strings may use the simple escapes; numbers keep their text (text, len) for exact parsing by the caller. */
#ifndef PD_TEST_JSON_H
#define PD_TEST_JSON_H
#include <stddef.h>

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct {
    json_type type;
    const char *text; /* string contents (NUL-terminated) or number text (len bytes) */
    size_t len;
    const char *key;  /* the member name when the parent is an object */
    size_t count;     /* children of an array or object */
    size_t first;     /* index of the first child (0: none) */
    size_t next;      /* index of the next sibling (0: none) */
} json_node;

typedef struct {
    json_node *nodes; /* nodes[0] is the root */
    size_t n, cap;
    char *text;       /* the file contents, edited in place */
} json_doc;

/* Reads and parses a file; returns 0, or -1 with a message in err. */
int json_load(json_doc *doc, const char *path, char *err, size_t errcap);
void json_free(json_doc *doc);

const json_node *json_member(const json_doc *doc, const json_node *obj, const char *key);
const json_node *json_child(const json_doc *doc, const json_node *parent); /* first, or NULL */
const json_node *json_next(const json_doc *doc, const json_node *node);    /* next, or NULL */

#endif
