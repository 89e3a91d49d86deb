/* Tool calls (text/tool_calls.c, text/tool_grammar.c): the format each
 * template is recognised as; each format's calls read out of whole
 * answers, malformed ones left as content; every prefix of an answer
 * parsed as a partial one gives prefixes of the final content and
 * arguments and never shows call text as content; the forcing grammar
 * accepts calls whose arguments fit the schema and refuses the rest. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tests/hx_test.h"
#include "text/grammar_impl.h"

static json_t *parse(hx_tool_format f, const char *text, size_t n, int partial)
{
    size_t len = 0;
    ck_assert_int_eq(hx_tool_calls_parse(f, text, n, partial, NULL, 0, &len), HX_ERR_RANGE);
    char *buf = malloc(len + 1);
    ck_assert_ptr_nonnull(buf);
    HX_ASSERT_OK(hx_tool_calls_parse(f, text, n, partial, buf, len + 1, &len));
    json_error_t e;
    json_t *v = json_loads(buf, 0, &e);
    ck_assert_msg(v != NULL, "not JSON: %s", buf);
    free(buf);
    return v;
}

/* The whole answer's parse, compared with `want` (a JSON text). */
static void expect(hx_tool_format f, const char *text, const char *want)
{
    json_t *got = parse(f, text, strlen(text), 0), *w = json_loads(want, 0, NULL);
    ck_assert_ptr_nonnull(w);
    char *gs = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS), *ws = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
    ck_assert_msg(json_equal(got, w), "%s answer %s:\n got %s\nwant %s", hx_tool_format_name(f), text, gs, ws);
    free(gs);
    free(ws);
    json_decref(got);
    json_decref(w);
}

static int is_prefix(const char *p, const char *s) { return !strncmp(p, s, strlen(p)); }

/* Every prefix of `text` as a partial answer: content and each call's
 * name and arguments agree with the final parse's (prefixes of them), the
 * calls never outnumber the final ones, and no content holds `marker`'s
 * first character sequence (the call text never leaks as content). */
static void prefixes_agree(hx_tool_format f, const char *text, const char *marker)
{
    size_t n = strlen(text);
    json_t *fin = parse(f, text, n, 0);
    const char *fc = json_string_value(json_object_get(fin, "content"));
    json_t *fcalls = json_object_get(fin, "tool_calls");
    for (size_t k = 0; k <= n; k++) {
        json_t *p = parse(f, text, k, 1);
        json_t *c = json_object_get(p, "content"), *calls = json_object_get(p, "tool_calls");
        if (json_is_string(c)) {
            ck_assert_msg(fc && is_prefix(json_string_value(c), fc), "prefix %zu of %s: content '%s' vs final '%s'",
                          k, text, json_string_value(c), fc ? fc : "null");
            if (marker)
                ck_assert_msg(!strstr(json_string_value(c), marker), "prefix %zu: content '%s' shows the call", k,
                              json_string_value(c));
        }
        ck_assert_uint_le(json_array_size(calls), json_array_size(fcalls));
        for (size_t i = 0; i < json_array_size(calls); i++) {
            json_t *a = json_array_get(calls, i), *b = json_array_get(fcalls, i);
            ck_assert_str_eq(json_string_value(json_object_get(a, "name")),
                             json_string_value(json_object_get(b, "name")));
            const char *pa = json_string_value(json_object_get(a, "arguments"));
            const char *fa = json_string_value(json_object_get(b, "arguments"));
            ck_assert_msg(is_prefix(pa, fa), "prefix %zu: arguments '%s' vs final '%s'", k, pa, fa);
        }
        json_decref(p);
    }
    json_decref(fin);
}

