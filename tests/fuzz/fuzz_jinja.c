/* libFuzzer target for the Jinja engine (text/jinja_*.c): arbitrary bytes
 * as a template (and, after a NUL, as the JSON of `messages`), parsed and
 * rendered under small limits, so that every path of the lexer, the
 * parser, the evaluator and the JSON reader runs on malformed input under
 * AddressSanitizer and UBSan, and none may crash, hang or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"

static const char MESSAGES[] = "[{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"Hi\"}, "
                               "{\"role\": \"assistant\", \"content\": \"A\", \"tool_calls\": [{\"function\": "
                               "{\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    size_t tlen = strnlen(src, size);
    const char *msgs = MESSAGES;
    size_t mlen = sizeof MESSAGES - 1;
    if (tlen < size) {
        msgs = src + tlen + 1;
        mlen = size - tlen - 1;
    }
    hx_jinja_template *t;
    if (hx_jinja_parse(src, tlen, &t) != HX_OK)
        return 0;
    hx_jinja_limits lim = {.max_output = 1 << 20, .max_memory = 16 << 20, .max_depth = 200, .max_loop = 10000,
                           .max_steps = 200000};
    hx_jinja_render *r;
    if (hx_jinja_render_new(t, &lim, &r) == HX_OK) {
        const char *text;
        hx_jinja_popped prefill;
        size_t len;
        hx_jinja_set_now(r, 1768478400);
        if (hx_jinja_set_json(r, "messages", msgs, mlen) == HX_OK &&
            hx_jinja_set_json(r, "tools", "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]", 51) == HX_OK &&
            hx_jinja_set_str(r, "bos_token", "<s>") == HX_OK && hx_jinja_set_bool(r, "add_generation_prompt", 1) == HX_OK &&
            hx_jinja_pop_last(r, "messages", "assistant", &prefill) == HX_OK)
            hx_jinja_run(r, &text, &len);
        hx_jinja_render_free(r);
    }
    hx_jinja_free(t);
    return 0;
}
