/* libFuzzer target for the grammar engine: the input's first half is GBNF
 * text, its second half text to match (and, as a JSON Schema, the whole
 * input goes through hx_json_schema_to_grammar), so that the parser, the
 * matcher and the converter see hostile bytes under the sanitizers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hetero.h"
#include "text/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t half = size / 2;
    hx_grammar *g = NULL;
    if (hx_grammar_parse((const char *)data, half, &g) == HX_OK) {
        hx_grammar_state *s;
        if (hx_grammar_state_create(g, &s) == HX_OK) {
            for (size_t i = half; i < size; i++)
                if (hx_grammar_accept(s, (const char *)data + i, 1) != 1)
                    break;
            (void)hx_grammar_can_end(s);
            hx_grammar_state_free(s);
        }
        hx_grammar_free(g);
    }
    char *schema = malloc(size + 1);
    if (schema) {
        memcpy(schema, data, size);
        schema[size] = '\0';
        char out[1 << 14];
        size_t len;
        (void)hx_json_schema_to_grammar(schema, out, sizeof out, &len);
        free(schema);
    }
    return 0;
}
