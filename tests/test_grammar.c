/* GBNF grammars (text/grammar.h): the parser's errors, the matcher against
 * a backtracking reference on random strings, the vocabulary mask against
 * per-token trials, and constrained generation on a synthetic model; JSON
 * Schemas as grammars: documents a schema accepts match its grammar, those
 * it refuses do not, unsupported keywords are refused by name, and a
 * generation with a schema has its shape. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/generation.h"
#include "tests/hx_test.h"
#include "tests/small_model.h"
#include "text/grammar_impl.h"

static hx_grammar *parse_ok(const char *src)
{
    hx_grammar *g = NULL;
    HX_ASSERT_OK(hx_grammar_parse(src, strlen(src), &g));
    return g;
}

static void parse_fails(const char *src, const char *want)
{
    hx_grammar *g = (hx_grammar *)1;
    ck_assert_int_eq(hx_grammar_parse(src, strlen(src), &g), HX_ERR_INVALID_ARG);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(hx_last_error(), want), "grammar %s: '%s' lacks '%s'", src, hx_last_error(), want);
}

/* Whole-string acceptance through the public matcher. */
static int matches(const hx_grammar *g, const char *text, size_t n)
{
    hx_grammar_state *s;
    HX_ASSERT_OK(hx_grammar_state_create(g, &s));
    int r = hx_grammar_accept(s, text, n);
    ck_assert_int_ge(r, 0);
    int ok = r == 1 && hx_grammar_can_end(s);
    hx_grammar_state_free(s);
    return ok;
}

START_TEST(parser_errors_name_the_place)
{
    parse_fails("root ::= foo\n", "rule 'foo' is used but never defined");
    parse_fails("rot ::= \"a\"\n", "no 'root' rule");
    parse_fails("root ::= root \"a\" | \"b\"\n", "left-recursive");
    parse_fails("root ::= a\na ::= b? a \"x\"\nb ::= \"y\"\n", "rule 'a' is left-recursive");
    parse_fails("root ::= \"abc\n", "unterminated literal");
    parse_fails("root ::= [a-\n", "line 1");
    parse_fails("root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1: rule 'root' is defined twice");
    parse_fails("root ::= \"a\"{3,2}\n", "maximum below its minimum");
    parse_fails("root ::= \"a\"{99999}\n", "repetition count past");
    parse_fails("root ::= ( \"a\" \n", "expecting ')'");
    parse_fails("root ::= [z-a]\n", "upper end below");
    parse_fails("root ::= \"\\q\"\n", "unknown escape");
    parse_fails("root ::= *\n", "expecting an item before the repetition");
    parse_fails("root ::= <think>\n", "token references");
    /* Repetitions copy their item: 200 characters 10,000 times is past
     * the element limit. */
    char big[300] = "root ::= \"";
    memset(big + 10, 'x', 200);
    strcpy(big + 210, "\"{10000}\n");
    parse_fails(big, "expands past");
}
END_TEST

START_TEST(literals_classes_and_repetitions)
{
    hx_grammar *g = parse_ok("# a comment\n"
                             "root ::= \"a\" [b-dx]+ rest? \"!\"{1,2}   # trailing comment\n"
                             "rest ::= ( \"-\" [^a-z] )* \"é\" [α-ω]\n");
    ck_assert(matches(g, "ab!", 3));
    ck_assert(matches(g, "abcdx!!", 7));
    ck_assert(!matches(g, "abcdx!!!", 8));
    ck_assert(!matches(g, "a!", 2));
    ck_assert(matches(g, "ab-1-Zéβ!", strlen("ab-1-Zéβ!")));
    ck_assert(!matches(g, "ab-zéβ!", strlen("ab-zéβ!")));
    ck_assert(!matches(g, "abéz!", strlen("abéz!")));
    /* Invalid UTF-8 never matches, not even `.`. */
    hx_grammar_free(g);
    g = parse_ok("root ::= .+\n");
    ck_assert(matches(g, "x\xc3\xa9", 3));
    ck_assert(!matches(g, "x\xc3", 2));
    ck_assert(!matches(g, "\xff", 1));
    ck_assert(!matches(g, "", 0));
    hx_grammar_free(g);
    g = parse_ok("root ::= \"\\x41\\u00e9\\n\" [\\]\\-]{2} \"\\\"\"\n");
    ck_assert(matches(g, "A\xc3\xa9\n]-\"", 7));
    hx_grammar_free(g);
}
END_TEST

