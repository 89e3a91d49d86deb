/* libFuzzer target for the tool-call parser and grammar and the thought's
 * split: the first byte picks the format and whether the text is a
 * partial answer, the rest is a model's answer (parsed and split whole and
 * at every eighth prefix: a prefix's thought and answer must be prefixes
 * of the whole's) and, as JSON, a tools list for hx_tool_calls_grammar, so
 * that hostile bytes meet the scanner and the schema path under the
 * sanitizers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetero.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    const hx_tool_format f = (hx_tool_format)(data[0] % 7);
    const int partial = (data[0] >> 2) & 1;
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    static char out[1 << 16];
    size_t len;
    (void)hx_tool_calls_parse(f, text, n, partial, out, sizeof out, &len);
    /* the xml and glm formats read values by the tools' schemas */
    (void)hx_tool_calls_parse_tools(f, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                                       "{\"properties\":{\"a\":{\"type\":\"string\"}}}}}]",
                                    text, n, partial, out, sizeof out, &len);
    for (size_t k = 0; k < n; k += 8)
        (void)hx_tool_calls_parse(f, text, k, 1, out, sizeof out, &len);
    const int opened = (data[0] >> 5) & 1;
    hx_reasoning_span whole, part;
    if (hx_reasoning_split(text, n, "<think>", "</think>", opened, 0, &whole) != HX_OK)
        abort();
    for (size_t k = 0; k < n; k += 8) {
        if (hx_reasoning_split(text, k, "<think>", "</think>", opened, 1, &part) != HX_OK)
            abort();
        /* streaming sends what a partial split shows: it must never be taken back */
        if (part.reasoning_len && (part.reasoning_at != whole.reasoning_at || part.reasoning_len > whole.reasoning_len))
            abort();
        if (part.content_len && (part.content_at != whole.content_at || part.content_len > whole.content_len))
            abort();
    }
    char *tools = malloc(n + 1);
    if (tools) {
        memcpy(tools, text, n);
        tools[n] = '\0';
        (void)hx_tool_calls_grammar(f, tools, (data[0] >> 3) & 1 ? "f" : NULL, (data[0] >> 4) & 1, out, sizeof out,
                                    &len);
        free(tools);
    }
    return 0;
}
