/* Embeddings (hetero.h's "Embeddings and reranking"): the pooling words,
 * the file's pooling and classifier head, pooling and normalization of a
 * sequence's final-norm hidden states as llama.cpp does them, and
 * hx_model_embed, which packs several inputs into each evaluation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/embed.h"
#include "runtime/error.h"
#include "runtime/handle.h"

static const char *const pooling_names[] = {"none", "mean", "cls", "last", "rank"};

const char *hx_pooling_str(hx_pooling p)
{
    if (p == HX_POOLING_UNSPECIFIED)
        return "unspecified";
    return p >= 0 && p <= HX_POOLING_RANK ? pooling_names[p] : "?";
}

hx_status hx_pooling_parse(const char *name, hx_pooling *out)
{
    for (int i = 0; name && i <= HX_POOLING_RANK; i++)
        if (!strcmp(name, pooling_names[i])) {
            *out = (hx_pooling)i;
            return HX_OK;
        }
    return hx_error(HX_ERR_INVALID_ARG, "pooling '%s': one of none, mean, cls, last, rank", name ? name : "(null)");
}

hx_embed_options hx_embed_options_default(void)
{
    return (hx_embed_options){.pooling = HX_POOLING_UNSPECIFIED, .normalize = 2};
}

/* IEEE half and bfloat16 to float, for the classifier head's weights. */
static float half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023;
    float f;
    if (exp == 0)
        f = ldexpf((float)man, -24);
    else if (exp == 31)
        f = man ? NAN : INFINITY;
    else
        f = ldexpf((float)(man | 1024), (int)exp - 25);
    return sign ? -f : f;
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Element i of a head tensor (f32, f16 or bf16, checked by head_tensor). */
static float head_at(const hx_gguf_tensor *t, uint64_t i)
{
    const unsigned char *p = t->data;
    if (t->type == HX_TYPE_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return t->type == HX_TYPE_F16 ? half_to_float(h) : bf16_to_float(h);
}

/* A head tensor by name: NULL when absent; *st says why one is unusable.
 * A matrix of `in` columns (its rows: the outputs), or a vector of
 * `rows` elements (a bias). */
static const hx_gguf_tensor *head_tensor(const hx_model *m, const char *name, uint64_t in, uint64_t rows,
                                         hx_status *st)
{
    const hx_gguf_tensor *t = hx_model_file_tensor(m, name);
    if (!t || *st)
        return NULL;
    if (t->type != HX_TYPE_F32 && t->type != HX_TYPE_F16 && t->type != HX_TYPE_BF16) {
        *st = hx_error(HX_ERR_UNSUPPORTED, "%s: the classifier head is read as f32, f16 or bf16; this one is %s", name,
                       hx_type_name(t->type));
        return NULL;
    }
    const int bias = in == 0;
    if (bias ? (t->n_dims != 1 || t->ne[0] != rows) : (t->n_dims != 2 || t->ne[0] != in || (rows && t->ne[1] != rows))) {
        *st = hx_error(HX_ERR_FORMAT, "%s: shape [%llu, %llu] does not fit a head over %llu values", name,
                       (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                       (unsigned long long)(bias ? rows : in));
        return NULL;
    }
    return t;
}

hx_status hx_embed_head_read(const hx_model *m, hx_embed_head *h)
{
    memset(h, 0, sizeof *h);
    hx_status st = HX_OK;
    const uint64_t D = m->info.n_embd;
    h->cls = head_tensor(m, "cls.weight", D, 0, &st);
    const uint64_t mid = h->cls ? h->cls->ne[1] : D;
    h->cls_b = h->cls ? head_tensor(m, "cls.bias", 0, mid, &st) : NULL;
    h->out = head_tensor(m, "cls.output.weight", mid, 0, &st);
    h->out_b = h->out ? head_tensor(m, "cls.output.bias", 0, h->out->ne[1], &st) : NULL;
    h->n_out = h->out ? (uint32_t)h->out->ne[1] : h->cls ? (uint32_t)mid : 0;
    if (st)
        h->n_out = 0;
    return st;
}

hx_status hx_model_embedding_info_get(hx_model *m, hx_model_embedding_info *out)
{
    hx_api_enter();
    hx_status st = hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_embedding_info_get");
    if (st)
        return hx_api_leave(st);
    if (!out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_model_embedding_info_get: NULL out"));
    memset(out, 0, sizeof *out);
    out->pooling = hx_model_file_pooling(m);
    out->n_embd = m->info.n_embd;
    hx_embed_head h;
    st = hx_embed_head_read(m, &h);
    out->n_cls_out = h.n_out;
    return hx_api_leave(st);
}

hx_status hx_embed_resolve(const hx_model *m, const hx_embed_options *o, hx_embed_options *r)
{
    *r = o ? *o : hx_embed_options_default();
    if (r->pooling == HX_POOLING_UNSPECIFIED)
        r->pooling = hx_model_file_pooling(m);
    if (r->pooling < HX_POOLING_NONE || r->pooling > HX_POOLING_RANK)
        return hx_error(HX_ERR_INVALID_ARG, "pooling %d: one of -1 (the file's) and 0..4", (int)r->pooling);
    if (r->normalize < -1)
        return hx_error(HX_ERR_INVALID_ARG, "normalize %d: -1 (none), 0 (max), 1 (taxicab), 2 (L2) or p > 2",
                        (int)r->normalize);
    if (r->pooling == HX_POOLING_RANK) {
        hx_embed_head h;
        hx_status st = hx_embed_head_read(m, &h);
        if (st)
            return st;
        if (!h.n_out)
            return hx_error(HX_ERR_INVALID_ARG, "rank pooling: the model has no classifier head (cls.weight, "
                                                "cls.output.weight)");
    }
    return HX_OK;
}

size_t hx_embed_floats(const hx_model *m, const hx_embed_options *r, size_t n_tokens)
{
    if (r->pooling == HX_POOLING_NONE)
        return n_tokens * m->info.n_embd;
    if (r->pooling == HX_POOLING_RANK) {
        hx_embed_head h;
        return hx_embed_head_read(m, &h) == HX_OK ? h.n_out : 0;
    }
    return m->info.n_embd;
}

int hx_embed_wants(const hx_embed_options *r, size_t pos, size_t n_tokens)
{
    switch (r->pooling) {
    case HX_POOLING_NONE:
    case HX_POOLING_MEAN: return 1;
    case HX_POOLING_CLS: return pos == 0;
    default: return pos + 1 == n_tokens; /* last, and rank on a causal model (llama.cpp) */
    }
}

/* llama.cpp's common_embd_normalize. */
static void normalize(float *v, size_t n, int32_t how)
{
    double sum = 0.0;
    if (how == -1)
        return;
    if (how == 0) {
        for (size_t i = 0; i < n; i++)
            sum = fabs(v[i]) > sum ? fabs(v[i]) : sum;
        sum /= 32760.0;
    } else if (how == 2) {
        for (size_t i = 0; i < n; i++)
            sum += (double)v[i] * v[i];
        sum = sqrt(sum);
    } else {
        for (size_t i = 0; i < n; i++)
            sum += pow(fabs(v[i]), how);
        sum = pow(sum, 1.0 / how);
    }
    const float k = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (size_t i = 0; i < n; i++)
        v[i] *= k;
}

/* y[r] = sum_c w[r][c] x[c] (+ b[r]), the head's rows as GGUF stores them. */
static void head_matvec(const hx_gguf_tensor *w, const hx_gguf_tensor *b, const float *x, float *y)
{
    const uint64_t in = w->ne[0], rows = w->ne[1];
    for (uint64_t r = 0; r < rows; r++) {
        double acc = b ? head_at(b, r) : 0.0;
        for (uint64_t c = 0; c < in; c++)
            acc += (double)head_at(w, r * in + c) * x[c];
        y[r] = (float)acc;
    }
}

hx_status hx_embed_pool(const hx_model *m, const hx_embed_options *r, const float *rows, size_t n_rows, float *out,
                        size_t cap, size_t *n_out)
{
    const size_t D = m->info.n_embd;
    if (!rows || n_rows == 0)
        return hx_error(HX_ERR_INVALID_ARG, "pooling: no rows");
    const size_t need = hx_embed_floats(m, r, n_rows);
    if (need > cap)
        return hx_error(HX_ERR_RANGE, "pooling: %zu floats to write, room for %zu", need, cap);
    switch (r->pooling) {
    case HX_POOLING_NONE: /* llama-server normalizes pooled embeddings only */
        memcpy(out, rows, sizeof *out * need);
        break;
    case HX_POOLING_MEAN:
        for (size_t c = 0; c < D; c++) {
            double s = 0.0;
            for (size_t t = 0; t < n_rows; t++)
                s += rows[t * D + c];
            out[c] = (float)(s / (double)n_rows);
        }
        normalize(out, D, r->normalize);
        break;
    case HX_POOLING_CLS:
        memcpy(out, rows, sizeof *out * D);
        normalize(out, D, r->normalize);
        break;
    case HX_POOLING_LAST:
        memcpy(out, rows + (n_rows - 1) * D, sizeof *out * D);
        normalize(out, D, r->normalize);
        break;
    case HX_POOLING_RANK: {
        hx_embed_head h;
        hx_status st = hx_embed_head_read(m, &h);
        if (st)
            return st;
        const float *x = rows + (n_rows - 1) * D;
        float *mid = NULL;
        if (h.cls) {
            if (!(mid = malloc(sizeof *mid * h.cls->ne[1])))
                return hx_error(HX_ERR_NO_MEMORY, "rank head");
            head_matvec(h.cls, h.cls_b, x, mid);
            for (uint64_t i = 0; i < h.cls->ne[1]; i++)
                mid[i] = tanhf(mid[i]);
        }
        if (h.out)
            head_matvec(h.out, h.out_b, mid ? mid : x, out);
        else
            memcpy(out, mid, sizeof *out * h.n_out);
        free(mid);
        break;
    }
    default:
        return hx_error(HX_ERR_INVALID_ARG, "pooling %d", (int)r->pooling);
    }
    *n_out = need;
    return HX_OK;
}

hx_status hx_model_pool(hx_model *m, const float *rows, size_t n_rows, const hx_embed_options *o, float *out,
                        size_t cap, size_t *n_out)
{
    hx_api_enter();
    hx_status st = hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_pool");
    if (st)
        return hx_api_leave(st);
    if (!out || !n_out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_model_pool: NULL out"));
    hx_embed_options r;
    if ((st = hx_embed_resolve(m, o, &r)) == HX_OK)
        st = hx_embed_pool(m, &r, rows, n_rows, out, cap, n_out);
    return hx_api_leave(st);
}

hx_status hx_session_set_embeddings(hx_session *s, int on)
{
    hx_api_enter();
    hx_status st = hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_set_embeddings");
    if (st == HX_OK) {
        pthread_mutex_lock(&s->m->eval_lock);
        if (s->embd != (on != 0))
            s->n_last = 0; /* the rows kept are of the other kind */
        s->embd = on != 0;
        pthread_mutex_unlock(&s->m->eval_lock);
    }
    return hx_api_leave(st);
}

const float *hx_session_embeddings(const hx_session *s, int i)
{
    if (hx_handle_check(s, HX_HANDLE_SESSION, "hx_session_embeddings") || s->n_last == 0 || !s->embd)
        return NULL;
    if (i < 0)
        i += (int)s->n_last;
    if (i < 0 || (uint32_t)i >= s->n_last || s->logit_row[i] < 0)
        return NULL;
    return s->logits + (size_t)s->logit_row[i] * s->m->info.n_embd;
}

/* hx_model_embed's inputs in flight: each one's session and kept rows. */
typedef struct {
    hx_session *s;
    float *rows;  /* [n_kept][n_embd] */
    size_t n_kept, done;
} embed_input;

static hx_status embed_finish(hx_model *m, const hx_embed_options *r, embed_input *in, float *out, size_t cap,
                              size_t *n_out)
{
    hx_status st = hx_embed_pool(m, r, in->rows, in->n_kept, out, cap, n_out);
    hx_session_close(in->s);
    free(in->rows);
    in->s = NULL;
    in->rows = NULL;
    return st;
}

hx_status hx_model_embed(hx_model *m, const int32_t *const *inputs, const size_t *n_tokens, size_t n_inputs,
                         const hx_embed_options *o, float *out, size_t cap, size_t *n_out)
{
    hx_api_enter();
    hx_status st = hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_embed");
    if (st)
        return hx_api_leave(st);
    if (!inputs || !n_tokens || !out || !n_out || n_inputs == 0)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_model_embed: no inputs or NULL arguments"));
    *n_out = 0;
    hx_embed_options r;
    if ((st = hx_embed_resolve(m, o, &r)))
        return hx_api_leave(st);
    const size_t D = m->info.n_embd;
    size_t need = 0;
    for (size_t i = 0; i < n_inputs; i++) {
        if (!n_tokens[i] || !inputs[i])
            return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_model_embed: input %zu is empty", i));
        if (n_tokens[i] > m->opts.n_ctx)
            return hx_api_leave(hx_error(HX_ERR_RANGE, "hx_model_embed: input %zu is %zu tokens; the context is %u "
                                                       "tokens (n_ctx)", i, n_tokens[i], m->opts.n_ctx));
        for (size_t t = 0; t < n_tokens[i]; t++)
            if (inputs[i][t] < 0 || (uint32_t)inputs[i][t] >= m->info.n_vocab)
                return hx_api_leave(hx_error(HX_ERR_RANGE, "hx_model_embed: input %zu, token %zu is %d; the "
                                                           "vocabulary has %u tokens", i, t, inputs[i][t],
                                             m->info.n_vocab));
        need += hx_embed_floats(m, &r, n_tokens[i]);
    }
    if (need > cap)
        return hx_api_leave(hx_error(HX_ERR_RANGE, "hx_model_embed: %zu floats to write, room for %zu", need, cap));
    const uint32_t B = m->opts.max_batch;
    embed_input *in = calloc(n_inputs, sizeof *in);
    int32_t *tok = malloc(sizeof *tok * B);
    hx_session **ses = malloc(sizeof *ses * B);
    uint8_t *want = malloc(B);
    size_t *of = malloc(sizeof *of * B);
    if (!in || !tok || !ses || !want || !of)
        st = hx_error(HX_ERR_NO_MEMORY, "hx_model_embed: %zu inputs", n_inputs);
    size_t first = 0, written = 0; /* inputs before `first` are done */
    while (st == HX_OK && first < n_inputs) {
        /* Fill one evaluation: the unfinished inputs in order, each as
         * much as the batch has room for. */
        size_t n = 0;
        for (size_t i = first; i < n_inputs && n < B && st == HX_OK; i++) {
            embed_input *e = &in[i];
            if (!e->s) {
                st = hx_session_open(m, &e->s);
                if (st)
                    break;
                e->s->embd = 1;
                e->s->uncached = 1;
                const size_t kept = r.pooling == HX_POOLING_NONE || r.pooling == HX_POOLING_MEAN ? n_tokens[i] : 1;
                if (!(e->rows = malloc(sizeof *e->rows * kept * D))) {
                    st = hx_error(HX_ERR_NO_MEMORY, "hx_model_embed: rows of input %zu", i);
                    break;
                }
            }
            for (; e->done < n_tokens[i] && n < B; e->done++, n++) {
                tok[n] = inputs[i][e->done];
                ses[n] = e->s;
                want[n] = (uint8_t)hx_embed_wants(&r, e->done, n_tokens[i]);
                of[n] = i;
            }
        }
        if (st)
            break;
        const hx_batch b = {n, tok, ses, want};
        if ((st = hx_batch_eval(m, &b)))
            break;
        /* Each session's rows of this evaluation, in its entries' order. */
        for (size_t j = 0, k = 0; j < n; j++) {
            k = j > 0 && of[j] == of[j - 1] ? k + 1 : 0;
            if (!want[j])
                continue;
            embed_input *e = &in[of[j]];
            const float *row = hx_session_embeddings(e->s, (int)k);
            if (!row) {
                st = hx_error(HX_ERR_STATE, "hx_model_embed: input %zu: no hidden state kept", of[j]);
                break;
            }
            memcpy(e->rows + e->n_kept++ * D, row, sizeof *row * D);
        }
        /* Inputs finished in order: pooled, their sessions closed. */
        while (st == HX_OK && first < n_inputs && in[first].s && in[first].done == n_tokens[first]) {
            size_t w = 0;
            st = embed_finish(m, &r, &in[first], out + written, cap - written, &w);
            written += w;
            first++;
        }
    }
    for (size_t i = 0; in && i < n_inputs; i++) {
        hx_session_close(in[i].s);
        free(in[i].rows);
    }
    free(in);
    free(tok);
    free(ses);
    free(want);
    free(of);
    if (st == HX_OK)
        *n_out = written;
    return hx_api_leave(st);
}