START_TEST(formats_are_recognised_from_the_template)
{
    ck_assert_int_eq(hx_tool_format_detect("{{- '<tool_call>\\n{\"name\": \"' }}"), HX_TOOL_FORMAT_HERMES);
    ck_assert_int_eq(hx_tool_format_detect("{{ '[TOOL_CALLS]' }}"), HX_TOOL_FORMAT_MISTRAL);
    ck_assert_int_eq(hx_tool_format_detect("<|start_header_id|>ipython<|end_header_id|>"), HX_TOOL_FORMAT_LLAMA3);
    ck_assert_int_eq(hx_tool_format_detect("<|start_header_id|>{{ role }}"), HX_TOOL_FORMAT_GENERIC);
    ck_assert_int_eq(hx_tool_format_detect("{% for m in messages %}{{ m.content }}{% endfor %}"),
                     HX_TOOL_FORMAT_GENERIC);
    ck_assert_int_eq(hx_tool_format_detect(NULL), HX_TOOL_FORMAT_GENERIC);
    ck_assert_int_eq(hx_tool_format_detect("{{- '\\n<tool_call>\\n<function=' + c.name + '>' }}{{ '<parameter=' }}"),
                     HX_TOOL_FORMAT_XML);
    ck_assert_int_eq(hx_tool_format_detect("<seed:tool_call>\n<function=x>\n<parameter=y>"), HX_TOOL_FORMAT_SEED);
    ck_assert_int_eq(hx_tool_format_detect("{{ '\\n<tool_call>' + tc.name }}\n<arg_key>{{ k }}</arg_key>\n"
                                           "<arg_value>{{ v }}</arg_value>"),
                     HX_TOOL_FORMAT_GLM);
    ck_assert_int_eq(hx_tool_format_detect("<|python_tag|><function=f>{\"a\": 1}</function>"),
                     HX_TOOL_FORMAT_GENERIC); /* functionary's, JSON after <function=: not the xml format */
    hx_tool_format f;
    for (int i = 0; i <= HX_TOOL_FORMAT_GLM; i++) {
        HX_ASSERT_OK(hx_tool_format_from_name(hx_tool_format_name((hx_tool_format)i), &f));
        ck_assert_int_eq(f, i);
    }
    ck_assert_int_eq(hx_tool_format_from_name("qwen", &f), HX_ERR_INVALID_ARG);
    ck_assert_ptr_null(hx_tool_format_name((hx_tool_format)9));
}
END_TEST

START_TEST(hermes_calls_and_text)
{
    const hx_tool_format H = HX_TOOL_FORMAT_HERMES;
    expect(H, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
           "{\"content\":null,\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}]}");
    expect(H, "Let me check.\n<tool_call>{\"arguments\": {}, \"name\": \"now\"}</tool_call>\n"
              "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": [1, 2.5e3, true, null], \"b\": \"\\u00e9\\\"\"}}\n</tool_call>",
           "{\"content\":\"Let me check.\",\"tool_calls\":[{\"name\":\"now\",\"arguments\":\"{}\"},"
           "{\"name\":\"add\",\"arguments\":\"{\\\"a\\\": [1, 2.5e3, true, null], \\\"b\\\": \\\"\\\\u00e9\\\\\\\"\\\"}\"}]}");
    /* Arguments as a JSON string (some models write them so) are taken as they are. */
    expect(H, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>",
           "{\"content\":null,\"tool_calls\":[{\"name\":\"f\",\"arguments\":\"{\\\"x\\\": 1}\"}]}");
    /* No arguments at all: an empty object. */
    expect(H, "<tool_call>{\"name\": \"now\"}</tool_call>",
           "{\"content\":null,\"tool_calls\":[{\"name\":\"now\",\"arguments\":\"{}\"}]}");
    /* Without the tags, the whole answer one call (as Qwen2.5-Coder writes them). */
    expect(H, " {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n",
           "{\"content\":null,\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}]}");
    expect(H, "{\"name\": \"f\", \"arguments\": {}} and more", "{\"content\":\"{\\\"name\\\": \\\"f\\\", "
           "\\\"arguments\\\": {}} and more\",\"tool_calls\":[]}");
    expect(H, "Plain answer, no call.", "{\"content\":\"Plain answer, no call.\",\"tool_calls\":[]}");
    expect(H, "  \n", "{\"content\":null,\"tool_calls\":[]}");
}
END_TEST

