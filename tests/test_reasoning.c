/* Reasoning (text/reasoning.c): the tags each family's template is known
 * by; answers split into thought and answer as llama.cpp's "deepseek"
 * format splits them (the thought as written, the line breaks after it
 * skipped) (a thought at the start or opened by the prompt, one
 * never closed, none at all, a start tag later in the text left alone);
 * every prefix of an answer split as a partial one gives prefixes of the
 * final thought and answer and never shows a tag; bad arguments refused. */
#include <stdlib.h>
#include <string.h>

#include "tests/hx_test.h"

static const char *S = "<think>", *E = "</think>";

/* The split's thought and answer as strings (static buffers). */
static void split(const char *text, int opened, int partial, const char **thought, const char **answer,
                  hx_reasoning_span *sp)
{
    static char t[4096], a[4096];
    hx_reasoning_span local;
    sp = sp ? sp : &local;
    HX_ASSERT_OK(hx_reasoning_split(text, strlen(text), S, E, opened, partial, sp));
    ck_assert_uint_le(sp->reasoning_at + sp->reasoning_len, strlen(text));
    ck_assert_uint_le(sp->content_at + sp->content_len, strlen(text));
    memcpy(t, text + sp->reasoning_at, sp->reasoning_len);
    t[sp->reasoning_len] = '\0';
    memcpy(a, text + sp->content_at, sp->content_len);
    a[sp->content_len] = '\0';
    *thought = t;
    *answer = a;
}

static void expect(const char *text, int opened, const char *thought, const char *answer, int closed)
{
    const char *t, *a;
    hx_reasoning_span sp;
    split(text, opened, 0, &t, &a, &sp);
    ck_assert_msg(!strcmp(t, thought), "thought of '%s': '%s', want '%s'", text, t, thought);
    ck_assert_msg(!strcmp(a, answer), "answer of '%s': '%s', want '%s'", text, a, answer);
    ck_assert_int_eq(sp.closed, closed);
    ck_assert_int_eq(sp.has_reasoning, opened || strstr(text, S) == text + strspn(text, " \n"));
}

START_TEST(tags_are_known_by_the_template)
{
    const char *s = NULL, *e = NULL;
    ck_assert_int_eq(hx_reasoning_tags("{{ '<think>\\n' }}{% if '</think>' in c %}", &s, &e), 1);
    ck_assert_str_eq(s, "<think>");
    ck_assert_str_eq(e, "</think>");
    ck_assert_int_eq(hx_reasoning_tags("{{'<seed:think>'}}{{'</seed:think>'}}", &s, &e), 1);
    ck_assert_str_eq(s, "<seed:think>");
    ck_assert_int_eq(hx_reasoning_tags("{%- set b = '<mm:think>' %}{%- set e = '</mm:think>' %}", &s, &e), 1);
    ck_assert_str_eq(s, "<mm:think>");
    ck_assert_int_eq(hx_reasoning_tags("[THINK]{{ m.reasoning_content }}[/THINK]", &s, &e), 1);
    ck_assert_str_eq(e, "[/THINK]");
    ck_assert_int_eq(hx_reasoning_tags("<|START_THINKING|>x<|END_THINKING|>", &s, &e), 1);
    ck_assert_str_eq(s, "<|START_THINKING|>");
    /* templates that do not think: Qwen2.5, Gemma 3, a start tag alone */
    ck_assert_int_eq(hx_reasoning_tags("{{ '<|im_start|>' + m.role }}<tool_call>", &s, &e), 0);
    ck_assert_int_eq(hx_reasoning_tags("<start_of_turn>model\n", &s, &e), 0);
    ck_assert_int_eq(hx_reasoning_tags("<think>", &s, &e), 0);
    ck_assert_int_eq(hx_reasoning_tags(NULL, &s, &e), 0);
}
END_TEST

