/* The tokenizer against llama.cpp's own test vectors (HX_TEST_DATA/vocab,
 * fetched by tests/fetch-vocab.sh),
 * through the library and through build/hetero-tokenize, plus round trips,
 * streaming detokenization, special tokens, pre-tokenizer splits and
 * synthetic vocabularies. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"
#include "tests/hx_test.h"

#define SPM_VOCAB "ggml-vocab-llama-spm.gguf"
#define GPT2_VOCAB "ggml-vocab-gpt-2.gguf"
#define MAX_IDS 4096

/* ---- fixtures ----------------------------------------------------------- */

/* Path of a file in the vocab data directory; fails the test if missing. */
static void vocab_path(char *buf, size_t cap, const char *name)
{
    const char *dir = hx_test_data_dir();
    ck_assert_msg(dir && *dir, "HX_TEST_DATA is not set: the tokenizer test vectors are "
                               "fetched by tests/fetch-vocab.sh (make test sets it)");
    int n = snprintf(buf, cap, "%s/vocab/%s", dir, name);
    ck_assert(n > 0 && (size_t)n < cap);
    struct stat st;
    ck_assert_msg(stat(buf, &st) == 0, "tokenizer test data missing: %s (%s); HX_TEST_DATA=%s",
                  buf, strerror(errno), dir);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    ck_assert(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            ck_assert(buf);
        }
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The vectors of one vocabulary: inputs split on the separator, expected
 * id lists one per line of the .out file (stripped). */
typedef struct {
    char *inp_buf, *out_buf;
    const char **text;
    size_t *len;
    const char **expect;
    size_t n;
} vectors;

static void vectors_load(vectors *v, const char *vocab)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char path[4096];
    size_t ilen, olen;
    snprintf(path, sizeof path, "%s.inp", vocab);
    char full[4096];
    vocab_path(full, sizeof full, path);
    v->inp_buf = slurp(full, &ilen);
    snprintf(path, sizeof path, "%s.out", vocab);
    vocab_path(full, sizeof full, path);
    v->out_buf = slurp(full, &olen);

    size_t cap = 16;
    v->text = malloc(cap * sizeof *v->text);
    v->len = malloc(cap * sizeof *v->len);
    v->n = 0;
    for (char *p = v->inp_buf, *end = v->inp_buf + ilen;;) {
        char *q = memmem(p, (size_t)(end - p), sep, sizeof sep - 1);
        if (v->n == cap) {
            cap *= 2;
            v->text = realloc(v->text, cap * sizeof *v->text);
            v->len = realloc(v->len, cap * sizeof *v->len);
        }
        v->text[v->n] = p;
        v->len[v->n] = (size_t)((q ? q : end) - p);
        v->n++;
        if (!q)
            break;
        p = q + sizeof sep - 1;
    }
    v->expect = malloc(v->n * sizeof *v->expect);
    char *line = v->out_buf;
    for (size_t i = 0; i < v->n; i++) {
        ck_assert_msg(line, "%s.out has fewer lines than %s.inp has strings", vocab, vocab);
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        while (*line == ' ')
            line++;
        size_t l = strlen(line);
        while (l && (line[l - 1] == ' ' || line[l - 1] == '\r'))
            line[--l] = '\0';
        v->expect[i] = line;
        line = nl ? nl + 1 : NULL;
    }
}

static void vectors_free(vectors *v)
{
    free(v->inp_buf);
    free(v->out_buf);
    free(v->text);
    free(v->len);
    free(v->expect);
}

static void format_ids(const int32_t *ids, size_t n, char *buf, size_t cap)
{
    size_t w = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && w < cap; i++)
        w += (size_t)snprintf(buf + w, cap - w, i ? " %d" : "%d", ids[i]);
}

static hx_tokenizer *open_vocab(const char *name)
{
    char path[4096];
    vocab_path(path, sizeof path, name);
    hx_tokenizer *t = NULL;
    HX_ASSERT_OK(hx_tokenizer_open(path, &t));
    return t;
}

static size_t encode(const hx_tokenizer *t, const char *s, size_t len, int bos, int special,
                     int32_t *ids)
{
    size_t n;
    HX_ASSERT_OK(hx_tokenizer_encode(t, s, len, bos, special, ids, MAX_IDS, &n));
    return n;
}

static size_t encode_str(const hx_tokenizer *t, const char *s, int bos, int special, int32_t *ids)
{
    return encode(t, s, strlen(s), bos, special, ids);
}

static void assert_ids(const int32_t *got, size_t n, const int32_t *want, size_t wn, const char *what)
{
    char g[1024], w[1024];
    format_ids(got, n, g, sizeof g);
    format_ids(want, wn, w, sizeof w);
    ck_assert_msg(n == wn && memcmp(got, want, n * sizeof *got) == 0, "%s: got [%s], want [%s]",
                  what, g, w);
}

/* ---- llama.cpp's vectors through the library ------------------------------ */

static void run_library_vectors(const char *vocab)
{
    vectors v;
    vectors_load(&v, vocab);
    hx_tokenizer *t = open_vocab(vocab);
    static int32_t ids[MAX_IDS];
    static char got[MAX_IDS * 8];
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < v.n; i++) {
        size_t n = encode(t, v.text[i], v.len[i], 0, 0, ids);
        format_ids(ids, n, got, sizeof got);
        if (strcmp(got, v.expect[i]) != 0 && bad++ == 0)
            first_bad = i;
    }
    if (bad) {
        size_t n = encode(t, v.text[first_bad], v.len[first_bad], 0, 0, ids);
        format_ids(ids, n, got, sizeof got);
    }
    fprintf(stderr, "tokenizer: %s: %zu of %zu vectors match llama.cpp (library)\n", vocab,
            v.n - bad, v.n);
    ck_assert_msg(v.n >= 40, "%s: only %zu vectors found", vocab, v.n);
    ck_assert_msg(bad == 0, "%s: %zu of %zu vectors differ; first is #%zu '%.*s': got [%s], want [%s]",
                  vocab, bad, v.n, first_bad, (int)v.len[first_bad], v.text[first_bad], got,
                  v.expect[first_bad]);
    hx_tokenizer_close(t);
    vectors_free(&v);
}

START_TEST(vectors_spm_library) { run_library_vectors(SPM_VOCAB); }
END_TEST

