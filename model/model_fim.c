/* A code model's fill-in-the-middle tokens (hx_model_fim_tokens), found as
 * llama.cpp's vocabulary loader finds them: the GGUF keys first, then the
 * tokens spelled as the known families spell them. */
#include <string.h>

#include "model/model.h"
#include "ops/error.h"
#include "runtime/handle.h"
#include "text/tokenizer.h"

/* Per role: its GGUF keys (the older one second) and the spellings
 * llama.cpp looks for, in its order. */
static const struct {
    const char *key, *old_key;
    const char *text[9];
} roles[6] = {
    {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id",
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
      "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL}},
    {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id",
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>",
      "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL}},
    {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id",
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
      "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL}},
    {"tokenizer.ggml.fim_pad_token_id", NULL, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL}},
    {"tokenizer.ggml.fim_rep_token_id", NULL,
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL}},
    {"tokenizer.ggml.fim_sep_token_id", NULL, {"<|file_sep|>", NULL}},
};

static int32_t key_id(const hx_model *m, const char *key)
{
    uint32_t v;
    if (key && hx_gguf_get_u32(m->gguf, key, &v) == HX_OK && v < m->info.n_vocab)
        return (int32_t)v;
    int32_t i;
    if (key && hx_gguf_get_i32(m->gguf, key, &i) == HX_OK && i >= 0 && (uint32_t)i < m->info.n_vocab)
        return i;
    return -1;
}

hx_status hx_model_fim_tokens(const hx_model *m, hx_fim_tokens *out)
{
    hx_api_enter();
    hx_status st = hx_handle_check(m, HX_HANDLE_MODEL, "hx_model_fim_tokens");
    if (st)
        return hx_api_leave(st);
    if (!out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_model_fim_tokens: NULL out"));
    int32_t id[6];
    for (int r = 0; r < 6; r++) {
        id[r] = key_id(m, roles[r].key);
        if (id[r] < 0)
            id[r] = key_id(m, roles[r].old_key);
    }
    /* Keys first; then the vocabulary in id order, the first token
     * spelled as one of a role's spellings taking it. */
    for (uint32_t t = 0; m->tok && t < m->info.n_vocab; t++) {
        size_t len;
        const char *text = hx_tokenizer_text(m->tok, (int32_t)t, &len);
        if (!text || len < 3 || len > 24)
            continue;
        for (int r = 0; r < 6; r++)
            for (int k = 0; id[r] < 0 && roles[r].text[k]; k++)
                if (strlen(roles[r].text[k]) == len && !memcmp(roles[r].text[k], text, len))
                    id[r] = (int32_t)t;
    }
    *out = (hx_fim_tokens){id[0], id[1], id[2], id[3], id[4], id[5]};
    return hx_api_leave(HX_OK);
}
