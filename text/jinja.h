/* A bounded Jinja template engine for chat templates (text/jinja_*.c).
 *
 * It renders the subset of Jinja2 that chat templates use, with the
 * semantics of jinja2's ImmutableSandboxedEnvironment as Hugging Face's
 * apply_chat_template sets it up (trim_blocks, lstrip_blocks, the
 * loopcontrols extension, transformers' tojson, raise_exception and
 * strftime_now).  Every render runs under hard limits: the text it writes,
 * the memory its values take, the depth of macro calls and expressions,
 * the iterations of one loop and the steps of the whole render; hitting
 * one stops the render with an error that names the limit and the
 * template line.  Errors go to hx_last_error(). */
#ifndef HX_TEXT_JINJA_H
#define HX_TEXT_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hetero.h"

typedef struct {
    size_t max_output; /* bytes of rendered text */
    size_t max_memory; /* bytes of values (strings, lists, dicts) made while rendering */
    uint32_t max_depth; /* nested macro calls, includes of expressions and statements */
    uint64_t max_loop; /* iterations of one loop, and elements of one range() */
    uint64_t max_steps; /* statements and expression nodes evaluated in all */
} hx_jinja_limits;

/* The limits of a chat prompt: 16 MiB of text, 64 MiB of values, depth
 * 1000, 1e6 iterations per loop, 1e7 steps (a second or so). */
hx_jinja_limits hx_jinja_limits_default(void);

typedef struct hx_jinja_template hx_jinja_template;

/* Parses `len` bytes of Jinja source.  A syntax error, an unknown
 * statement, or a filter or test that does not exist outside a condition
 * (as jinja2 refuses it when it compiles) is HX_ERR_FORMAT naming the line. */
hx_status hx_jinja_parse(const char *src, size_t len, hx_jinja_template **out);
void hx_jinja_free(hx_jinja_template *t);

/* One render: the template's variables, then the text. */
typedef struct hx_jinja_render hx_jinja_render;

hx_status hx_jinja_render_new(const hx_jinja_template *t, const hx_jinja_limits *lim, hx_jinja_render **out);
void hx_jinja_render_free(hx_jinja_render *r);
/* strftime_now's clock (seconds since the epoch, UTC); by default the time the render starts. */
void hx_jinja_set_now(hx_jinja_render *r, time_t now);
/* Variables of the render: a JSON value (HX_ERR_FORMAT when `json` is not
 * JSON), a string, a boolean. */
hx_status hx_jinja_set_json(hx_jinja_render *r, const char *name, const char *json, size_t len);
hx_status hx_jinja_set_str(hx_jinja_render *r, const char *name, const char *s);
hx_status hx_jinja_set_bool(hx_jinja_render *r, const char *name, int b);
/* Every member of a JSON object, each a variable. */
hx_status hx_jinja_set_json_members(hx_jinja_render *r, const char *json, size_t len);
/* The message hx_jinja_pop_last took out; its strings live until the
 * render is freed. */
typedef struct {
    const char *content; /* its "content" as a string ("" when none); NULL: nothing taken out */
    const char *thought; /* its "reasoning_content" ("" when none) */
    int tool_calls;      /* it has tool calls: left in the list, content NULL */
} hx_jinja_popped;
/* When the list `name` ends with a message (a mapping) whose "role" is
 * `role` and that makes no tool calls, removes it and returns its text in
 * *m (text parts joined with "\n\n"); else m->content is NULL.  HX_ERR_INVALID_ARG when that content is
 * neither a string nor a list of {"type": "text", "text": ...} parts, or
 * its reasoning_content is not a string. */
hx_status hx_jinja_pop_last(hx_jinja_render *r, const char *name, const char *role, hx_jinja_popped *m);
/* Renders; *text (NUL-terminated, *len bytes) lives until the render is freed. */
hx_status hx_jinja_run(hx_jinja_render *r, const char **text, size_t *len);

/* The messages of a JSON conversation as plain role/content pairs, for the
 * built-in families (llama.cpp's --no-jinja, a file without a template):
 * content a string, null, or text parts; *msgs and *storage are malloc'ed
 * (free both).  HX_ERR_FORMAT for malformed JSON, HX_ERR_INVALID_ARG for a
 * message without a string role or with content that is not text. */
hx_status hx_chat_plain_messages(const char *messages, hx_chat_message **msgs, size_t *n, char **storage);

#endif