START_TEST(vectors_gpt2_library) { run_library_vectors(GPT2_VOCAB); }
END_TEST

/* The other vocabularies llama.cpp ships with vectors that hetero's
 * tokenizer models and pre-tokenizers cover. */
static const char *const more_vocabs[] = {
    "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf",   "ggml-vocab-phi-3.gguf",
    "ggml-vocab-falcon.gguf",    "ggml-vocab-mpt.gguf",     "ggml-vocab-starcoder.gguf",
    "ggml-vocab-refact.gguf",    "ggml-vocab-command-r.gguf",
};
#define N_MORE_VOCABS (int)(sizeof more_vocabs / sizeof more_vocabs[0])

/* Those it does not cover are refused when opened, naming what is missing,
 * never tokenized some other way. */
static const struct {
    const char *file, *names;
} refused_vocabs[] = {
    {"ggml-vocab-deepseek-llm.gguf", "pre-tokenizer 'deepseek-llm'"},
    {"ggml-vocab-deepseek-coder.gguf", "pre-tokenizer 'deepseek-coder'"},
    {"ggml-vocab-qwen35.gguf", "pre-tokenizer 'qwen35'"},
    {"ggml-vocab-bert-bge.gguf", "tokenizer model 'bert'"},
    {"ggml-vocab-gemma-4.gguf", "tokenizer model 'gemma4'"},
};

/* A text that names an end-of-generation token is that token with special
 * tokens parsed, even where the vocabulary calls it a normal token, as
 * llama.cpp makes it a control token (Qwen2's "</s>", id 128247). */
START_TEST(eog_texts_are_control_tokens)
{
    hx_tokenizer *t = open_vocab("ggml-vocab-qwen2.gguf");
    int32_t ids[16];
    size_t n = encode_str(t, "Hello</s>", 0, 1, ids);
    const int32_t parsed[] = {9707, 128247}, plain[] = {9707, 522, 82, 29};
    assert_ids(ids, n, parsed, 2, "qwen2 'Hello</s>' parsed");
    ck_assert(hx_tokenizer_is_eog(t, 128247));
    n = encode_str(t, "Hello</s>", 0, 0, ids);
    assert_ids(ids, n, plain, 4, "qwen2 'Hello</s>' as text");
    hx_tokenizer_close(t);
}
END_TEST

START_TEST(unsupported_vocabs_are_refused_by_name)
{
    for (size_t k = 0; k < sizeof refused_vocabs / sizeof refused_vocabs[0]; k++) {
        char path[4096];
        vocab_path(path, sizeof path, refused_vocabs[k].file);
        hx_tokenizer *t = NULL;
        ck_assert_int_eq(hx_tokenizer_open(path, &t), HX_ERR_UNSUPPORTED);
        ck_assert_ptr_null(t);
        ck_assert_msg(strstr(hx_last_error(), refused_vocabs[k].names), "%s: %s", refused_vocabs[k].file,
                      hx_last_error());
    }
}
END_TEST

START_TEST(vectors_more_library) { run_library_vectors(more_vocabs[_i]); }
END_TEST

/* ---- ...and through build/hetero-tokenize -------------------------------- */

