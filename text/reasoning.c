/* A model's thought and its answer: the tags a chat template's model
 * thinks between, and its text split at them (llama.cpp's reasoning
 * formats "auto" and "deepseek": one thought, at the start of the text or
 * opened by the prompt).  hetero-server's reasoning_content reads it. */
#include <string.h>

#include "hetero.h"
#include "runtime/error.h"
#include "text/unicode.h"

/* Known pairs, most common first: a template that writes the start tag
 * (to open the generation prompt's thought, or to drop a past turn's)
 * has a model that thinks between them. */
static const struct {
    const char *start, *end;
} tags[] = {
    {"<think>", "</think>"},                           /* Qwen3, DeepSeek-R1, QwQ, SmolLM3, GLM-4.5, Hermes 4 */
    {"<seed:think>", "</seed:think>"},                 /* Seed-OSS */
    {"<mm:think>", "</mm:think>"},                     /* MiniMax-M3 */
    {"[THINK]", "[/THINK]"},                           /* Magistral, Ministral 3 */
    {"<|START_THINKING|>", "<|END_THINKING|>"},        /* Command R7B, Command A */
    {"\xe2\x97\x81think\xe2\x96\xb7", "\xe2\x97\x81/think\xe2\x96\xb7"}, /* Kimi (◁think▷) */
};

int hx_reasoning_tags(const char *tmpl, const char **start, const char **end)
{
    if (!tmpl)
        return 0;
    /* "<seed:think>" and "<mm:think>" hold no "<think>": the first pair
     * whose two tags the template writes is the one */
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        if (strstr(tmpl, tags[i].start) && strstr(tmpl, tags[i].end)) {
            if (start)
                *start = tags[i].start;
            if (end)
                *end = tags[i].end;
            return 1;
        }
    return 0;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Where s[0, n) ends with a proper prefix of tag (the tag being written):
 * its first byte, or n. */
static size_t tag_being_written(const char *s, size_t n, const char *tag)
{
    const size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k))
            return n - k;
    return n;
}

static const char *find(const char *s, size_t n, const char *tag)
{
    const size_t t = strlen(tag);
    for (size_t i = 0; i + t <= n; i++)
        if (s[i] == tag[0] && !memcmp(s + i, tag, t))
            return s + i;
    return NULL;
}

static void split(const char *text, size_t n, const char *start, const char *end, int opened, int partial,
                  hx_reasoning_span *out)
{
    memset(out, 0, sizeof *out);
    size_t at = 0;
    if (!opened) {
        while (at < n && is_ws(text[at]))
            at++;
        const size_t s = strlen(start), left = n - at;
        if (partial && left < s && !memcmp(text + at, start, left)) {
            /* the start tag being written (or nothing yet but white space):
             * nothing is known, nothing shows */
            out->content_at = n;
            return;
        }
        if (left < s || memcmp(text + at, start, s)) {
            out->content_at = 0; /* no thought: the whole text is the answer */
            out->content_len = partial ? hx_unicode_whole_prefix(text, n) : n;
            return;
        }
        at += s;
    }
    out->has_reasoning = 1;
    const char *e = find(text + at, n - at, end);
    /* the thought as written, white space and all (llama.cpp's parser
     * keeps it: p.reasoning(p.until(end))) */
    size_t stop = e ? (size_t)(e - text) : partial ? at + tag_being_written(text + at, n - at, end) : n;
    out->reasoning_at = at;
    out->reasoning_len = partial && !e ? hx_unicode_whole_prefix(text + at, stop - at) : stop - at;
    if (!e) {
        out->content_at = n;
        return;
    }
    out->closed = 1;
    /* the line breaks templates write after the end tag ("</think>\n\n")
     * are not the answer's; a space is */
    size_t c = stop + strlen(end);
    while (c < n && (text[c] == '\n' || text[c] == '\r'))
        c++;
    out->content_at = c;
    out->content_len = partial ? hx_unicode_whole_prefix(text + c, n - c) : n - c;
}

hx_status hx_reasoning_split(const char *text, size_t n, const char *start, const char *end, int opened, int partial,
                             hx_reasoning_span *out)
{
    hx_api_enter();
    if ((!text && n) || !start || !end || !*start || !*end || !out)
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_reasoning_split: text, both non-empty tags and out"));
    split(text, n, start, end, opened, partial, out);
    return hx_api_leave(HX_OK);
}