/* The reference: a backtracking matcher straight over the rules, the set
 * of lengths each element sequence can consume from text[at..]. */
typedef struct {
    const hx_grammar *g;
    const uint32_t *cp;
    int n;
    int steps;
} ref_ctx;

static int ref_set(const hx_grammar *g, uint32_t pos, uint32_t c)
{
    const hx_gelem *e = g->el + pos;
    if (e->type == HX_GE_CHAR_ANY)
        return 1;
    int pos_set = e->type == HX_GE_CHAR, hit = 0;
    do {
        uint32_t a = e->value, b = a;
        if (e[1].type == HX_GE_CHAR_RNG_UPPER) {
            b = e[1].value;
            e += 2;
        } else {
            e++;
        }
        hit |= a <= c && c <= b;
    } while (e->type == HX_GE_CHAR_ALT);
    return hit == pos_set;
}

/* ends[] gets every index where the sequence from element `pos` (to its
 * alternative's end), started at `at`, can stop. */
static void ref_seq(ref_ctx *r, uint32_t pos, int at, uint8_t *ends);

static void ref_rule(ref_ctx *r, uint32_t rule, int at, uint8_t *ends)
{
    for (uint32_t alt = r->g->rule[rule];;) {
        ref_seq(r, alt, at, ends);
        while (!hx_gelem_is_end(&r->g->el[alt]))
            alt++;
        if (r->g->el[alt].type == HX_GE_END)
            break;
        alt++;
    }
}

static void ref_seq(ref_ctx *r, uint32_t pos, int at, uint8_t *ends)
{
    ck_assert_int_lt(++r->steps, 50000000);
    const hx_gelem *e = &r->g->el[pos];
    if (hx_gelem_is_end(e)) {
        ends[at] = 1;
        return;
    }
    if (e->type == HX_GE_RULE_REF) {
        uint8_t *mid = calloc((size_t)r->n + 1, 1);
        ref_rule(r, e->value, at, mid);
        for (int k = at; k <= r->n; k++)
            if (mid[k])
                ref_seq(r, pos + 1, k, ends);
        free(mid);
        return;
    }
    if (at < r->n && ref_set(r->g, pos, r->cp[at])) {
        uint32_t next = pos + 1;
        while (r->g->el[next].type == HX_GE_CHAR_RNG_UPPER || r->g->el[next].type == HX_GE_CHAR_ALT)
            next++;
        ref_seq(r, next, at + 1, ends);
    }
}

static int ref_matches(const hx_grammar *g, const char *s)
{
    uint32_t cp[64];
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n < 64; p++)
        cp[n++] = *p; /* the random strings are ASCII */
    ref_ctx r = {g, cp, n, 0};
    uint8_t ends[65] = {0};
    ref_rule(&r, g->root, 0, ends);
    return ends[n];
}

START_TEST(matcher_agrees_with_a_backtracking_reference)
{
    static const char *const grammars[] = {
        "root ::= (\"a\" | \"ab\") (\"b\" | \"c\")* \"c\"?\n",
        "root ::= x x?\nx ::= \"(\" x? \")\" | [ab]\n",
        "root ::= [a-c]{2,4} ( \"-\" [^-]{1,} )? \n",
        "root ::= s\ns ::= \"a\" s \"b\" | \"\"\n",
        "root ::= (w \" \"?)+\nw ::= [abc]+ | \"(\" root \")\"\n",
        "root ::= e\ne ::= t (\"+\" t)*\nt ::= f (\"*\" f)*\nf ::= [abc] | \"(\" e \")\"\n",
    };
    const char alphabet[] = "abc()+* -";
    unsigned seed = 7;
    int agree = 0, accepted = 0;
    for (size_t gi = 0; gi < sizeof grammars / sizeof *grammars; gi++) {
        hx_grammar *g = parse_ok(grammars[gi]);
        for (int t = 0; t < 3000; t++) {
            char s[16];
            int n = (int)(rand_r(&seed) % 12);
            for (int i = 0; i < n; i++)
                s[i] = alphabet[rand_r(&seed) % (t % 2 ? 3 : sizeof alphabet - 1)];
            s[n] = '\0';
            int want = ref_matches(g, s), got = matches(g, s, (size_t)n);
            ck_assert_msg(want == got, "grammar %zu on '%s': reference %d, matcher %d", gi, s, want, got);
            agree++;
            accepted += got;
        }
        hx_grammar_free(g);
    }
    /* The strings must exercise both answers for the check to mean much. */
    ck_assert_int_gt(accepted, 300);
    ck_assert_int_lt(accepted, agree - 300);
}
END_TEST