START_TEST(answers_split_as_llama_cpp_splits_them)
{
    expect("<think>\nI add.\n</think>\n\n4", 0, "\nI add.\n", "4", 1); /* as written; the line breaks after */
    expect("  <think>x</think>y", 0, "x", "y", 1);
    expect("I add.\n</think>\n\n4", 1, "I add.\n", "4", 1);    /* opened by the prompt */
    expect("<think></think>\n\n4", 0, "", "4", 1);             /* an empty thought */
    expect("<think>x</think> 4", 0, "x", " 4", 1);               /* a space is the answer's */
    expect("<think>still thinking", 0, "still thinking", "", 0); /* cut off: all thought */
    expect("still thinking", 1, "still thinking", "", 0);
    expect("4", 0, "", "4", 0);                                /* no thought */
    expect("", 0, "", "", 0);
    expect("", 1, "", "", 0);
    expect("The tag <think> here is text", 0, "", "The tag <think> here is text", 0);
    expect("<think>a</think>b</think>c", 0, "a", "b</think>c", 1); /* one thought, the first end */
    expect("<think>a</think>\n<think>b</think>c", 0, "a", "<think>b</think>c", 1);
    expect("<think>a</think><tool_call>{}</tool_call>", 0, "a", "<tool_call>{}</tool_call>", 1);
    /* another family's tags */
    hx_reasoning_span sp;
    const char *t = "[THINK]plan[/THINK]done";
    HX_ASSERT_OK(hx_reasoning_split(t, strlen(t), "[THINK]", "[/THINK]", 0, 0, &sp));
    ck_assert_uint_eq(sp.reasoning_at, 7);
    ck_assert_uint_eq(sp.reasoning_len, 4);
    ck_assert_str_eq(t + sp.content_at, "done");
}
END_TEST

/* Every prefix of a text split as partial: thought and answer are
 * prefixes of the whole text's, no tag byte shows in either, and a
 * character is never cut. */
static void prefixes_hold(const char *text, int opened)
{
    char whole_t[4096], whole_a[4096];
    const char *t, *a;
    split(text, opened, 0, &t, &a, NULL);
    strcpy(whole_t, t);
    strcpy(whole_a, a);
    char *buf = malloc(strlen(text) + 1);
    for (size_t k = 0; k <= strlen(text); k++) {
        memcpy(buf, text, k);
        buf[k] = '\0';
        split(buf, opened, 1, &t, &a, NULL);
        ck_assert_msg(!strncmp(whole_t, t, strlen(t)), "'%s' at %zu: thought '%s' is no prefix of '%s'", text, k, t,
                      whole_t);
        ck_assert_msg(!strncmp(whole_a, a, strlen(a)), "'%s' at %zu: answer '%s' is no prefix of '%s'", text, k, a,
                      whole_a);
        ck_assert_msg(!strchr(t, '<') || strstr(whole_t, "<"), "'%s' at %zu: a tag in the thought '%s'", text, k, t);
        for (const char *p = a; *p; p++) /* a UTF-8 lead byte has its continuation */
            if ((unsigned char)*p >= 0xC0)
                ck_assert_msg(p[1] && ((unsigned char)p[1] & 0xC0) == 0x80, "'%s' at %zu: a cut character", text, k);
    }
    free(buf);
}

START_TEST(partial_answers_are_prefixes_of_the_final_one)
{
    prefixes_hold("<think>\nI add 2 and 2.\n</think>\n\nIt is 4.", 0);
    prefixes_hold("I add 2 </thi and 2.\n</think>\n\nIt is 4.", 1);
    prefixes_hold("<thin", 0);
    prefixes_hold("<think>\xc3\xa9t\xc3\xa9</think>\xe2\x82\xac 5", 0);
    prefixes_hold("no thought, <think> later", 0);
    /* random texts from tag pieces, white space and letters */
    static const char *const bits[] = {"<think>", "</think>", "<th", "</", "k>", " ", "\n", "a", "bc", "\xc3\xa9"};
    unsigned x = 12345;
    char text[256];
    for (int round = 0; round < 300; round++) {
        text[0] = '\0';
        for (int i = 0; i < 12; i++) {
            x = x * 1103515245u + 12345u;
            strcat(text, bits[(x >> 16) % (sizeof bits / sizeof bits[0])]);
        }
        prefixes_hold(text, round & 1);
    }
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    hx_reasoning_span sp;
    ck_assert_int_eq(hx_reasoning_split(NULL, 3, S, E, 0, 0, &sp), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_reasoning_split("x", 1, "", E, 0, 0, &sp), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_reasoning_split("x", 1, S, NULL, 0, 0, &sp), HX_ERR_INVALID_ARG);
    ck_assert_int_eq(hx_reasoning_split("x", 1, S, E, 0, 0, NULL), HX_ERR_INVALID_ARG);
    ck_assert_msg(strstr(hx_last_error(), "hx_reasoning_split"), "%s", hx_last_error());
    HX_ASSERT_OK(hx_reasoning_split(NULL, 0, S, E, 1, 1, &sp));
    ck_assert_str_eq(hx_last_error(), "");
}
END_TEST

Suite *suite_reasoning(void)
{
    Suite *s = suite_create("reasoning");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, tags_are_known_by_the_template);
    tcase_add_test(tc, answers_split_as_llama_cpp_splits_them);
    tcase_add_test(tc, partial_answers_are_prefixes_of_the_final_one);
    tcase_add_test(tc, bad_arguments_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
