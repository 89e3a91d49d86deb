/* The tokenizer's layout, shared by text/tokenizer*.c only. */
#ifndef HX_TEXT_TOKENIZER_IMPL_H
#define HX_TEXT_TOKENIZER_IMPL_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "text/tokenizer.h"

typedef enum { HX_VOCAB_SPM = 1, HX_VOCAB_BPE = 2 } hx_vocab_kind;

/* Pre-tokenizers: how byte-level BPE splits text into words first. */
typedef enum {
    HX_PRE_DEFAULT = 0, /* llama.cpp's fallback chain of four regexes  */
    HX_PRE_GPT2,        /* 's|'t|...| ?\p{L}+| ?\p{N}+|...              */
    HX_PRE_LLAMA3,      /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|... */
    HX_PRE_QWEN2,       /* as LLAMA3 with single digits                 */
    HX_PRE_STARCODER,   /* \p{N} then GPT2                              */
    HX_PRE_FALCON,      /* punctuation runs, GPT2, digit triples        */
} hx_pre_kind;

struct hx_tokenizer {
    hx_vocab_kind kind;
    hx_pre_kind pre;
    uint32_t n;          /* vocabulary size                          */
    char *blob;          /* every token's text, each NUL-terminated  */
    size_t *off;         /* token i's text = blob + off[i]           */
    uint32_t *len;
    float *score;
    uint16_t *attr;      /* HX_TOKEN_ATTR_*                          */
    uint8_t *eog;        /* 1 where the token ends generation        */
    uint32_t *hash;      /* open addressing: id + 1, 0 = empty       */
    uint32_t hash_mask;
    uint32_t max_len;    /* longest token text                       */

    uint32_t n_merges;
    char *mblob;         /* merge i: left at moff[i], right after it  */
    size_t *moff;
    uint32_t *mleft, *mright; /* lengths                              */
    uint32_t *mhash;     /* merge index + 1, 0 = empty               */
    uint32_t mhash_mask;

    int32_t bos, eos, unk, eot, eom, sep, pad;
    int add_space_prefix, add_bos, add_eos, ignore_merges, clean_spaces;

    int32_t *special;    /* parseable tokens, longest text first      */
    uint32_t n_special;
    int32_t byte_token[256]; /* SPM byte fallback; -1 = none          */
    uint32_t max_piece;  /* longest token_to_piece output            */
    /* The pieces' byte trie for grammars (text/grammar_vocab.c), built by
     * the first generation with a grammar and kept for the tokenizer's
     * life; an atomic pointer, so that concurrent first uses race safely. */
    _Atomic(struct hx_grammar_vocab *) grammar_vocab;
};

/* A growing array of ids. */
typedef struct {
    int32_t *v;
    size_t n, cap;
} hx_tokvec;

hx_status hx_tokenizer_push(hx_tokvec *v, int32_t id);

/* Writes token `id`'s piece to dst (room for t->max_piece bytes) and
 * returns its length; `lstrip` drops one leading space.  id must be valid. */
size_t hx_tokenizer_piece(const hx_tokenizer *t, int32_t id, int special, int lstrip, char *dst);

/* Rank of merging `a` then `b` (lowest merges first), or -1. */
int32_t hx_tokenizer_merge_rank(const hx_tokenizer *t, const char *a, size_t alen,
                                const char *b, size_t blen);

/* Encoders for one stretch of plain text (no special tokens inside). */
hx_status hx_tokenizer_spm_encode(const hx_tokenizer *t, const char *text, size_t len,
                                  int space_prefix, hx_tokvec *out);
hx_status hx_tokenizer_bpe_encode(const hx_tokenizer *t, const char *text, size_t len,
                                  hx_tokvec *out);

/* Pre-tokenization: splits cps[0..n) into words; on success *words holds
 * *nwords lengths (in code points, summing to n; caller frees). */
hx_status hx_tokenizer_pre_split(hx_pre_kind kind, const uint32_t *cps, size_t n,
                                 uint32_t **words, size_t *nwords);

/* The byte-level BPE alphabet: byte b is written as this code point. */
uint32_t hx_tokenizer_bpe_byte_cp(uint8_t b);
/* The inverse: the byte code point cp stands for, or -1. */
int hx_tokenizer_bpe_cp_byte(uint32_t cp);

#endif