/* Runs argv, returns its exit status and stdout (and stderr if err). */
static int run_tool(char *const argv[], char *out, size_t cap, char *err, size_t ecap)
{
    int po[2], pe[2];
    ck_assert(pipe(po) == 0 && pipe(pe) == 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        close(po[1]);
        close(pe[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t n = 0, m = 0;
    ssize_t r;
    while ((r = read(po[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    char sink[256];
    while ((r = read(pe[0], err ? err + m : sink, err ? ecap - 1 - m : sizeof sink)) > 0)
        if (err)
            m += (size_t)r;
    if (err)
        err[m] = '\0';
    close(po[0]);
    close(pe[0]);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void tool_path(char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/hetero-tokenize", hx_test_build_dir());
    ck_assert_msg(access(buf, X_OK) == 0, "%s is not built (HX_BUILD=%s): %s", buf,
                  hx_test_build_dir(), strerror(errno));
}

static void temp_file(char *path, size_t cap, const void *data, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, cap, "%s/hx-tok-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
    ck_assert(write(fd, data, len) == (ssize_t)len);
    close(fd);
}

static void run_tool_vectors(const char *vocab)
{
    vectors v;
    vectors_load(&v, vocab);
    char tool[4096], model[4096], tmp[4096];
    tool_path(tool, sizeof tool);
    vocab_path(model, sizeof model, vocab);
    static char out[MAX_IDS * 8], err[4096];
    size_t bad = 0;
    for (size_t i = 0; i < v.n; i++) {
        temp_file(tmp, sizeof tmp, v.text[i], v.len[i]);
        /* As llama.cpp's vectors are: no BOS, special tokens as text. */
        char *argv[] = {tool, "-m", model, "--ids", "--no-escape", "--no-bos", "--no-parse-special", "--file", tmp, NULL};
        int rc = run_tool(argv, out, sizeof out, err, sizeof err);
        unlink(tmp);
        char *nl = strchr(out, '\n');
        int one_line = nl && nl[1] == '\0';
        if (nl)
            *nl = '\0';
        /* --ids prints llama-tokenize's "[1, 2, 3]"; the vectors say "1 2 3". */
        static char want[MAX_IDS * 8];
        size_t w = 0;
        want[w++] = '[';
        for (const char *c = v.expect[i]; *c && w + 3 < sizeof want; c++) {
            if (*c == ' ')
                want[w++] = ',';
            want[w++] = *c;
        }
        want[w++] = ']';
        want[w] = '\0';
        if (rc != 0 || !one_line || strcmp(out, want) != 0) {
            if (bad++ == 0)
                ck_assert_msg(0, "%s vector #%zu '%.*s' via the tool: exit %d, stdout [%s], "
                              "stderr [%s], want [%s]", vocab, i, (int)v.len[i], v.text[i], rc,
                              out, err, want);
        }
    }
    fprintf(stderr, "tokenizer: %s: %zu of %zu vectors match llama.cpp (hetero-tokenize)\n",
            vocab, v.n - bad, v.n);
    vectors_free(&v);
}

START_TEST(vectors_spm_tool) { run_tool_vectors(SPM_VOCAB); }
END_TEST

START_TEST(vectors_gpt2_tool) { run_tool_vectors(GPT2_VOCAB); }
END_TEST

START_TEST(tool_errors)
{
    char tool[4096], model[4096], inp[4096], out[4096], err[4096];
    tool_path(tool, sizeof tool);
    vocab_path(model, sizeof model, SPM_VOCAB);
    vocab_path(inp, sizeof inp, SPM_VOCAB ".inp");

    char *missing_model[] = {tool, "-m", "/nonexistent/model.gguf", "hi", NULL};
    ck_assert_int_eq(run_tool(missing_model, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "/nonexistent/model.gguf"), "stderr: %s", err);

    char *bad_model[] = {tool, "-m", inp, "hi", NULL}; /* a text file, not GGUF */
    ck_assert_int_eq(run_tool(bad_model, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "GGUF"), "stderr: %s", err);

    char *missing_text[] = {tool, "-m", model, "--file", "/nonexistent/text", NULL};
    ck_assert_int_eq(run_tool(missing_text, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "/nonexistent/text"), "stderr: %s", err);

    char *no_model[] = {tool, "hi", NULL};
    ck_assert_int_eq(run_tool(no_model, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strlen(err) > 0, "no message");

    char *bos[] = {tool, "--ids", "-m", model, "--bos", "Hello world", NULL};
    ck_assert_int_eq(run_tool(bos, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "[1, 15043, 3186]\n");

    /* As llama-tokenize: BOS where the model asks (the SPM vocabulary
     * does), --no-bos drops it; special tokens parsed unless told not. */
    char *dflt[] = {tool, "--ids", "-m", model, "Hello world", NULL};
    ck_assert_int_eq(run_tool(dflt, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "[1, 15043, 3186]\n");
    char *no_bos[] = {tool, "--ids", "-m", model, "--no-bos", "Hello world", NULL};
    ck_assert_int_eq(run_tool(no_bos, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "[15043, 3186]\n");
    char *special[] = {tool, "--ids", "-m", model, "--no-bos", "Hello</s>", NULL};
    ck_assert_int_eq(run_tool(special, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "[15043, 2]\n");
    char *plain[] = {tool, "--ids", "-m", model, "--no-bos", "--no-parse-special", "Hello</s>", NULL};
    ck_assert_int_eq(run_tool(plain, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strcmp(out, "[15043, 2]\n") != 0 && strncmp(out, "[15043, ", 8) == 0, "stdout: %s", out);
    char gpt2[4096];
    vocab_path(gpt2, sizeof gpt2, GPT2_VOCAB);
    char *gpt2_dflt[] = {tool, "--ids", "-m", gpt2, "Hello", NULL};
    ck_assert_int_eq(run_tool(gpt2_dflt, out, sizeof out, err, sizeof err), 0);
    ck_assert_str_eq(out, "[15496]\n");
    /* llama-tokenize's default: one "%6d -> 'piece'" line per token; its
     * -p with escapes, --stdin, --show-count, --log-disable. */
    char *lines[] = {tool, "-m", model, "-p", "Hello\\nworld</s>", "--show-count", NULL};
    ck_assert_int_eq(run_tool(lines, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "     1 -> '<s>'\n") && strstr(out, " 15043 -> ' Hello'\n") &&
                      strstr(out, "-> '\n'\n") && strstr(out, "     2 -> '</s>'\n") &&
                      strstr(out, "Total number of tokens: "),
                  "stdout: %s", out);
    char *no_esc[] = {tool, "-m", model, "--ids", "--no-escape", "-p", "a\\nb", NULL};
    char *esc[] = {tool, "-m", model, "--ids", "-p", "a\\nb", NULL};
    char o2[4096];
    ck_assert_int_eq(run_tool(no_esc, out, sizeof out, err, sizeof err), 0);
    ck_assert_int_eq(run_tool(esc, o2, sizeof o2, err, sizeof err), 0);
    ck_assert_msg(strcmp(out, o2) != 0, "--no-escape changed nothing: %s", out);
    char *quiet[] = {tool, "-m", "/nonexistent/model.gguf", "--log-disable", "-p", "hi", NULL};
    ck_assert_int_eq(run_tool(quiet, out, sizeof out, err, sizeof err), 1);
    ck_assert_str_eq(err, "");
    char *unknown[] = {tool, "-m", model, "--no-such", NULL};
    ck_assert_int_eq(run_tool(unknown, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "--no-such"), "stderr: %s", err);
}
END_TEST

/* ---- round trips ------------------------------------------------------- */

/* Text llama.cpp's clean-up of tokenization spaces rewrites on decoding. */
static int cleaned_by_llama(const char *s, size_t n)
{
    static const char *const pats[] = {" ?", " !", " .", " ,", " '"};
    for (size_t i = 0; i < sizeof pats / sizeof *pats; i++)
        if (memmem(s, n, pats[i], 2))
            return 1;
    return 0;
}

static void run_roundtrip(const char *vocab, int has_cleanup)
{
    vectors v;
    vectors_load(&v, vocab);
    hx_tokenizer *t = open_vocab(vocab);
    static int32_t ids[MAX_IDS];
    static char text[MAX_IDS * 8];
    size_t checked = 0;
    for (size_t i = 0; i < v.n; i++) {
        if (has_cleanup && cleaned_by_llama(v.text[i], v.len[i]))
            continue;
        size_t n = encode(t, v.text[i], v.len[i], 0, 0, ids), len;
        HX_ASSERT_OK(hx_tokenizer_decode(t, ids, n, 0, 0, text, sizeof text, &len));
        ck_assert_msg(len == v.len[i] && memcmp(text, v.text[i], len) == 0,
                      "%s #%zu does not round-trip: '%.*s' -> '%s'", vocab, i, (int)v.len[i],
                      v.text[i], text);
        checked++;
    }
    ck_assert_msg(checked >= v.n * 3 / 4, "%s: only %zu of %zu round-trip checks", vocab, checked,
                  v.n);
    hx_tokenizer_close(t);
    vectors_free(&v);
}

START_TEST(roundtrip_spm) { run_roundtrip(SPM_VOCAB, 0); }
END_TEST

START_TEST(roundtrip_gpt2)
{
    run_roundtrip(GPT2_VOCAB, 1);
    /* Where llama.cpp cleans up, so do we. */
    hx_tokenizer *t = open_vocab(GPT2_VOCAB);
    int32_t ids[MAX_IDS];
    char text[256];
    size_t len, n = encode_str(t, "Hello world ! I 'm here , ok ?", 0, 0, ids);
    HX_ASSERT_OK(hx_tokenizer_decode(t, ids, n, 0, 0, text, sizeof text, &len));
    ck_assert_str_eq(text, "Hello world! I'm here, ok?");
    hx_tokenizer_close(t);
}
END_TEST

/* ---- pieces, BOS, special tokens, buffer contracts ---------------------- */

START_TEST(pieces_and_decode_spm)
{
    hx_tokenizer *t = open_vocab(SPM_VOCAB);
    char buf[64];
    size_t len;
    ck_assert_int_eq(hx_tokenizer_vocab_size(t), 32000);
    ck_assert_int_eq(hx_tokenizer_bos(t), 1);
    ck_assert_int_eq(hx_tokenizer_eos(t), 2);
    ck_assert(hx_tokenizer_is_eog(t, 2) && !hx_tokenizer_is_eog(t, 1));
    HX_ASSERT_OK(hx_tokenizer_token_to_piece(t, 15043, 0, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, " Hello");
    HX_ASSERT_OK(hx_tokenizer_token_to_piece(t, 13, 0, buf, sizeof buf, &len)); /* <0x0A> */
    ck_assert(len == 1 && buf[0] == '\n');
    HX_ASSERT_OK(hx_tokenizer_token_to_piece(t, 1, 0, buf, sizeof buf, &len));
    ck_assert_uint_eq(len, 0);
    HX_ASSERT_OK(hx_tokenizer_token_to_piece(t, 2, 1, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "</s>");
    ck_assert_int_eq(hx_tokenizer_token_to_piece(t, 15043, 0, buf, 6, &len), HX_ERR_RANGE);
    ck_assert_uint_eq(len, 6);
    ck_assert_int_eq(hx_tokenizer_token_to_piece(t, 32000, 0, buf, sizeof buf, &len),
                     HX_ERR_INVALID_ARG);

    /* llama.cpp keeps the space after a BOS (removed or rendered empty). */
    int32_t seq[] = {1, 15043, 3186, 2};
    HX_ASSERT_OK(hx_tokenizer_decode(t, seq, 4, 1, 0, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, " Hello world");
    HX_ASSERT_OK(hx_tokenizer_decode(t, seq + 1, 2, 1, 0, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "Hello world");
    HX_ASSERT_OK(hx_tokenizer_decode(t, seq, 4, 0, 1, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<s> Hello world</s>");
    ck_assert_int_eq(hx_tokenizer_decode(t, seq, 4, 0, 1, buf, 5, &len), HX_ERR_RANGE);
    ck_assert_uint_eq(len, 19);
    /* A lone byte token decodes to U+FFFD, never to invalid UTF-8. */
    int32_t lone[] = {243, 15043};
    HX_ASSERT_OK(hx_tokenizer_decode(t, lone, 2, 0, 0, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "\xEF\xBF\xBD Hello");
    hx_tokenizer_close(t);
}
END_TEST

START_TEST(bos_and_special_spm)
{
    hx_tokenizer *t = open_vocab(SPM_VOCAB);
    int32_t ids[MAX_IDS];
    size_t n = encode_str(t, "Hello", 1, 0, ids);
    assert_ids(ids, n, (int32_t[]){1, 15043}, 2, "BOS + Hello");
    n = encode_str(t, "<s>Hello</s>", 0, 1, ids);
    /* The text after a special token gets the space prefix again. */
    assert_ids(ids, n, (int32_t[]){1, 15043, 2}, 3, "parsed <s>Hello</s>");
    n = encode_str(t, "a</s></s>b", 0, 1, ids);
    assert_ids(ids, n, (int32_t[]){263, 2, 2, 289}, 4, "a</s></s>b");
    n = encode_str(t, "<s>Hello</s>", 0, 0, ids);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ids[i] != 1 && ids[i] != 2, "control token %d from unparsed text", ids[i]);
    ck_assert_uint_gt(n, 3);
    /* The empty text is no tokens, or just BOS. */
    n = encode(t, "", 0, 0, 0, ids);
    ck_assert_uint_eq(n, 0);
    n = encode(t, NULL, 0, 1, 0, ids);
    assert_ids(ids, n, (int32_t[]){1}, 1, "BOS alone");
    /* Capacity: HX_ERR_RANGE and the size needed; NULL ids for a query. */
    ck_assert_int_eq(hx_tokenizer_encode(t, "Hello world", 11, 0, 0, ids, 1, &n), HX_ERR_RANGE);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(hx_tokenizer_encode(t, "Hello world", 11, 1, 0, NULL, 0, &n), HX_ERR_RANGE);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(hx_tokenizer_encode(t, NULL, 3, 0, 0, ids, 8, &n), HX_ERR_INVALID_ARG);
    hx_tokenizer_close(t);
}
END_TEST

START_TEST(bos_and_special_gpt2)
{
    hx_tokenizer *t = open_vocab(GPT2_VOCAB);
    int32_t ids[MAX_IDS];
    ck_assert_int_eq(hx_tokenizer_vocab_size(t), 50257);
    ck_assert_int_eq(hx_tokenizer_bos(t), 50256);
    ck_assert(hx_tokenizer_is_eog(t, 50256));
    size_t n = encode_str(t, "Hello world", 1, 0, ids);
    assert_ids(ids, n, (int32_t[]){50256, 15496, 995}, 3, "BOS + Hello world");
    n = encode_str(t, "Hi<|endoftext|> there", 0, 1, ids);
    assert_ids(ids, n, (int32_t[]){17250, 50256, 612}, 3, "parsed <|endoftext|>");
    n = encode_str(t, "Hi<|endoftext|> there", 0, 0, ids);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ids[i] != 50256, "<|endoftext|> from unparsed text");
    char buf[64];
    size_t len;
    HX_ASSERT_OK(hx_tokenizer_token_to_piece(t, 18435, 0, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, " Hello");
    HX_ASSERT_OK(hx_tokenizer_token_to_piece(t, 50256, 0, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "");
    HX_ASSERT_OK(hx_tokenizer_token_to_piece(t, 50256, 1, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, "<|endoftext|>");
    hx_tokenizer_close(t);
}
END_TEST

/* ---- streaming detokenizer --------------------------------------------- */

static void push_expect(hx_detok *d, int32_t id, const char *want)
{
    char out[256];
    size_t n;
    HX_ASSERT_OK(hx_detok_push(d, id, out, sizeof out, &n));
    ck_assert_msg(n == strlen(want) && memcmp(out, want, n) == 0, "token %d: got '%.*s', want '%s'",
                  id, (int)n, out, want);
}

static void finish_expect(hx_detok *d, const char *want)
{
    char out[256];
    size_t n;
    HX_ASSERT_OK(hx_detok_finish(d, out, sizeof out, &n));
    ck_assert_msg(n == strlen(want) && memcmp(out, want, n) == 0, "finish: got '%.*s', want '%s'",
                  (int)n, out, want);
}

START_TEST(stream_emoji_spm)
{
    hx_tokenizer *t = open_vocab(SPM_VOCAB);
    int32_t ids[MAX_IDS];
    /* U+1F680 has no token: four byte-fallback tokens after "▁". */
    size_t n = encode_str(t, "\xF0\x9F\x9A\x80!", 0, 0, ids);
    assert_ids(ids, n, (int32_t[]){29871, 243, 162, 157, 131, 29991}, 6, "rocket");
    hx_detok d;
    hx_detok_init(&d, t, 0);
    push_expect(&d, ids[0], ""); /* the prefix space is dropped */
    push_expect(&d, ids[1], "");
    push_expect(&d, ids[2], "");
    push_expect(&d, ids[3], "");
    push_expect(&d, ids[4], "\xF0\x9F\x9A\x80");
    push_expect(&d, ids[5], "!");
    finish_expect(&d, "");

    /* A character that never completes: U+FFFD once it is certain... */
    hx_detok_init(&d, t, 0);
    push_expect(&d, 15043, "Hello");
    push_expect(&d, 243, "");
    push_expect(&d, 162, "");
    push_expect(&d, 3186, "\xEF\xBF\xBD world");
    /* ...or at the end. */
    push_expect(&d, 243, "");
    finish_expect(&d, "\xEF\xBF\xBD");
    /* A stray continuation byte is replaced at once. */
    push_expect(&d, 131, "\xEF\xBF\xBD");

    char small[2];
    size_t need;
    hx_detok_init(&d, t, 0);
    ck_assert_int_eq(hx_detok_push(&d, 15043, small, sizeof small, &need), HX_ERR_RANGE);
    ck_assert_uint_eq(need, 5);
    push_expect(&d, 15043, "Hello"); /* state unchanged by the failed push */
    ck_assert_uint_ge(hx_detok_max_out(t), 16);
    ck_assert_int_eq(hx_detok_push(&d, -1, small, sizeof small, &need), HX_ERR_INVALID_ARG);
    hx_tokenizer_close(t);
}
END_TEST

START_TEST(stream_emoji_gpt2)
{
    hx_tokenizer *t = open_vocab(GPT2_VOCAB);
    int32_t ids[MAX_IDS];
    size_t n = encode_str(t, "\xF0\x9F\x9A\x80", 0, 0, ids);
    assert_ids(ids, n, (int32_t[]){8582, 248, 222}, 3, "rocket");
    hx_detok d;
    hx_detok_init(&d, t, 0);
    push_expect(&d, ids[0], "");
    push_expect(&d, ids[1], "");
    push_expect(&d, ids[2], "\xF0\x9F\x9A\x80");
    push_expect(&d, 18435, " Hello");
    finish_expect(&d, "");
    hx_tokenizer_close(t);
}
END_TEST

/* Streaming, piece by piece, gives what decoding the whole sequence gives. */
START_TEST(stream_equals_decode)
{
    hx_tokenizer *t = open_vocab(SPM_VOCAB);
    unsigned seed = 12345;
    static char whole[MAX_IDS * 8], streamed[MAX_IDS * 8];
    char out[1024];
    for (int round = 0; round < 200; round++) {
        int32_t ids[64];
        size_t n = 1 + (size_t)(rand_r(&seed) % 64);
        for (size_t i = 0; i < n; i++) /* favour byte tokens (3..258) */
            ids[i] = rand_r(&seed) % 2 ? 3 + rand_r(&seed) % 256 : rand_r(&seed) % 32000;
        size_t wl, sl = 0, k;
        HX_ASSERT_OK(hx_tokenizer_decode(t, ids, n, 0, round & 1, whole, sizeof whole, &wl));
        hx_detok d;
        hx_detok_init(&d, t, round & 1);
        for (size_t i = 0; i < n; i++) {
            HX_ASSERT_OK(hx_detok_push(&d, ids[i], out, sizeof out, &k));
            memcpy(streamed + sl, out, k);
            sl += k;
        }
        HX_ASSERT_OK(hx_detok_finish(&d, out, sizeof out, &k));
        memcpy(streamed + sl, out, k);
        sl += k;
        ck_assert_msg(sl == wl && memcmp(streamed, whole, wl) == 0, "round %d differs", round);
        /* and it is valid UTF-8 */
        for (size_t i = 0; i < wl;) {
            size_t bad;
            int r = hx_unicode_check((const uint8_t *)whole + i, wl - i, &bad);
            ck_assert_msg(r > 0, "round %d: invalid UTF-8 at %zu", round, i);
            i += (size_t)r;
        }
    }
    hx_tokenizer_close(t);
}
END_TEST

/* ---- bad input ------------------------------------------------------------ */

START_TEST(random_bytes_never_break)
{
    hx_tokenizer *t[2] = {open_vocab(SPM_VOCAB), open_vocab(GPT2_VOCAB)};
    unsigned seed = 777;
    static int32_t ids[MAX_IDS];
    static char text[MAX_IDS * 8];
    char buf[256];
    for (int round = 0; round < 300; round++) {
        size_t len = (size_t)(rand_r(&seed) % 200);
        for (size_t i = 0; i < len; i++) /* skewed to bytes >= 0x80 and separators */
            buf[i] = (char)(rand_r(&seed) % 3 ? rand_r(&seed) % 256 : " \n'1aA"[rand_r(&seed) % 6]);
        for (int k = 0; k < 2; k++) {
            size_t n, tl;
            HX_ASSERT_OK(hx_tokenizer_encode(t[k], buf, len, round & 1, round & 2, ids, MAX_IDS, &n));
            for (size_t i = 0; i < n; i++)
                ck_assert(ids[i] >= 0 && ids[i] < hx_tokenizer_vocab_size(t[k]));
            HX_ASSERT_OK(hx_tokenizer_decode(t[k], ids, n, 1, 1, text, sizeof text, &tl));
            if (k == 0) /* byte fallback keeps every byte: valid UTF-8 survives */
                ck_assert_uint_ge(tl, 1 + len / 4);
        }
    }
    hx_tokenizer_close(t[0]);
    hx_tokenizer_close(t[1]);
}
END_TEST

START_TEST(open_errors)
{
    hx_tokenizer *t = (hx_tokenizer *)1;
    ck_assert_int_eq(hx_tokenizer_open("/nonexistent/x.gguf", &t), HX_ERR_IO);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "/nonexistent/x.gguf"));
    char path[4096];
    vocab_path(path, sizeof path, SPM_VOCAB ".out");
    ck_assert_int_eq(hx_tokenizer_open(path, &t), HX_ERR_FORMAT);

    /* A GGUF file without a vocabulary. */
    char tmp[4096];
    temp_file(tmp, sizeof tmp, "", 0);
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "general.architecture", "llama"));
    HX_ASSERT_OK(hx_gguf_writer_write(w, tmp));
    hx_gguf_writer_free(w);
    ck_assert_int_eq(hx_tokenizer_open(tmp, &t), HX_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "tokenizer.ggml.model"));

    /* An unsupported model kind. */
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert"));
    HX_ASSERT_OK(hx_gguf_writer_write(w, tmp));
    hx_gguf_writer_free(w);
    ck_assert_int_eq(hx_tokenizer_open(tmp, &t), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "bert"));

    /* Token types that do not cover the vocabulary. */
    const char *toks[] = {"a", "b"};
    int32_t types[] = {1};
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    HX_ASSERT_OK(hx_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 2));
    HX_ASSERT_OK(hx_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_INT32, types, 1));
    HX_ASSERT_OK(hx_gguf_writer_write(w, tmp));
    hx_gguf_writer_free(w);
    ck_assert_int_eq(hx_tokenizer_open(tmp, &t), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "token_type"));
    unlink(tmp);
}
END_TEST

/* ---- synthetic vocabularies ----------------------------------------------- */

START_TEST(bytes_vocab_through_gguf)
{
    char tmp[4096];
    temp_file(tmp, sizeof tmp, "", 0);
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_tokenizer_write_bytes_kv(w));
    HX_ASSERT_OK(hx_gguf_writer_write(w, tmp));
    hx_gguf_writer_free(w);
    hx_tokenizer *t;
    HX_ASSERT_OK(hx_tokenizer_open(tmp, &t));
    unlink(tmp);
    ck_assert_int_eq(hx_tokenizer_vocab_size(t), HX_TOKENIZER_BYTES_VOCAB);
    int32_t ids[16];
    const char *s = "h i\xC3\xA9 . ,";
    size_t n = encode_str(t, s, 1, 0, ids);
    assert_ids(ids, n, (int32_t[]){256, 'h', ' ', 'i', 0xC3, 0xA9, ' ', '.', ' ', ','}, 10, "bytes");
    char buf[32];
    size_t len;
    HX_ASSERT_OK(hx_tokenizer_decode(t, ids, n, 1, 0, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, s);
    n = encode_str(t, "<s>x</s>", 0, 1, ids);
    assert_ids(ids, n, (int32_t[]){256, 'x', 257}, 3, "parsed <s>x</s>");
    ck_assert(hx_tokenizer_wants_bos(t) && hx_tokenizer_is_eog(t, 257));
    hx_tokenizer_close(t);

    HX_ASSERT_OK(hx_tokenizer_create_bytes(&t));
    ck_assert_int_eq(hx_tokenizer_eos(t), HX_TOKENIZER_BYTES_EOS);
    hx_tokenizer_close(t);
}
END_TEST

/* Scores decide the order of merges; equal scores go leftmost first. */
START_TEST(spm_from_arrays)
{
    const char *toks[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a",
                          "\xE2\x96\x81" "ab", "ba", "<0x63>", "<0x20>"};
    float scores[] = {0, 0, 0, -5, -3, -3, -1, -2, -0.5f, -1, 0, 0};
    int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 6};
    hx_tokenizer_desc d = hx_tokenizer_desc_default();
    d.model = "llama";
    d.n_tokens = 12;
    d.tokens = toks;
    d.scores = scores;
    d.types = types;
    d.add_space_prefix = 0;
    hx_tokenizer *t;
    HX_ASSERT_OK(hx_tokenizer_create(&d, &t));
    int32_t ids[16];
    /* ab|ba|ab tie at -1: the leftmost merges first, leaving ab ab. "c" is
     * a byte token; "d" has none and becomes <unk>. */
    size_t n = encode_str(t, "ababcd", 0, 0, ids);
    assert_ids(ids, n, (int32_t[]){6, 6, 10, 0}, 4, "ababcd");
    /* "▁a" (-2) loses to "ab" (-1), then "▁ab" forms. */
    n = encode_str(t, " ab", 0, 0, ids);
    assert_ids(ids, n, (int32_t[]){8}, 1, "' ab'");
    hx_tokenizer_close(t);

    d.add_space_prefix = -1; /* default: on */
    HX_ASSERT_OK(hx_tokenizer_create(&d, &t));
    n = encode_str(t, "ab", 0, 0, ids);
    assert_ids(ids, n, (int32_t[]){8}, 1, "'ab' with the space prefix");
    hx_tokenizer_close(t);

    const char *dup[] = {"a", "b", "a"};
    d.n_tokens = 3;
    d.tokens = dup;
    d.scores = NULL;
    d.types = NULL;
    ck_assert_int_eq(hx_tokenizer_create(&d, &t), HX_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "duplicate"));
    d.model = "t5";
    ck_assert_int_eq(hx_tokenizer_create(&d, &t), HX_ERR_UNSUPPORTED);
}
END_TEST

/* Phi-3's special tokens eat the white space after them (llama.cpp sets
 * that by model name); <s> does not. */
START_TEST(phi3_rstrip)
{
    const char *toks[] = {"<unk>", "<s>", "</s>", "<|user|>", "\xE2\x96\x81", "h", "i", "hi",
                          "\xE2\x96\x81hi", "\xE2\x96\x81\xE2\x96\x81"};
    float scores[] = {0, 0, 0, 0, -1, -1, -1, -1, -0.5f, -2};
    int32_t types[] = {2, 3, 3, 3, 1, 1, 1, 1, 1, 1};
    hx_tokenizer_desc d = hx_tokenizer_desc_default();
    d.model = "llama";
    d.n_tokens = 10;
    d.tokens = toks;
    d.scores = scores;
    d.types = types;
    hx_tokenizer *t;
    int32_t ids[16];
    HX_ASSERT_OK(hx_tokenizer_create(&d, &t));
    size_t n = encode_str(t, "<|user|>  hi", 0, 1, ids);
    assert_ids(ids, n, (int32_t[]){3, 9, 8}, 3, "no rstrip");
    hx_tokenizer_close(t);

    d.name = "Phi-3-mini-4k-instruct";
    HX_ASSERT_OK(hx_tokenizer_create(&d, &t));
    n = encode_str(t, "<|user|>  hi</s> \n hi<s> hi", 0, 1, ids);
    assert_ids(ids, n, (int32_t[]){3, 8, 2, 8, 1, 4, 8}, 7, "phi-3 rstrip");
    hx_tokenizer_close(t);
}
END_TEST

/* Special ids from GGUF: negative = none, past the vocabulary = default. */
START_TEST(gguf_special_ids)
{
    char tmp[4096];
    temp_file(tmp, sizeof tmp, "", 0);
    hx_gguf_writer *w;
    HX_ASSERT_OK(hx_gguf_writer_create(&w));
    HX_ASSERT_OK(hx_tokenizer_write_bytes_kv(w));
    HX_ASSERT_OK(hx_gguf_writer_set_i32(w, "tokenizer.ggml.bos_token_id", -1));
    HX_ASSERT_OK(hx_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 99999));
    HX_ASSERT_OK(hx_gguf_writer_write(w, tmp));
    hx_gguf_writer_free(w);
    hx_tokenizer *t;
    HX_ASSERT_OK(hx_tokenizer_open(tmp, &t));
    unlink(tmp);
    ck_assert_int_eq(hx_tokenizer_bos(t), -1);
    ck_assert_int_eq(hx_tokenizer_eos(t), 11); /* gpt2's default */
    int32_t ids[4];
    size_t n;
    ck_assert_int_eq(hx_tokenizer_encode(t, "x", 1, 1, 0, ids, 4, &n), HX_ERR_UNSUPPORTED);
    hx_tokenizer_close(t);
}
END_TEST

/* Merge ranks, and LLaMA 3's "ignore merges" for whole-word tokens. */
START_TEST(bpe_from_arrays)
{
    const char *toks[] = {"x", "y", "z", "xy", "yz", "xyz", "\xC4\xA0", "\xC4\xA0x", "w", "wx"};
    const char *merges[] = {"y z", "x y", "x yz", "\xC4\xA0 x"};
    hx_tokenizer_desc d = hx_tokenizer_desc_default();
    d.model = "gpt2";
    d.pre = "gpt-2";
    d.n_tokens = 10;
    d.tokens = toks;
    d.n_merges = 4;
    d.merges = merges;
    hx_tokenizer *t;
    HX_ASSERT_OK(hx_tokenizer_create(&d, &t));
    int32_t ids[16];
    /* "y z" ranks first, so xyz = x + yz, then "x yz". */
    size_t n = encode_str(t, "xyz x", 0, 0, ids);
    assert_ids(ids, n, (int32_t[]){5, 7}, 2, "xyz x");
    /* "wx" is a token but no merge makes it: w, x. */
    n = encode_str(t, "wx", 0, 0, ids);
    assert_ids(ids, n, (int32_t[]){8, 0}, 2, "wx, gpt-2");
    hx_tokenizer_close(t);

    d.pre = "llama-bpe"; /* whole words that are tokens skip the merges */
    HX_ASSERT_OK(hx_tokenizer_create(&d, &t));
    n = encode_str(t, "wx", 0, 0, ids);
    assert_ids(ids, n, (int32_t[]){9}, 1, "wx, llama-bpe");
    char buf[16];
    size_t len;
    HX_ASSERT_OK(hx_tokenizer_token_to_piece(t, 7, 0, buf, sizeof buf, &len));
    ck_assert_str_eq(buf, " x");
    hx_tokenizer_close(t);

    d.pre = "no-such-pre";
    ck_assert_int_eq(hx_tokenizer_create(&d, &t), HX_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(hx_last_error(), "no-such-pre"));
}
END_TEST

/* ---- pre-tokenizers --------------------------------------------------------- */

/* Splits `text` and compares with `want`, the pieces joined by '|'
 * (references computed with the regex module on the original patterns). */
static void check_split(hx_pre_kind kind, const char *text, const char *want)
{
    size_t len = strlen(text), ncp = 0;
    uint32_t cps[256];
    for (size_t p = 0; p < len;) {
        size_t used;
        cps[ncp++] = hx_unicode_decode((const uint8_t *)text + p, len - p, &used);
        p += used;
    }
    uint32_t *words;
    size_t nw;
    HX_ASSERT_OK(hx_tokenizer_pre_split(kind, cps, ncp, &words, &nw));
    char got[1024];
    size_t w = 0, at = 0;
    for (size_t i = 0; i < nw; i++) {
        if (i)
            got[w++] = '|';
        for (uint32_t j = 0; j < words[i]; j++)
            w += hx_unicode_encode(cps[at + j], (uint8_t *)got + w);
        at += words[i];
    }
    got[w] = '\0';
    free(words);
    ck_assert_msg(strcmp(got, want) == 0, "pre %d of '%s': got '%s', want '%s'", kind, text, got,
                  want);
}

START_TEST(pre_tokenizers)
{
    check_split(HX_PRE_LLAMA3, "Hello, y'all! How're you?\n\n  12345 abc",
                "Hello|,| y|'all|!| How|'re| you|?\n\n| | |123|45| abc");
    check_split(HX_PRE_LLAMA3, "I'M 'S' don't 1234567\xC2\xA0x",
                "I|'M| '|S|'| don|'t| |123|456|7|\xC2\xA0x");
    check_split(HX_PRE_LLAMA3, "\t\tx  \n y", "\t|\tx|  \n| y");
    check_split(HX_PRE_LLAMA3, "ab\r\n\r\n!!\n", "ab|\r\n\r\n|!!\n");
    check_split(HX_PRE_QWEN2, "abc 12345 \xC2\xBD" "3 x'LL", "abc| |1|2|3|4|5| |\xC2\xBD|3| x|'LL");
    check_split(HX_PRE_QWEN2, "  \xE4\xB8\xAD\xE6\x96\x87 3.14",
                " | \xE4\xB8\xAD\xE6\x96\x87| |3|.|1|4");
    check_split(HX_PRE_GPT2, "Hello world  !!  123abc's\n\n",
                "Hello| world| | !!| | 123|abc|'s|\n\n");
    check_split(HX_PRE_GPT2, " \xC3\xA9t\xC3\xA9 'Re", " \xC3\xA9t\xC3\xA9| '|Re");
    check_split(HX_PRE_DEFAULT, "a+b=c, 12345; x", "a|+|b|=|c|,| |123|45|;| x");
    check_split(HX_PRE_DEFAULT, "$1234.5 ok", "$|123|4|.|5| ok");
    check_split(HX_PRE_STARCODER, "abc 123 x1", "abc| |1|2|3| x|1");
    check_split(HX_PRE_FALCON, "a`b 12345,", "a|`|b| |123|45|,");
    check_split(HX_PRE_GPT2, "", "");
}
END_TEST

START_TEST(unicode_classes)
{
    ck_assert_uint_eq(hx_unicode_flags('a'), HX_UC_LETTER);
    ck_assert_uint_eq(hx_unicode_flags('7'), HX_UC_NUMBER);
    ck_assert_uint_eq(hx_unicode_flags(' '), HX_UC_SEPARATOR | HX_UC_WHITESPACE);
    ck_assert_uint_eq(hx_unicode_flags('\n'), HX_UC_CONTROL | HX_UC_WHITESPACE);
    ck_assert_uint_eq(hx_unicode_flags(0x1C), HX_UC_CONTROL); /* not white space */
    ck_assert_uint_eq(hx_unicode_flags(0xBD), HX_UC_NUMBER);  /* ½ */
    ck_assert_uint_eq(hx_unicode_flags(0x301), HX_UC_MARK);
    ck_assert_uint_eq(hx_unicode_flags(0x20AC), HX_UC_SYMBOL); /* € */
    ck_assert_uint_eq(hx_unicode_flags(0x3000), HX_UC_SEPARATOR | HX_UC_WHITESPACE);
    ck_assert_uint_eq(hx_unicode_flags(0x378), HX_UC_UNDEFINED);
    ck_assert_uint_eq(hx_unicode_flags(0x2FFC), HX_UC_SYMBOL); /* new in Unicode 15.1 */
    ck_assert_uint_eq(hx_unicode_flags(0x10FFFF), HX_UC_UNDEFINED);
    ck_assert_uint_eq(hx_unicode_flags(0x110000), HX_UC_UNDEFINED);
    size_t used, bad;
    ck_assert_uint_eq(hx_unicode_decode((const uint8_t *)"\xE2\x82\xAC", 3, &used), 0x20AC);
    ck_assert_uint_eq(used, 3);
    ck_assert_uint_eq(hx_unicode_decode((const uint8_t *)"\xE2\x82", 2, &used), 0xFFFD);
    ck_assert_uint_eq(used, 1);
    ck_assert_int_eq(hx_unicode_check((const uint8_t *)"\xF0\x9F\x9A", 3, &bad), -1);
    ck_assert_int_eq(hx_unicode_check((const uint8_t *)"\xE0\x80\x80", 3, &bad), 0); /* overlong */
    ck_assert_uint_eq(bad, 1);
    ck_assert_int_eq(hx_unicode_check((const uint8_t *)"\xF0\x9F\x41", 3, &bad), 0);
    ck_assert_uint_eq(bad, 2);
    for (uint32_t b = 0; b < 256; b++)
        ck_assert_int_eq(hx_tokenizer_bpe_cp_byte(hx_tokenizer_bpe_byte_cp((uint8_t)b)), (int)b);
    ck_assert_uint_eq(hx_tokenizer_bpe_byte_cp(' '), 0x120);
}
END_TEST

Suite *suite_tokenizer(void)
{
    Suite *s = suite_create("tokenizer");
    /* The synthetic vocabularies need no data; llama.cpp's do. */
    TCase *core = tcase_create("core");
    tcase_add_test(core, bytes_vocab_through_gguf);
    tcase_add_test(core, spm_from_arrays);
    tcase_add_test(core, bpe_from_arrays);
    tcase_add_test(core, phi3_rstrip);
    tcase_add_test(core, gguf_special_ids);
    tcase_add_test(core, pre_tokenizers);
    tcase_add_test(core, unicode_classes);
    suite_add_tcase(s, core);
    if (!hx_test_vocab("tokenizer: llama.cpp's vocabularies and their test vectors"))
        return s;

    TCase *lib = tcase_create("library");
    tcase_set_timeout(lib, 120);
    tcase_add_test(lib, vectors_spm_library);
    tcase_add_test(lib, vectors_gpt2_library);
    tcase_add_loop_test(lib, vectors_more_library, 0, N_MORE_VOCABS);
    tcase_add_test(lib, unsupported_vocabs_are_refused_by_name);
    tcase_add_test(lib, eog_texts_are_control_tokens);
    tcase_add_test(lib, roundtrip_spm);
    tcase_add_test(lib, roundtrip_gpt2);
    tcase_add_test(lib, pieces_and_decode_spm);
    tcase_add_test(lib, bos_and_special_spm);
    tcase_add_test(lib, bos_and_special_gpt2);
    tcase_add_test(lib, stream_emoji_spm);
    tcase_add_test(lib, stream_emoji_gpt2);
    tcase_add_test(lib, stream_equals_decode);
    tcase_add_test(lib, random_bytes_never_break);
    tcase_add_test(lib, open_errors);
    suite_add_tcase(s, lib);

    TCase *tool = tcase_create("tool");
    tcase_set_timeout(tool, 600);
    tcase_add_test(tool, vectors_spm_tool);
    tcase_add_test(tool, vectors_gpt2_tool);
    tcase_add_test(tool, tool_errors);
    suite_add_tcase(s, tool);
    return s;
}