START_TEST(malformed_calls_stay_content)
{
    const hx_tool_format H = HX_TOOL_FORMAT_HERMES;
    /* Not JSON, a call without a name, an unknown key, a bad number, a
     * missing closing tag, arguments that are not an object: the text is
     * the answer, and well-formed calls beside it are still calls. */
    expect(H, "<tool_call>not json</tool_call>",
           "{\"content\":\"<tool_call>not json</tool_call>\",\"tool_calls\":[]}");
    expect(H, "<tool_call>{\"arguments\": {}}</tool_call>",
           "{\"content\":\"<tool_call>{\\\"arguments\\\": {}}</tool_call>\",\"tool_calls\":[]}");
    expect(H, "<tool_call>{\"name\": \"f\", \"arguments\": {}, \"extra\": 1}</tool_call>",
           "{\"content\":\"<tool_call>{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": {}, \\\"extra\\\": 1}</tool_call>\","
           "\"tool_calls\":[]}");
    expect(H, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1.2.3}}</tool_call>",
           "{\"content\":\"<tool_call>{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": {\\\"x\\\": 1.2.3}}</tool_call>\","
           "\"tool_calls\":[]}");
    expect(H, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}",
           "{\"content\":\"<tool_call>{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": {\\\"x\\\": 1}}\",\"tool_calls\":[]}");
    expect(H, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
           "{\"content\":\"<tool_call>{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": [1]}</tool_call>\",\"tool_calls\":[]}");
    expect(H, "<tool_call>{\"name\": \"a\"}</tool_call> and <tool_call>{oops}</tool_call>",
           "{\"content\":\"and <tool_call>{oops}</tool_call>\",\"tool_calls\":[{\"name\":\"a\",\"arguments\":\"{}\"}]}");
    /* Nesting past the bound is refused, not a stack overflow. */
    size_t deep = 100000;
    char *t = malloc(deep * 2 + 64);
    int w = sprintf(t, "<tool_call>{\"name\": \"f\", \"arguments\": ");
    for (size_t i = 0; i < deep; i++)
        t[w++] = '[';
    t[w] = '\0';
    json_t *v = parse(H, t, strlen(t), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(v, "tool_calls")), 0);
    json_decref(v);
    v = parse(H, t, strlen(t), 1);
    ck_assert_uint_eq(json_array_size(json_object_get(v, "tool_calls")), 0);
    json_decref(v);
    free(t);
}
END_TEST

START_TEST(llama3_mistral_and_generic)
{
    const hx_tool_format L = HX_TOOL_FORMAT_LLAMA3, M = HX_TOOL_FORMAT_MISTRAL, G = HX_TOOL_FORMAT_GENERIC;
    expect(L, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
           "{\"content\":null,\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Oslo\\\"}\"}]}");
    expect(L, "<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}",
           "{\"content\":null,\"tool_calls\":[{\"name\":\"f\",\"arguments\":\"{}\"}]}");
    expect(L, "The answer is 4.", "{\"content\":\"The answer is 4.\",\"tool_calls\":[]}");
    expect(L, "{\"name\": \"f\", \"parameters\": {}} then text",
           "{\"content\":\"{\\\"name\\\": \\\"f\\\", \\\"parameters\\\": {}} then text\",\"tool_calls\":[]}");
    expect(L, "{\"type\": \"other\", \"name\": \"f\", \"parameters\": {}}",
           "{\"content\":\"{\\\"type\\\": \\\"other\\\", \\\"name\\\": \\\"f\\\", \\\"parameters\\\": {}}\",\"tool_calls\":[]}");
    expect(M, "Sure. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abc123XYZ\"}, "
              "{\"name\": \"b\", \"arguments\": {}, \"id\": \"zzzzzzzzz\"}]",
           "{\"content\":\"Sure.\",\"tool_calls\":[{\"name\":\"a\",\"arguments\":\"{\\\"x\\\": 1}\",\"id\":\"abc123XYZ\"},"
           "{\"name\":\"b\",\"arguments\":\"{}\",\"id\":\"zzzzzzzzz\"}]}");
    expect(M, "[TOOL_CALLS][{\"name\": \"a\"}", "{\"content\":\"[TOOL_CALLS][{\\\"name\\\": \\\"a\\\"}\",\"tool_calls\":[]}");
    expect(G, "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}]}",
           "{\"content\":null,\"tool_calls\":[{\"name\":\"a\",\"arguments\":\"{\\\"q\\\": \\\"x\\\"}\"}]}");
    expect(G, "{\"tool_call\": {\"name\": \"a\", \"arguments\": {}}}",
           "{\"content\":null,\"tool_calls\":[{\"name\":\"a\",\"arguments\":\"{}\"}]}");
    expect(G, "{\"response\": \"Hello \\\"you\\\"\"}", "{\"content\":\"Hello \\\"you\\\"\",\"tool_calls\":[]}");
    expect(G, "{\"answer\": 1}", "{\"content\":\"{\\\"answer\\\": 1}\",\"tool_calls\":[]}");
    expect(G, "Hi there", "{\"content\":\"Hi there\",\"tool_calls\":[]}");
}
END_TEST

