/* SPDX-License-Identifier: MIT */
/* Reproduces every traced value of the public fixtures (tests/reference/trace-public.json)
 * from the C core alone and compares bit patterns: parameters, every forward value, the loss,
 * site adjoints, parameter gradients and the site RMS values, for the depth-initialized model
 * and the unscaled control, at one and at several threads. No Python at run time.
 * Usage: pd_fixture_check TRACE_JSON   Exit status 0 only when every value matches.
 *        pd_fixture_check --flip K TRACE_JSON   the checker's own test: flips one bit of the
 *        K-th bit pattern in the file (in memory); exit status 0 only when exactly that one
 *        value is reported as differing. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"
#include "pd_backward.h"
#include "pd_decoder.h"
#include "pd_nodes.h"
#include "kernels/gemm.h"
#include "kernels/pool.h"

/* Names of the depth-scaled residual output projections (pydepth/chapter/demo.py, _CHAPTER_SELECTION). */
static const char *const selected_suffixes[] = {".attention.output.weight", ".ffn.down.weight"};

typedef struct {
    const char *fixture, *model;
    size_t checked, differing;
} tally;

static uint64_t bits_of(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static int parse_hex64(const char *s, uint64_t *out) {
    if (!s || strlen(s) != 16) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 1;
}

static int parse_u64(const char *s, size_t len, uint64_t *out) {
    if (len == 0 || len > 20) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        const uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

static int number_u64(const json_node *n, uint64_t *out) {
    return n && n->type == JSON_NUMBER && parse_u64(n->text, n->len, out);
}

static int number_f64(const json_node *n, double *out) {
    char buf[64];
    if (!n || n->type != JSON_NUMBER || n->len >= sizeof buf) return 0;
    memcpy(buf, n->text, n->len);
    buf[n->len] = '\0';
    char *end;
    *out = strtod(buf, &end);
    return *end == '\0';
}

static void structure_error(tally *t, const char *what) {
    fprintf(stderr, "%s %s: malformed fixture: %s\n", t->fixture, t->model ? t->model : "", what);
    t->differing++;
}

/* Compares count values against a "bits" array; reports the first difference of this entry. */
static void compare_bits(const json_doc *d, tally *t, const char *section, const char *name,
                         const json_node *bits, const double *got, size_t count) {
    if (!bits || bits->type != JSON_ARRAY || bits->count != count) {
        fprintf(stderr, "%s %s %s %s: expected %zu values, fixture has %zu\n", t->fixture, t->model,
                section, name, count, bits && bits->type == JSON_ARRAY ? bits->count : 0);
        t->differing++;
        return;
    }
    size_t i = 0, bad = 0;
    for (const json_node *b = json_child(d, bits); b; b = json_next(d, b), i++) {
        uint64_t want;
        if (b->type != JSON_STRING || !parse_hex64(b->text, &want)) {
            structure_error(t, "a bit pattern is not 16 hex digits");
            return;
        }
        t->checked++;
        if (bits_of(got[i]) != want) {
            if (bad++ == 0)
                printf("  FAIL %s %s %s %s[%zu]: got %016" PRIx64 " (%.17g), expected %016" PRIx64 "\n",
                       t->fixture, t->model, section, name, i, bits_of(got[i]), got[i], want);
            t->differing++;
        }
    }
}

static int shape_matches(const json_doc *d, const json_node *shape, size_t rank, const size_t *dims) {
    if (!shape || shape->type != JSON_ARRAY || shape->count != rank) return 0;
    size_t i = 0;
    for (const json_node *s = json_child(d, shape); s; s = json_next(d, s), i++) {
        uint64_t v;
        if (!number_u64(s, &v) || v != dims[i]) return 0;
    }
    return 1;
}

/* (block, kind) of a forward trace name, read from the core's node table; 0 when unknown. */
static int parse_node_name(const char *name, int *block, int *kind) {
    unsigned b = 0;
    int used = 0;
    const int in_block = sscanf(name, "blocks.%u.%n", &b, &used) == 1 && used > 0;
    const char *ident, *text, *scope;
    for (int k = 0; pd_node_kind_info(k, &ident, &text, &scope); k++) {
        if (in_block && strcmp(scope, "block") == 0 && strcmp(name + used, text) == 0) {
            *block = (int)b;
            *kind = k;
            return 1;
        }
        if (!in_block && strcmp(scope, "global") == 0 && strcmp(name, text) == 0) {
            *block = -1;
            *kind = k;
            return 1;
        }
    }
    return 0;
}

/* sqrt(sum(x*x)/n), summed in order from +0.0 (the trace's plain site RMS). */
static double plain_rms(const double *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s = s + x[i] * x[i];
    return sqrt(s / (double)n);
}

static size_t value_count(size_t rank, const size_t *dims) {
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= dims[i];
    return n;
}

typedef struct {
    pd_config cfg;
    size_t n_params;
    pd_param *params;
    size_t B, T;
    int64_t *tokens, *targets;
} model_run;

static void check_model(const json_doc *d, tally *t, const json_node *trace, model_run *r) {
    char name[128];
    const json_node *list = json_member(d, trace, "parameters");
    if (!list || list->count != r->n_params) {
        structure_error(t, "parameter list length differs from the layout");
        return;
    }
    size_t i = 0;
    for (const json_node *p = json_child(d, list); p; p = json_next(d, p), i++) {
        size_t rank, dims[2];
        pd_param_shape(&r->cfg, i, &rank, dims);
        pd_param_name(&r->cfg, i, name, sizeof name);
        const json_node *pn = json_member(d, p, "name");
        if (!pn || pn->type != JSON_STRING || strcmp(pn->text, name) != 0 ||
            !shape_matches(d, json_member(d, p, "shape"), rank, dims)) {
            printf("  FAIL %s %s parameter %zu: name/shape differ from %s\n", t->fixture, t->model, i, name);
            t->differing++;
            continue;
        }
        compare_bits(d, t, "parameter", name, json_member(d, p, "bits"), r->params[i].value, r->params[i].size);
    }

    pd_param **ptrs = malloc(r->n_params * sizeof *ptrs);
    for (i = 0; i < r->n_params; i++) ptrs[i] = &r->params[i];
    pd_model m;
    pd_graph g;
    pd_error e;
    memset(&g, 0, sizeof g);
    if (pd_model_init(&m, &r->cfg, ptrs, &e) != PD_OK) {
        printf("  FAIL %s %s: pd_model_init status %d\n", t->fixture, t->model, (int)e.code);
        t->differing++;
        free(ptrs);
        return;
    }
    pd_status st = pd_graph_forward(&g, &m, r->B, r->T, r->tokens, NULL, NULL, NULL, 1, &e);
    if (st == PD_OK) st = pd_graph_loss(&g, r->targets, &e);
    if (st != PD_OK) {
        printf("  FAIL %s %s: forward status %d (block %d, node %d, index %zu)\n", t->fixture, t->model,
               (int)st, e.block, e.node, e.index);
        t->differing++;
        pd_model_free(&m);
        free(ptrs);
        return;
    }

    for (const json_node *f = json_child(d, json_member(d, trace, "forward")); f; f = json_next(d, f)) {
        const json_node *fn = json_member(d, f, "name");
        int block, kind;
        size_t rank, dims[4];
        const double *v = NULL;
        if (fn && fn->type == JSON_STRING && parse_node_name(fn->text, &block, &kind))
            v = pd_graph_value(&g, block, kind, &rank, dims);
        if (!v || !shape_matches(d, json_member(d, f, "shape"), rank, dims)) {
            printf("  FAIL %s %s forward %s: not recorded or shape differs\n", t->fixture, t->model,
                   fn && fn->text ? fn->text : "?");
            t->differing++;
            continue;
        }
        compare_bits(d, t, "forward", fn->text, json_member(d, f, "bits"), v, value_count(rank, dims));
    }

    /* completed adjoints of the 2L+1 residual sites, and one backward's parameter gradients */
    const size_t L = r->cfg.layers, S = 2 * L + 1, N = r->B * r->T, W = r->cfg.model_width;
    int *sb = malloc(S * sizeof *sb), *sk = malloc(S * sizeof *sk);
    double **out = malloc(S * sizeof *out), *adj = calloc(S * N * W, sizeof *adj);
    uint8_t *found = calloc(S, 1);
    for (size_t s = 0; s < S; s++) {
        sb[s] = s == 0 ? -1 : (int)((s - 1) / 2);
        sk[s] = s == 0 ? PD_N_EMBEDDING : (s % 2 ? PD_N_AFTER_ATTENTION : PD_N_BLOCK_OUTPUT);
        out[s] = adj + s * N * W;
    }
    st = pd_graph_backward(&g, S, sb, sk, out, found, &e);
    if (st != PD_OK) {
        printf("  FAIL %s %s: backward status %d\n", t->fixture, t->model, (int)st);
        t->differing++;
    } else {
        const json_node *sa = json_member(d, trace, "site_adjoints");
        const json_node *ar = json_member(d, trace, "site_activation_rms");
        const json_node *gr = json_member(d, trace, "site_adjoint_rms");
        if (!sa || sa->count != S || !ar || ar->count != S || !gr || gr->count != S) {
            structure_error(t, "site lists do not have 2L+1 entries");
        } else {
            const json_node *a = json_child(d, sa), *ab = json_child(d, ar), *gb = json_child(d, gr);
            for (size_t s = 0; s < S; s++, a = json_next(d, a), ab = json_next(d, ab), gb = json_next(d, gb)) {
                size_t rank, dims[4];
                const double *site = pd_graph_value(&g, sb[s], sk[s], &rank, dims);
                snprintf(name, sizeof name, "site.%zu", s);
                if (!found[s] || !site) {
                    printf("  FAIL %s %s %s: no adjoint\n", t->fixture, t->model, name);
                    t->differing++;
                    continue;
                }
                compare_bits(d, t, "site_adjoint", name, json_member(d, a, "bits"), out[s], N * W);
                /* the RMS entries are bare bit strings: wrap each as a one-value array */
                const double rms[2] = {plain_rms(site, N * W), plain_rms(out[s], N * W)};
                const json_node *want[2] = {ab, gb};
                const char *sec[2] = {"site_activation_rms", "site_adjoint_rms"};
                for (int k = 0; k < 2; k++) {
                    uint64_t w;
                    t->checked++;
                    if (!want[k] || want[k]->type != JSON_STRING || !parse_hex64(want[k]->text, &w)) {
                        structure_error(t, "an RMS entry is not 16 hex digits");
                    } else if (bits_of(rms[k]) != w) {
                        printf("  FAIL %s %s %s[%zu]: got %016" PRIx64 ", expected %016" PRIx64 "\n",
                               t->fixture, t->model, sec[k], s, bits_of(rms[k]), w);
                        t->differing++;
                    }
                }
            }
        }
        i = 0;
        const json_node *pg = json_member(d, trace, "parameter_gradients");
        if (!pg || pg->count != r->n_params) structure_error(t, "gradient list length differs");
        else
            for (const json_node *p = json_child(d, pg); p; p = json_next(d, p), i++) {
                pd_param_name(&r->cfg, i, name, sizeof name);
                compare_bits(d, t, "gradient", name, json_member(d, p, "bits"), r->params[i].grad, r->params[i].size);
            }
    }
    free(sb); free(sk); free(out); free(adj); free(found);
    pd_graph_free(&g);
    pd_model_free(&m);
    free(ptrs);
}

static int read_config(const json_doc *d, const json_node *c, pd_config *cfg) {
    uint64_t v[7];
    const char *keys[7] = {"vocabulary_size", "model_width", "heads", "kv_heads",
                           "feed_forward_width", "layers", "max_positions"};
    for (int k = 0; k < 7; k++)
        if (!number_u64(json_member(d, c, keys[k]), &v[k])) return 0;
    cfg->vocabulary_size = v[0]; cfg->model_width = v[1]; cfg->heads = v[2]; cfg->kv_heads = v[3];
    cfg->feed_forward_width = v[4]; cfg->layers = v[5]; cfg->max_positions = v[6];
    return number_f64(json_member(d, c, "rope_base"), &cfg->rope_base) &&
           number_f64(json_member(d, c, "rms_epsilon"), &cfg->rms_epsilon);
}

static int read_ids(const json_doc *d, const json_node *a, size_t n, int64_t *out) {
    if (!a || a->type != JSON_ARRAY || a->count != n) return 0;
    size_t i = 0;
    for (const json_node *x = json_child(d, a); x; x = json_next(d, x)) {
        uint64_t v;
        if (!number_u64(x, &v) || v > INT64_MAX) return 0;
        out[i++] = (int64_t)v;
    }
    return 1;
}

static int ends_with(const char *s, const char *suffix) {
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* One fixture: draws, scaling and both model traces. Returns the number of differing values. */
static size_t check_fixture(const json_doc *d, const json_node *fx, size_t *checked) {
    const json_node *idn = json_member(d, fx, "id");
    tally t = {idn && idn->type == JSON_STRING ? idn->text : "?", NULL, 0, 0};
    model_run r;
    memset(&r, 0, sizeof r);
    pd_error e;
    uint64_t seed, final_state, shape[2], factor_bits;
    const json_node *ts = json_member(d, fx, "token_shape"), *fsn = json_member(d, fx, "final_rng_state"),
                    *fb = json_member(d, fx, "factor");
    if (!read_config(d, json_member(d, fx, "config"), &r.cfg) || !number_u64(json_member(d, fx, "seed"), &seed) ||
        !fsn || fsn->type != JSON_STRING || !parse_u64(fsn->text, fsn->len, &final_state) ||
        !fb || fb->type != JSON_STRING || !parse_hex64(fb->text, &factor_bits) ||
        !ts || ts->count != 2 || !number_u64(json_child(d, ts), &shape[0]) ||
        !number_u64(json_next(d, json_child(d, ts)), &shape[1])) {
        structure_error(&t, "config, seed, rng state, factor or token shape unreadable");
        return t.differing;
    }
    if (pd_config_validate(&r.cfg, &e) != PD_OK) {
        printf("  FAIL %s: configuration refused (status %d)\n", t.fixture, (int)e.code);
        return 1;
    }
    r.B = shape[0];
    r.T = shape[1];
    r.tokens = malloc(r.B * r.T * sizeof *r.tokens);
    r.targets = malloc(r.B * r.T * sizeof *r.targets);
    if (!read_ids(d, json_member(d, fx, "tokens"), r.B * r.T, r.tokens) ||
        !read_ids(d, json_member(d, fx, "targets"), r.B * r.T, r.targets)) {
        structure_error(&t, "tokens or targets unreadable");
        free(r.tokens); free(r.targets);
        return t.differing;
    }

    /* base draws: one SplitMix64 stream from the seed, in the reference draw order */
    r.n_params = pd_param_tensor_count(&r.cfg);
    pd_param *base = calloc(r.n_params, sizeof *base), *scaled = calloc(r.n_params, sizeof *scaled);
    double **values = malloc(r.n_params * sizeof *values);
    for (size_t i = 0; i < r.n_params; i++) {
        size_t rank, dims[2];
        pd_param_shape(&r.cfg, i, &rank, dims);
        base[i].size = scaled[i].size = value_count(rank, dims);
        base[i].value = values[i] = calloc(base[i].size, sizeof(double));
        base[i].grad = calloc(base[i].size, sizeof(double));
        scaled[i].value = calloc(scaled[i].size, sizeof(double));
        scaled[i].grad = calloc(scaled[i].size, sizeof(double));
    }
    pd_rng rng = {seed};
    if (pd_draw_parameters(&r.cfg, values, &rng, &e) != PD_OK) {
        printf("  FAIL %s: pd_draw_parameters status %d\n", t.fixture, (int)e.code);
        t.differing++;
    } else {
        t.checked += 2;
        if (rng.state != final_state) {
            printf("  FAIL %s: final generator state %" PRIu64 ", expected %" PRIu64 "\n", t.fixture,
                   rng.state, final_state);
            t.differing++;
        }
        const double factor = 1.0 / sqrt((double)r.cfg.layers);
        if (bits_of(factor) != factor_bits) {
            printf("  FAIL %s: factor %016" PRIx64 ", expected %016" PRIx64 "\n", t.fixture,
                   bits_of(factor), factor_bits);
            t.differing++;
        }
        /* depth initialization: selected projections times the factor, once, when L > 1 */
        char name[128];
        for (size_t i = 0; i < r.n_params; i++) {
            pd_param_name(&r.cfg, i, name, sizeof name);
            const int sel = r.cfg.layers != 1 && (ends_with(name, selected_suffixes[0]) ||
                                                  ends_with(name, selected_suffixes[1]));
            for (size_t k = 0; k < base[i].size; k++)
                scaled[i].value[k] = sel ? base[i].value[k] * factor : base[i].value[k];
        }
        const char *models[2] = {"initialized", "same_base_unscaled_control"};
        pd_param *params[2] = {scaled, base};
        for (int k = 0; k < 2; k++) {
            t.model = models[k];
            r.params = params[k];
            const json_node *trace = json_member(d, fx, models[k]);
            if (!trace) structure_error(&t, "model trace missing");
            else check_model(d, &t, trace, &r);
        }
    }
    for (size_t i = 0; i < r.n_params; i++) {
        free(base[i].value); free(base[i].grad); free(scaled[i].value); free(scaled[i].grad);
    }
    free(base); free(scaled); free(values); free(r.tokens); free(r.targets);
    *checked += t.checked;
    return t.differing;
}

/* Flips the lowest bit of the k-th 16-hex-digit string of the document (0-based). */
static int flip_pattern(json_doc *d, size_t k) {
    for (size_t i = 0; i < d->n; i++) {
        uint64_t v;
        json_node *n = &d->nodes[i];
        if (n->type != JSON_STRING || !parse_hex64(n->text, &v) || k-- > 0) continue;
        char *last = (char *)n->text + 15;
        const int digit = (*last >= 'a' ? *last - 'a' + 10 : *last - '0') ^ 1;
        *last = (char)(digit < 10 ? '0' + digit : 'a' + digit - 10);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    size_t flip = 0;
    int flipping = 0;
    if (argc == 4 && strcmp(argv[1], "--flip") == 0) {
        uint64_t k;
        if (!parse_u64(argv[2], strlen(argv[2]), &k)) {
            fprintf(stderr, "--flip needs a non-negative integer, got %s\n", argv[2]);
            return 2;
        }
        flip = (size_t)k;
        flipping = 1;
        argv += 2;
        argc -= 2;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s [--flip K] trace-public.json\n", argv[0]);
        return 2;
    }
    json_doc d;
    char err[256];
    if (json_load(&d, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (flipping && !flip_pattern(&d, flip)) {
        fprintf(stderr, "--flip %zu: the file has fewer bit patterns\n", flip);
        json_free(&d);
        return 2;
    }
    const json_node *fmt = json_member(&d, &d.nodes[0], "format");
    const json_node *fixtures = json_member(&d, &d.nodes[0], "fixtures");
    if (!fmt || fmt->type != JSON_STRING || strcmp(fmt->text, "pydepth-reference-trace-v1") != 0 ||
        !fixtures || fixtures->type != JSON_ARRAY || fixtures->count == 0) {
        fprintf(stderr, "%s: not a pydepth-reference-trace-v1 file with fixtures\n", argv[1]);
        json_free(&d);
        return 2;
    }
    printf("kernel path %s\n", pd_kernel_path());
    /* results never depend on the thread count: check at one and at several */
    static const int thread_counts[] = {1, 3};
    size_t total_bad = 0;
    for (size_t tc = 0; tc < sizeof thread_counts / sizeof thread_counts[0]; tc++) {
        pd_set_num_threads(thread_counts[tc]);
        for (const json_node *fx = json_child(&d, fixtures); fx; fx = json_next(&d, fx)) {
            size_t checked = 0;
            const size_t bad = check_fixture(&d, fx, &checked);
            const json_node *idn = json_member(&d, fx, "id");
            printf("%s %-14s threads %d: %zu values, %s\n", bad ? "FAIL" : "ok  ",
                   idn && idn->type == JSON_STRING ? idn->text : "?", thread_counts[tc], checked,
                   bad ? "differing" : "bit-exact");
            if (bad) printf("     %zu differing values\n", bad);
            total_bad += bad;
        }
    }
    json_free(&d);
    if (flipping) { /* the one flipped value, once per thread count, and nothing else */
        const size_t want = sizeof thread_counts / sizeof thread_counts[0];
        printf("flipped pattern %zu: %zu differences reported, %zu expected\n", flip, total_bad, want);
        return total_bad == want ? 0 : 1;
    }
    printf("%s\n", total_bad ? "FAILED" : "all public fixtures bit-exact");
    return total_bad ? 1 : 0;
}