START_TEST(ambiguous_grammars_hit_a_limit_not_the_memory)
{
    /* Every split of a run of a's is a parse: the live stacks explode. */
    hx_grammar *g = parse_ok("root ::= x+\nx ::= \"a\" | \"a\" x | \"aa\" x? | \"a\" \"a\"? x*\n");
    hx_grammar_state *s;
    HX_ASSERT_OK(hx_grammar_state_create(g, &s));
    int r = 1;
    for (int i = 0; i < 200 && r == 1; i++)
        r = hx_grammar_accept(s, "a", 1);
    ck_assert_int_eq(r, -1);
    ck_assert_msg(strstr(hx_last_error(), "ambiguous grammar"), "%s", hx_last_error());
    /* The state is still usable after a refusal. */
    ck_assert_int_ge(hx_grammar_accept(s, "b", 1), 0);
    hx_grammar_state_free(s);
    hx_grammar_free(g);
}
END_TEST

static const char json_gbnf[] =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

START_TEST(json_grammar_accepts_json_and_refuses_the_rest)
{
    hx_grammar *g = parse_ok(json_gbnf);
    const char *good[] = {"{}", "{\"a\": 1}", "{\"a\": [1, 2.5e3, \"x\\u00e9\"], \"b\": {\"c\": null}}",
                          "{\"k\": true}\n"};
    const char *bad[] = {"{", "{\"a\" 1}", "[1]", "{\"a\": 01}", "{\"a\": tru}", "{} {}", "{\"a\":\"\x01\"}"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        ck_assert_msg(matches(g, good[i], strlen(good[i])), "refused %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!matches(g, bad[i], strlen(bad[i])), "accepted %s", bad[i]);
    hx_grammar_free(g);
}
END_TEST

/* The mask over a vocabulary equals a trial of every token on its own. */
static void mask_equals_trials(const hx_tokenizer *t, const char *gbnf, const char *prefix)
{
    hx_grammar *g = parse_ok(gbnf);
    hx_grammar_vocab *v;
    HX_ASSERT_OK(hx_grammar_vocab_create(t, &v));
    hx_grammar_state *s;
    HX_ASSERT_OK(hx_grammar_state_create(g, &s));
    ck_assert_int_eq(hx_grammar_accept(s, prefix, strlen(prefix)), 1);
    int32_t n = hx_tokenizer_vocab_size(t);
    float *l = malloc((size_t)n * sizeof *l);
    for (int32_t i = 0; i < n; i++)
        l[i] = (float)i;
    HX_ASSERT_OK(hx_grammar_mask(s, v, l));
    int allowed = 0;
    for (int32_t i = 0; i < n; i++) {
        int want = hx_grammar_allows(s, v, i);
        ck_assert_msg(want == (l[i] != -INFINITY), "token %d: trial %d, mask %g", i, want, l[i]);
        allowed += want;
    }
    ck_assert_int_gt(allowed, 0);
    ck_assert_int_lt(allowed, n);
    free(l);
    hx_grammar_state_free(s);
    hx_grammar_vocab_free(v);
    hx_grammar_free(g);
}

START_TEST(vocabulary_mask_equals_per_token_trials)
{
    hx_tokenizer *t;
    HX_ASSERT_OK(hx_tokenizer_create_bytes(&t));
    mask_equals_trials(t, json_gbnf, "{\"ab");
    mask_equals_trials(t, "root ::= \"é\" [α-ω]+\n", "\xc3");
    hx_tokenizer_free(t);
    const char *path = hx_test_smollm2("grammar mask over a real vocabulary");
    if (!path)
        return;
    hx_tokenizer *rt;
    HX_ASSERT_OK(hx_tokenizer_open(path, &rt));
    mask_equals_trials(rt, json_gbnf, "{\"name\": \"Al");
    mask_equals_trials(rt, json_gbnf, "{\"n\": [1, 2");
    hx_tokenizer_close(rt);
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
        c->n += k;
        c->text[c->n] = '\0';
    }
    return 0;
}

START_TEST(generation_follows_the_grammar)
{
    hx_small_model sm;
    hx_small_model_write(&sm, "f32");
    hx_runtime *rt = hx_small_runtime(1, NULL);
    hx_model *m;
    HX_ASSERT_OK(hx_model_load(rt, sm.path, NULL, &m));
    hx_session *s = NULL;
    int32_t prompt[4] = {256, 'H', 'i', ':'};
    static const char *const grammars[] = {
        "root ::= (\"yes\" | \"no\") \", because \" [a-z ]{3,12} \".\"\n",
        "root ::= \"{\\\"n\\\": \" [1-9] [0-9]{0,3} \"}\"\n",
    };
    for (int greedy = 0; greedy < 2; greedy++)
        for (size_t gi = 0; gi < 2; gi++) {
            hx_sampling sp = hx_sampling_default();
            sp.temperature = greedy ? 0.0f : 1.0f;
            sp.seed = 11 + gi;
            sp.grammar = grammars[gi];
            hx_grammar *g = parse_ok(grammars[gi]);
            collected c = {{0}, 0};
            hx_generation_stats st;
            HX_ASSERT_OK(hx_session_open(m, &s));
            HX_ASSERT_OK(hx_session_generate(s, prompt, 4, 64, &sp, collect, &c, &st));
            HX_ASSERT_OK(hx_session_close(s));
            ck_assert_msg(st.finish == HX_FINISH_STOP, "'%s' ended with %s", c.text,
                          hx_finish_reason_str(st.finish));
            ck_assert_msg(matches(g, c.text, c.n), "'%s' does not follow grammar %zu", c.text, gi);
            hx_grammar_free(g);
        }
    /* A bad grammar fails the call with its place, and the session goes on. */
    hx_sampling bad = hx_sampling_default();
    bad.grammar = "root ::= \"a\" | oops\n";
    HX_ASSERT_OK(hx_session_open(m, &s));
    ck_assert_int_eq(hx_session_generate(s, prompt, 4, 8, &bad, NULL, NULL, NULL), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "line 1, column 16: rule 'oops'"), "%s", hx_last_error());
    HX_ASSERT_OK(hx_session_generate(s, prompt, 4, 4, NULL, NULL, NULL, NULL));
    HX_ASSERT_OK(hx_session_close(s));
    HX_ASSERT_OK(hx_model_free(m));
    hx_runtime_close(rt);
    hx_small_model_remove(&sm);
}
END_TEST

