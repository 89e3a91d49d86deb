/* The chat-template test vectors (tests/chat_vectors.c). */
#ifndef HX_TESTS_CHAT_VECTORS_H
#define HX_TESTS_CHAT_VECTORS_H

#include <stddef.h>

#include "hetero.h"

typedef struct {
    const char *model;    /* whose Jinja template `jinja` is; NULL: the family by name only */
    const char *family;   /* llama.cpp's name of its family */
    int refused;          /* a family hetero does not format: it must say so */
    const char *jinja;    /* the template's source, or NULL */
    const char *expected; /* the conversation, then `extra`, with the assistant's turn opened */
    const hx_chat_message *extra;
    size_t n_extra;
} hx_chat_vector;

#define HX_CHAT_CONVERSATION 6
extern const hx_chat_message hx_chat_conversation[HX_CHAT_CONVERSATION];
extern const hx_chat_vector hx_chat_vectors[];
extern const size_t hx_chat_n_vectors;

#endif