static json_t *parse_tools(hx_tool_format f, const char *tools, const char *text)
{
    size_t len = 0;
    ck_assert_int_eq(hx_tool_calls_parse_tools(f, tools, text, strlen(text), 0, NULL, 0, &len), HX_ERR_RANGE);
    char *buf = malloc(len + 1);
    HX_ASSERT_OK(hx_tool_calls_parse_tools(f, tools, text, strlen(text), 0, buf, len + 1, &len));
    json_t *v = json_loads(buf, 0, NULL);
    free(buf);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* The arguments of the answer's call i, parsed (a new reference). */
static json_t *call_args(json_t *answer, size_t i)
{
    json_t *a = json_loads(json_string_value(json_object_get(json_array_get(json_object_get(answer, "tool_calls"), i),
                                                             "arguments")), 0, NULL);
    ck_assert_ptr_nonnull(a);
    return a;
}

START_TEST(xml_calls_and_their_values)
{
    /* Qwen3-Coder's: text, then calls; values typed by the schema when given */
    const char *t = "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
                    "<parameter=days>\n3\n</parameter>\n<parameter=zip>\n10001\n</parameter>\n</function>\n"
                    "</tool_call>\n<tool_call>\n<function=now>\n</function>\n</tool_call>";
    expect(HX_TOOL_FORMAT_XML, t,
           "{\"content\": \"Let me check.\", \"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": "
           "\"{\\\"city\\\": \\\"New York\\\", \\\"days\\\": 3, \\\"zip\\\": 10001}\"}, "
           "{\"name\": \"now\", \"arguments\": \"{}\"}]}");
    static const char tools[] = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
                                "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
                                "\"days\":{\"type\":\"integer\"},\"zip\":{\"type\":\"string\"}}}}}]";
    json_t *v = parse_tools(HX_TOOL_FORMAT_XML, tools, t);
    json_t *args = call_args(v, 0);
    ck_assert_str_eq(json_string_value(json_object_get(args, "zip")), "10001"); /* a string by its schema */
    ck_assert_int_eq(json_integer_value(json_object_get(args, "days")), 3);
    json_decref(args);
    json_decref(v);
    /* a value keeps its own line breaks and markup; Seed's wrapper, no line breaks */
    expect(HX_TOOL_FORMAT_SEED, "<seed:tool_call><function=run><parameter=code>a < b\n\nc</parameter></function>"
                                "</seed:tool_call>",
           "{\"content\": null, \"tool_calls\": [{\"name\": \"run\", \"arguments\": "
           "\"{\\\"code\\\": \\\"a < b\\\\n\\\\nc\\\"}\"}]}");
    /* GLM's: the name after the tag, keys and values in their own tags, a value as written */
    expect(HX_TOOL_FORMAT_GLM, "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n"
                               "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>[1, 2]</arg_value>\n</tool_call>"
                               "<tool_call>now</tool_call>",
           "{\"content\": \"Checking.\", \"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": "
           "\"{\\\"city\\\": \\\"Paris\\\\n\\\", \\\"days\\\": [1,2]}\"}, "
           "{\"name\": \"now\", \"arguments\": \"{}\"}]}");
    /* malformed blocks stay text */
    expect(HX_TOOL_FORMAT_XML, "<tool_call>\n<function=bad name>\n</function>\n</tool_call>",
           "{\"content\": \"<tool_call>\\n<function=bad name>\\n</function>\\n</tool_call>\", \"tool_calls\": []}");
    expect(HX_TOOL_FORMAT_XML, "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>",
           "{\"content\": \"<tool_call>\\n<function=f>\\n<parameter=a>\\n1\\n</function>\", \"tool_calls\": []}");
}
END_TEST

START_TEST(partial_answers_are_prefixes_of_the_final_one)
{
    prefixes_agree(HX_TOOL_FORMAT_XML,
                   "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nK\xc3\xb8" "benhavn\n</parameter>\n"
                   "<parameter=days>\n[1, 2]\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=now>\n"
                   "</function>\n</tool_call>",
                   "<tool");
    prefixes_agree(HX_TOOL_FORMAT_XML, "No <tool_call here, <function=x> neither.", NULL);
    prefixes_agree(HX_TOOL_FORMAT_GLM,
                   "Ok.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>K\xc3\xb8" "benhavn</arg_value>\n"
                   "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
                   "<tool");
    prefixes_agree(HX_TOOL_FORMAT_HERMES,
                   "I will look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"K\xc3\xb8" "benhavn\", "
                   "\"days\": [1, 2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
                   "<tool");
    prefixes_agree(HX_TOOL_FORMAT_HERMES, "No call < here, <tool_call is not one.", NULL);
    prefixes_agree(HX_TOOL_FORMAT_HERMES, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", "{");
    prefixes_agree(HX_TOOL_FORMAT_LLAMA3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": \"b c\"}}", "{");
    prefixes_agree(HX_TOOL_FORMAT_MISTRAL,
                   "Ok [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 10}, \"id\": \"abcdefghi\"}]", "[TOOL");
    prefixes_agree(HX_TOOL_FORMAT_GENERIC, "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"x\": \"y\"}}, "
                                           "{\"name\": \"b\", \"arguments\": {}}]}", "{");
    /* The call being written shows its name once whole, and its arguments so far. */
    const char *t = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    json_t *v = parse(HX_TOOL_FORMAT_HERMES, t, strlen(t), 1);
    json_t *c = json_array_get(json_object_get(v, "tool_calls"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c, "name")), "get_weather");
    ck_assert_str_eq(json_string_value(json_object_get(c, "arguments")), "{\"city\": \"Par");
    ck_assert(json_is_null(json_object_get(v, "content")));
    json_decref(v);
    /* A call that is the whole answer shows only at the end: text after
     * it would make it the answer's text. */
    t = "{\"name\": \"f\", \"arguments\": {}}";
    v = parse(HX_TOOL_FORMAT_HERMES, t, strlen(t), 1);
    ck_assert_uint_eq(json_array_size(json_object_get(v, "tool_calls")), 0);
    ck_assert(json_is_null(json_object_get(v, "content")));
    json_decref(v);
    t = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    v = parse(HX_TOOL_FORMAT_HERMES, t, 20, 1); /* inside the name */
    ck_assert_uint_eq(json_array_size(json_object_get(v, "tool_calls")), 0);
    json_decref(v);
}
END_TEST

static hx_grammar *tool_grammar(hx_tool_format f, const char *tools, const char *only, int parallel)
{
    size_t len = 0;
    ck_assert_int_eq(hx_tool_calls_grammar(f, tools, only, parallel, NULL, 0, &len), HX_ERR_RANGE);
    char *g = malloc(len + 1);
    HX_ASSERT_OK(hx_tool_calls_grammar(f, tools, only, parallel, g, len + 1, &len));
    hx_grammar *gr = NULL;
    HX_ASSERT_OK(hx_grammar_parse(g, len, &gr));
    free(g);
    return gr;
}

static int matches(const hx_grammar *g, const char *text)
{
    hx_grammar_state *s;
    HX_ASSERT_OK(hx_grammar_state_create(g, &s));
    int r = hx_grammar_accept(s, text, strlen(text));
    int ok = r == 1 && hx_grammar_can_end(s);
    hx_grammar_state_free(s);
    return ok;
}

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"c\",\"f\"]}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

START_TEST(grammar_forces_a_valid_call)
{
    hx_grammar *g = tool_grammar(HX_TOOL_FORMAT_HERMES, TOOLS, NULL, 0);
    ck_assert(matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"));
    ck_assert(matches(g, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"unit\": \"c\"}}</tool_call>"));
    ck_assert(matches(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"unit\": \"k\"}}\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
    ck_assert(!matches(g, "Sure! <tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>"));
    hx_grammar_free(g);
    g = tool_grammar(HX_TOOL_FORMAT_HERMES, TOOLS, NULL, 1);
    ck_assert(matches(g, "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>"));
    hx_grammar_free(g);
    g = tool_grammar(HX_TOOL_FORMAT_HERMES, TOOLS, "now", 0);
    ck_assert(!matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"));
    ck_assert(matches(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    hx_grammar_free(g);
    g = tool_grammar(HX_TOOL_FORMAT_LLAMA3, TOOLS, NULL, 0);
    ck_assert(matches(g, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}"));
    ck_assert(!matches(g, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}"));
    hx_grammar_free(g);
    g = tool_grammar(HX_TOOL_FORMAT_MISTRAL, TOOLS, NULL, 1);
    ck_assert(matches(g, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}, \"id\": \"abcdefghi\"}, "
                         "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}, \"id\": \"123456789\"}]"));
    ck_assert(!matches(g, "[TOOL_CALLS][]"));
    hx_grammar_free(g);
    g = tool_grammar(HX_TOOL_FORMAT_GENERIC, TOOLS, NULL, 0);
    ck_assert(matches(g, "{\"tool_call\": {\"name\": \"now\", \"arguments\": {}}}"));
    ck_assert(!matches(g, "{\"response\": \"hi\"}"));
    hx_grammar_free(g);
    g = tool_grammar(HX_TOOL_FORMAT_GENERIC, TOOLS, NULL, 1);
    ck_assert(matches(g, "{\"tool_calls\": [{\"name\": \"now\", \"arguments\": {}}]}"));
    hx_grammar_free(g);
    /* the xml formats: the function, its parameters in order, required
     * ones present, a string as text, another type its JSON value */
    static const char XML_TOOLS[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"c\",\"f\"]},"
        "\"days\":{\"type\":\"integer\"}},\"required\":[\"city\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";
    g = tool_grammar(HX_TOOL_FORMAT_XML, XML_TOOLS, NULL, 0);
    const char *xml_ok = "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Jos\xc3\xa9 <CA>\n</parameter>\n"
                         "<parameter=unit>\nf\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
                         "</tool_call>";
    ck_assert(matches(g, xml_ok));
    ck_assert(matches(g, "<tool_call>\n<function=now>\n</function>\n</tool_call>"));
    ck_assert(matches(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n"
                         "</tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>")); /* city required */
    ck_assert(!matches(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
                          "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
                          "<parameter=unit>\nk\n</parameter>\n</function>\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n<function=other>\n</function>\n</tool_call>"));
    hx_grammar_free(g);
    g = tool_grammar(HX_TOOL_FORMAT_SEED, XML_TOOLS, "now", 1);
    ck_assert(matches(g, "<seed:tool_call>\n<function=now>\n</function>\n</seed:tool_call>\n<seed:tool_call>\n"
                         "<function=now>\n</function>\n</seed:tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n<function=now>\n</function>\n</tool_call>"));
    hx_grammar_free(g);
    g = tool_grammar(HX_TOOL_FORMAT_GLM, XML_TOOLS, NULL, 0);
    const char *glm_ok = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome</arg_value>\n"
                         "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>";
    ck_assert(matches(g, glm_ok));
    ck_assert(matches(g, "<tool_call>now\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>get_weather\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n<function=now>\n</function>\n</tool_call>"));
    hx_grammar_free(g);
    json_t *gv = parse_tools(HX_TOOL_FORMAT_GLM, XML_TOOLS, glm_ok);
    json_t *ga = call_args(gv, 0);
    ck_assert_str_eq(json_string_value(json_object_get(ga, "city")), "Rome");
    ck_assert_int_eq(json_integer_value(json_object_get(ga, "days")), 2);
    json_decref(ga);
    json_decref(gv);
    size_t len;
    ck_assert_int_eq(hx_tool_calls_grammar(HX_TOOL_FORMAT_XML, "[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                                           "\"parameters\":{\"type\":\"object\",\"properties\":{\"s\":{\"type\":"
                                           "\"string\",\"pattern\":\"^a\"}}}}}]", NULL, 0, NULL, 0, &len),
                     HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "pattern"), "%s", hx_last_error());
    g = tool_grammar(HX_TOOL_FORMAT_XML, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                                         "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\","
                                         "\"maxLength\":3}},\"required\":[\"s\"]}}}]", NULL, 0);
    ck_assert(matches(g, "<tool_call>\n<function=f>\n<parameter=s>\nRom\n</parameter>\n</function>\n</tool_call>"));
    ck_assert(!matches(g, "<tool_call>\n<function=f>\n<parameter=s>\nRome\n</parameter>\n</function>\n</tool_call>"));
    hx_grammar_free(g);
    /* the xml grammar's sentence parses as its call, typed by the schema */
    json_t *xv = parse_tools(HX_TOOL_FORMAT_XML, XML_TOOLS, xml_ok);
    json_t *xa = call_args(xv, 0);
    ck_assert_str_eq(json_string_value(json_object_get(xa, "city")), "San Jos\xc3\xa9 <CA>");
    ck_assert_int_eq(json_integer_value(json_object_get(xa, "days")), 3);
    json_decref(xa);
    json_decref(xv);
    /* Every sentence of the grammar parses as the call it is. */
    const char *ok = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
    json_t *v = parse(HX_TOOL_FORMAT_HERMES, ok, strlen(ok), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(v, "tool_calls")), 1);
    json_decref(v);
}
END_TEST

START_TEST(grammar_refusals_name_the_problem)
{
    size_t len;
    ck_assert_int_eq(hx_tool_calls_grammar(HX_TOOL_FORMAT_HERMES, TOOLS, "missing", 0, NULL, 0, &len),
                     HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "no tool is named 'missing'"), "%s", hx_last_error());
    ck_assert_int_eq(hx_tool_calls_grammar(HX_TOOL_FORMAT_HERMES, "[]", NULL, 0, NULL, 0, &len), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_tool_calls_grammar(HX_TOOL_FORMAT_HERMES, "[{\"type\":\"function\"}]", NULL, 0, NULL, 0, &len),
                     HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "tools[0]"), "%s", hx_last_error());
    ck_assert_int_eq(hx_tool_calls_grammar(HX_TOOL_FORMAT_HERMES,
                                           "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                                           "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\","
                                           "\"minimum\":3}}}}}]",
                                           NULL, 0, NULL, 0, &len),
                     HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "minimum"), "%s", hx_last_error());
    ck_assert_int_eq(hx_tool_calls_parse((hx_tool_format)7, "x", 1, 0, NULL, 0, &len), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_tool_calls_parse(HX_TOOL_FORMAT_HERMES, NULL, 1, 0, NULL, 0, &len), HX_ERR_INVALID_ARG);
}
END_TEST

Suite *suite_tool_calls(void)
{
    Suite *s = suite_create("tool_calls");
    TCase *tc = tcase_create("parse");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, formats_are_recognised_from_the_template);
    tcase_add_test(tc, hermes_calls_and_text);
    tcase_add_test(tc, malformed_calls_stay_content);
    tcase_add_test(tc, llama3_mistral_and_generic);
    tcase_add_test(tc, xml_calls_and_their_values);
    tcase_add_test(tc, partial_answers_are_prefixes_of_the_final_one);
    tcase_add_test(tc, grammar_forces_a_valid_call);
    tcase_add_test(tc, grammar_refusals_name_the_problem);
    suite_add_tcase(s, tc);
    return s;
}