/* ---- JSON Schemas as grammars (hx_json_schema_to_grammar) ---- */

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
    hx_grammar *g = parse_ok(gbnf);
    int ok = matches(g, doc, strlen(doc));
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
    /* draft 4's tuple form (items as an array), as llama.cpp reads it: prefixItems */
    {"{\"items\": [{\"type\": \"integer\"}, {\"const\": \"z\"}]}", {"[-3000, \"z\"]", "[7,\"z\"]"},
     {"[1]", "[1, \"z\", 2]", "[\"z\", 1]"}},
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

Suite *suite_grammar(void)
{
    Suite *s = suite_create("grammar");
    TCase *tc = tcase_create("gbnf");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, parser_errors_name_the_place);
    tcase_add_test(tc, literals_classes_and_repetitions);
    tcase_add_test(tc, matcher_agrees_with_a_backtracking_reference);
    tcase_add_test(tc, ambiguous_grammars_hit_a_limit_not_the_memory);
    tcase_add_test(tc, json_grammar_accepts_json_and_refuses_the_rest);
    tcase_add_test(tc, vocabulary_mask_equals_per_token_trials);
    tcase_add_test(tc, generation_follows_the_grammar);
    suite_add_tcase(s, tc);
    TCase *js = tcase_create("json_schema");
    tcase_set_timeout(js, 120);
    tcase_add_test(js, schemas_accept_what_they_should);
    tcase_add_test(js, what_cannot_be_enforced_is_refused_by_name);
    tcase_add_test(js, generation_with_a_schema_gives_its_shape);
    suite_add_tcase(s, js);
    return s;
}
