/* The tokenizer: llama.cpp-compatible text <-> token ids for the `llama`
 * (SentencePiece BPE with scores and byte fallback) and `gpt2` (byte-level
 * BPE with merge ranks) vocabularies of GGUF files.
 *
 * The public half (open/close, encode, token_to_piece, decode and the
 * accessors) is declared in include/hetero.h; this header adds what the
 * library itself uses: construction from a parsed GGUF or from plain arrays,
 * the streaming detokenizer, and token attributes. */
#ifndef HX_TEXT_TOKENIZER_H
#define HX_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "hetero.h"
#include "gguf/gguf.h"

/* Token types as GGUF stores them (tokenizer.ggml.token_type). */
enum {
    HX_TOKEN_TYPE_UNDEFINED = 0,
    HX_TOKEN_TYPE_NORMAL = 1,
    HX_TOKEN_TYPE_UNKNOWN = 2,
    HX_TOKEN_TYPE_CONTROL = 3,
    HX_TOKEN_TYPE_USER_DEFINED = 4,
    HX_TOKEN_TYPE_UNUSED = 5,
    HX_TOKEN_TYPE_BYTE = 6,
};

/* Token attributes (bits): the type, plus what the loader infers. */
enum {
    HX_TOKEN_ATTR_UNKNOWN = 1u << 0,
    HX_TOKEN_ATTR_UNUSED = 1u << 1,
    HX_TOKEN_ATTR_NORMAL = 1u << 2,
    HX_TOKEN_ATTR_CONTROL = 1u << 3,
    HX_TOKEN_ATTR_USER_DEFINED = 1u << 4,
    HX_TOKEN_ATTR_BYTE = 1u << 5,
    HX_TOKEN_ATTR_LSTRIP = 1u << 7, /* eat white space before it when parsed */
    HX_TOKEN_ATTR_RSTRIP = 1u << 8, /* eat white space after it when parsed */
};

/* In hx_tokenizer_desc: "use the model's default id". */
#define HX_TOKEN_DEFAULT INT32_MIN

/* A vocabulary as plain arrays (what the GGUF keys hold).  Strings need not
 * be NUL-terminated when their lengths are given. */
typedef struct {
    const char *model;              /* "llama" or "gpt2"                        */
    const char *pre;                /* pre-tokenizer name; NULL = "default"     */
    uint32_t n_tokens;
    const char *const *tokens;
    const size_t *token_lens;       /* NULL: strlen                             */
    const float *scores;            /* NULL: all 0                              */
    const int32_t *types;           /* HX_TOKEN_TYPE_*; NULL: all NORMAL        */
    uint32_t n_merges;              /* gpt2: "left right" strings, rank order   */
    const char *const *merges;
    const size_t *merge_lens;       /* NULL: strlen                             */
    /* Special ids: HX_TOKEN_DEFAULT = model default, -1 = none. */
    int32_t bos, eos, unk, eot, eom, sep, pad;
    /* Flags: -1 = model default. */
    int add_space_prefix, add_bos, add_eos;
    /* general.name: llama.cpp adjusts special tokens of some models by name
     * (Phi-3's eat the white space after them).  NULL = none. */
    const char *name;
} hx_tokenizer_desc;

/* A desc with every id and flag at its default and nothing else set. */
hx_tokenizer_desc hx_tokenizer_desc_default(void);

/* Builds a tokenizer from arrays; copies everything it keeps. */
hx_status hx_tokenizer_create(const hx_tokenizer_desc *d, hx_tokenizer **out);
/* Builds one from a GGUF's tokenizer.ggml.* keys; `g` may be closed after. */
hx_status hx_tokenizer_load(const hx_gguf *g, hx_tokenizer **out);
/* Frees a tokenizer (NULL is fine); the same as hx_tokenizer_close. */
void hx_tokenizer_free(hx_tokenizer *t);

/* The byte vocabulary of synthetic models: token b (0..255) is byte b,
 * 256 is BOS "<s>", 257 is EOS "</s>"; a `gpt2` vocabulary without merges,
 * so any text encodes to its UTF-8 bytes and decodes back unchanged. */
#define HX_TOKENIZER_BYTES_VOCAB 258
#define HX_TOKENIZER_BYTES_BOS 256
#define HX_TOKENIZER_BYTES_EOS 257
hx_status hx_tokenizer_create_bytes(hx_tokenizer **out);
/* Writes that vocabulary's tokenizer.ggml.* keys, for synthetic GGUF files. */
hx_status hx_tokenizer_write_bytes_kv(hx_gguf_writer *w);

/* hx_tokenizer_encode with BOS and EOS where the model asks for them
 * (add_special, as llama.cpp's llama_tokenize takes it). */
hx_status hx_tokenizer_encode_prompt(const hx_tokenizer *t, const char *text, size_t len, int add_special,
                                     int parse_special, int32_t *ids, size_t cap, size_t *n);

/* Token facts; out-of-range ids give 0 / NULL. */
unsigned hx_tokenizer_attr(const hx_tokenizer *t, int32_t id);
const char *hx_tokenizer_text(const hx_tokenizer *t, int32_t id, size_t *len);
float hx_tokenizer_score(const hx_tokenizer *t, int32_t id);
/* The id of a token's exact text, or -1. */
int32_t hx_tokenizer_find(const hx_tokenizer *t, const char *text, size_t len);

/* Streaming detokenizer: feed ids one at a time and print what comes out.
 * Output is always valid UTF-8: a character split across tokens is held
 * until it completes, a byte sequence that cannot complete becomes U+FFFD
 * as soon as that is certain, and what is still held at the end becomes
 * U+FFFD in hx_detok_finish.  The first piece loses one leading space when
 * the vocabulary adds a space prefix, as hx_tokenizer_decode does. */
typedef struct {
    const hx_tokenizer *tok;
    int special;         /* render control/unknown tokens' text */
    int first;           /* no piece emitted yet */
    uint8_t held[4];
    size_t nheld;
} hx_detok;

/* The most bytes one hx_detok_push or hx_detok_finish can write. */
size_t hx_detok_max_out(const hx_tokenizer *t);
void hx_detok_init(hx_detok *d, const hx_tokenizer *t, int special);
/* Appends the complete characters that token `id` finishes to out; *n gets
 * their length (no NUL).  HX_ERR_RANGE (state unchanged, *n = room needed)
 * when cap is too small; HX_ERR_INVALID_ARG for an id outside the vocab. */
hx_status hx_detok_push(hx_detok *d, int32_t id, char *out, size_t cap, size_t *n);
/* Flushes what is held (as U+FFFD) and resets for a new stream. */
hx_status hx_detok_finish(hx_detok *d, char *out, size_t cap, size_t *n);

#endif
