/* JSON Schema to GBNF (hx_json_schema_to_grammar): documents the schema
 * accepts match its grammar, documents it refuses do not, unsupported
 * keywords are refused by name, and generation with a schema gives JSON
 * that has the schema's shape. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tests/hx_test.h"
#include "tests/small_model.h"
#include "text/grammar.h"

static char *to_grammar(const char *schema)
{
    size_t len = 0;
    ck_assert_int_eq(hx_json_schema_to_grammar(schema, NULL, 0, &len), HX_ERR_RANGE);
    char *g = malloc(len + 1);
    HX_ASSERT_OK(hx_json_schema_to_grammar(schema, g, len + 1, &len));
    ck_assert_uint_eq(strlen(g), len);
    return g;
}

static int doc_matches(const char *gbnf, const char *doc)
{
    hx_grammar *g;
    HX_ASSERT_OK(hx_grammar_parse(gbnf, strlen(gbnf), &g));
    hx_grammar_state *s;
    HX_ASSERT_OK(hx_grammar_state_create(g, &s));
    int r = hx_grammar_accept(s, doc, strlen(doc));
    int ok = r == 1 && hx_grammar_can_end(s);
    hx_grammar_state_free(s);
    hx_grammar_free(g);
    return ok;
}

typedef struct {
    const char *schema;
    const char *good[4];
    const char *bad[4];
} schema_case;

static const schema_case cases[] = {
    {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\"},"
     " \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\"]}, \"maxItems\": 2}},"
     " \"required\": [\"name\", \"age\"], \"additionalProperties\": false}",
     {"{\"name\": \"Ann\", \"age\": 31}", "{\"name\":\"x\",\"age\":-2,\"tags\":[\"a\",\"b\"]}",
      "{\"name\": \"\", \"age\": 0, \"tags\": []}"},
     {"{\"age\": 31, \"name\": \"Ann\"}", "{\"name\": \"Ann\"}", "{\"name\":\"x\",\"age\":1,\"tags\":[\"a\",\"b\",\"a\"]}",
      "{\"name\":\"x\",\"age\":1.5}"}},
    {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"boolean\"}, \"b\": {\"type\": \"null\"}}}",
     {"{}", "{\"a\": true}", "{\"b\": null}", "{\"a\": false, \"b\": null}"},
     {"{\"b\": null, \"a\": true}", "{\"a\": 1}", "{,\"a\": true}", "{\"c\": 1}"}},
    {"{\"anyOf\": [{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}, {\"type\": \"number\"}]}",
     {"\"ab\"", "\"abc\"", "1.5e3", "-0.25"},
     {"\"a\"", "\"abcd\"", "true", "01"}},
    {"{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"},"
     " \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"v\"]}},"
     " \"$ref\": \"#/$defs/node\"}",
     {"{\"v\": 1}", "{\"v\": 1, \"kids\": [{\"v\": 2}, {\"v\": 3, \"kids\": []}]}"},
     {"{\"kids\": []}", "{\"v\": 1, \"kids\": [{}]}"}},
    {"{\"type\": \"array\", \"prefixItems\": [{\"const\": \"x\"}, {\"type\": \"string\", \"format\": \"date\"}]}",
     {"[\"x\", \"2026-12-03\"]"},
     {"[\"y\", \"2026-12-03\"]", "[\"x\", \"2026-13-03\"]", "[\"x\"]"}},
    {"{\"type\": [\"string\", \"null\"]}", {"\"s\"", "null"}, {"1", "[]"}},
    {"{\"type\": \"object\"}", {"{}", "{\"k\": [1, {\"x\": null}]}"}, {"[]", "{\"k\"}"}},
};

START_TEST(schemas_accept_what_they_should)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *g = to_grammar(cases[i].schema);
        for (int k = 0; k < 4 && cases[i].good[k]; k++)
            ck_assert_msg(doc_matches(g, cases[i].good[k]), "schema %zu refused %s; grammar:\n%s", i,
                          cases[i].good[k], g);
        for (int k = 0; k < 4 && cases[i].bad[k]; k++)
            ck_assert_msg(!doc_matches(g, cases[i].bad[k]), "schema %zu accepted %s; grammar:\n%s", i,
                          cases[i].bad[k], g);
        free(g);
    }
}
END_TEST

static void refused(const char *schema, const char *want)
{
    size_t len = 7;
    char buf[64];
    ck_assert_int_eq(hx_json_schema_to_grammar(schema, buf, sizeof buf, &len), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), want), "%s: '%s' lacks '%s'", schema, hx_last_error(), want);
}

START_TEST(what_cannot_be_enforced_is_refused_by_name)
{
    refused("{\"type\": \"string\", \"pattern\": \"^a+$\"}", "keyword 'pattern' is not supported");
    refused("{\"type\": \"integer\", \"minimum\": 3}", "keyword 'minimum'");
    refused("{\"properties\": {\"a\": {\"type\": \"number\", \"multipleOf\": 2}}}", "root-a: the keyword 'multipleOf'");
    refused("{\"$ref\": \"#/$defs/none\"}", "names no definition");
    refused("{\"$ref\": \"http://x/y.json\"}", "only local references");
    refused("{\"type\": \"object\", \"required\": [\"q\"], \"properties\": {}}", "required property 'q'");
    refused("{\"type\": \"strin\"}", "unknown type 'strin'");
    refused("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", "maxItems 2 is below minItems 3");
    refused("{\"type\": ", "not JSON");
    refused("[1]", "a schema must be an object");
}
END_TEST

typedef struct {
    char text[1024];
    size_t n;
} collected;

static int collect(void *user, int32_t token, const char *piece)
{
    collected *c = user;
    size_t k = strlen(piece);
    if (c->n + k < sizeof c->text) {
        memcpy(c->text + c->n, piece, k);
        c->text[c->n += k] = '\0';
    }
    return 0;
}

START_TEST(generation_with_a_schema_gives_its_shape)
{
    hx_small_model sm;
    hx_small_model_write(&sm, "f32");
    hx_runtime *rt = hx_small_runtime(1, NULL);
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, sm.path, NULL, &m));
    char *g = to_grammar("{\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"},"
                         " \"n\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 1, \"maxItems\": 3}},"
                         " \"required\": [\"ok\", \"n\"], \"additionalProperties\": false}");
    int32_t prompt[3] = {256, '{', '\n'};
    for (int seed = 0; seed < 4; seed++) {
        hx_session *s;
        HX_ASSERT_OK(hx_session_open(m, &s));
        hx_sampling sp = hx_sampling_default();
        sp.temperature = seed ? 1.0f : 0.0f;
        sp.seed = (uint64_t)seed;
        sp.grammar = g;
        collected c = {{0}, 0};
        hx_generation_stats st;
        HX_ASSERT_OK(hx_session_generate(s, prompt, 3, 200, &sp, collect, &c, &st));
        HX_ASSERT_OK(hx_session_close(s));
        ck_assert_msg(st.finish == HX_FINISH_STOP, "'%s' ended with %s", c.text, hx_finish_reason_str(st.finish));
        json_error_t e;
        json_t *doc = json_loads(c.text, 0, &e);
        ck_assert_msg(doc != NULL, "'%s' is not JSON: %s", c.text, e.text);
        ck_assert(json_is_boolean(json_object_get(doc, "ok")));
        json_t *n = json_object_get(doc, "n");
        ck_assert(json_is_array(n) && json_array_size(n) >= 1 && json_array_size(n) <= 3);
        for (size_t i = 0; i < json_array_size(n); i++)
            ck_assert(json_is_integer(json_array_get(n, i)));
        ck_assert_uint_eq(json_object_size(doc), 2);
        json_decref(doc);
    }
    free(g);
    HX_ASSERT_OK(hx_model_free(m));
    hx_runtime_close(rt);
    hx_small_model_remove(&sm);
}
END_TEST

Suite *suite_json_schema(void)
{
    Suite *s = suite_create("json_schema");
    TCase *tc = tcase_create("convert");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, schemas_accept_what_they_should);
    tcase_add_test(tc, what_cannot_be_enforced_is_refused_by_name);
    tcase_add_test(tc, generation_with_a_schema_gives_its_shape);
    suite_add_tcase(s, tc);
    return s;
}
