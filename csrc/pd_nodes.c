/* SPDX-License-Identifier: MIT */
/* The node-kind table behind pd_nodes.h, expanded from its X-macro. */
#include "pd_nodes.h"
#include "pd_shapes.h"

typedef struct {
    const char *ident, *name;
    int scope, kept_lean, shape;
} node_info;

#define NODE_INFO_(id, name, scope, lean, shape) {#id, name, PD_SCOPE_##scope, PD_LEAN_##lean, PD_S_##shape},
enum { PD_LEAN_SPARE = 0, PD_LEAN_KEPT = 1 };
static const node_info node_table[] = {PD_NODE_KINDS(NODE_INFO_)};
#undef NODE_INFO_
_Static_assert(sizeof node_table / sizeof node_table[0] == PD_N_COUNT, "one entry per node kind");
_Static_assert((int)PD_N_BLOCK_KINDS == (int)PD_N_EMBEDDING, "block kinds come first");

static const char *const scope_names[] = {
    [PD_SCOPE_BLOCK] = "block", [PD_SCOPE_GLOBAL] = "global", [PD_SCOPE_EXTRA] = "extra"};

int pd_node_kind_info(int kind, const char **ident, const char **name, const char **scope) {
    if (kind < 0 || kind >= PD_N_COUNT) return 0;
    *ident = node_table[kind].ident;
    *name = node_table[kind].name;
    *scope = scope_names[node_table[kind].scope];
    return 1;
}

int pd_node_kept_lean(int kind) { return kind >= 0 && kind < PD_N_COUNT && node_table[kind].kept_lean; }

int pd_node_shape(int kind) { return kind >= 0 && kind < PD_N_COUNT ? node_table[kind].shape : PD_S_NONE; }
