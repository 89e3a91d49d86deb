/* Chat templates: a conversation as the prompt text of a model's chat
 * family, as llama.cpp's llama_chat_apply_template writes it (its built-in
 * families, not a Jinja engine): one row of a table per family, a format
 * per role. */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "hetero.h"
#include "text/chat_template.h"
#include "runtime/error.h"

/* The text written so far; bytes past `cap` are only counted, so one pass
 * both sizes and writes. */
typedef struct {
    char *buf;
    size_t cap, len;
    int overflow; /* the length no longer fits a size_t */
} chat_out;

static void put_n(chat_out *o, const char *s, size_t n)
{
    if (o->overflow || n >= SIZE_MAX - o->len) {
        o->overflow = 1;
        return;
    }
    if (o->len + n < o->cap)
        memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void put(chat_out *o, const char *s) { put_n(o, s, strlen(s)); }

/* llama.cpp trims with isspace in the C locale: " \t\n\v\f\r". */
static void put_trimmed(chat_out *o, const char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    put_n(o, s, n);
}

/* A message's format; role NULL stands for every role not listed before
 * it.  A role a family does not list is refused: there llama.cpp drops
 * the message, and a caller would lose it unawares. */
typedef struct {
    const char *role, *fmt;
} chat_turn;

enum { N_TURNS = 5 };

typedef struct {
    const char *name;
    const char *begin;   /* before the first message */
    const char *between; /* before every message but the first */
    /* Families of [INST] turns (Llama 2, Mistral): `open` comes before a
     * message when no turn is open; `begin`, when set, opens the first one,
     * and a message of the catch-all row (the answer) closes it. */
    const char *open;
    /* Families without a system turn (Gemma, Orion): 1 holds system
     * messages back for the next %S, 2 does so trimmed. */
    int hold_system;
    chat_turn turns[N_TURNS];
    const char *opening; /* the assistant's turn, when asked for; NULL: the family has none */
} chat_family;

/* Granite 3 writes a tool call's role as is, Granite 4 as the assistant's. */
#define GRANITE_TURNS(tool_call_role)                                                                  \
    {{"assistant_tool_call",                                                                           \
      "<|start_of_role|>" tool_call_role "<|end_of_role|><|tool_call|>%c<|end_of_text|>\n"},           \
     {NULL, "<|start_of_role|>%r<|end_of_role|>%c<|end_of_text|>\n"}}
#define GRANITE_OPENING "<|start_of_role|>assistant<|end_of_role|>"

/* The formats use %r the role, %R the role with a capital first letter,
 * %U the role in capitals, %c the content, %t the content trimmed, %S the
 * system messages held back and a blank line (nothing when they are
 * empty).  Each row is llama.cpp's llm_chat_apply_template for the family. */
static const chat_family families[] = {
    {.name = "chatml", .turns = {{NULL, "<|im_start|>%r\n%c<|im_end|>\n"}}, .opening = "<|im_start|>assistant\n"},
    {.name = "llama2", .begin = "[INST] ", .open = "[INST] ",
     .turns = {{"system", "%c\n"}, {"user", "%c [/INST]"}, {NULL, "%c</s>"}}},
    {.name = "llama2-sys", .begin = "[INST] ", .open = "[INST] ",
     .turns = {{"system", "<<SYS>>\n%c\n<</SYS>>\n\n"}, {"user", "%c [/INST]"}, {NULL, "%c</s>"}}},
    {.name = "llama2-sys-bos", .begin = "[INST] ", .open = "<s>[INST] ",
     .turns = {{"system", "<<SYS>>\n%c\n<</SYS>>\n\n"}, {"user", "%c [/INST]"}, {NULL, "%c</s>"}}},
    {.name = "llama2-sys-strip", .begin = "[INST] ", .open = "[INST] ",
     .turns = {{"system", "<<SYS>>\n%t\n<</SYS>>\n\n"}, {"user", "%t [/INST]"}, {NULL, "%t</s>"}}},
    {.name = "mistral-v1", .open = " [INST] ",
     .turns = {{"system", "%c\n\n"}, {"user", "%c [/INST]"}, {NULL, " %c</s>"}}},
    {.name = "mistral-v3", .open = "[INST] ",
     .turns = {{"system", "%c\n\n"}, {"user", "%c[/INST]"}, {NULL, " %t</s>"}}},
    {.name = "mistral-v3-tekken", .open = "[INST]",
     .turns = {{"system", "%c\n\n"}, {"user", "%c[/INST]"}, {NULL, "%c</s>"}}},
    {.name = "mistral-v7",
     .turns = {{"system", "[SYSTEM_PROMPT] %c[/SYSTEM_PROMPT]"}, {"user", "[INST] %c[/INST]"}, {NULL, " %c</s>"}}},
    {.name = "mistral-v7-tekken",
     .turns = {{"system", "[SYSTEM_PROMPT]%c[/SYSTEM_PROMPT]"}, {"user", "[INST]%c[/INST]"}, {NULL, "%c</s>"}}},
    {.name = "llama3", .turns = {{NULL, "<|start_header_id|>%r<|end_header_id|>\n\n%t<|eot_id|>"}},
     .opening = "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {.name = "llama4", .turns = {{NULL, "<|header_start|>%r<|header_end|>\n\n%t<|eot|>"}},
     .opening = "<|header_start|>assistant<|header_end|>\n\n"},
    {.name = "phi3", .turns = {{NULL, "<|%r|>\n%c<|end|>\n"}}, .opening = "<|assistant|>\n"},
    {.name = "phi4", .turns = {{NULL, "<|im_start|>%r<|im_sep|>%c<|im_end|>"}},
     .opening = "<|im_start|>assistant<|im_sep|>"},
    {.name = "falcon3", .turns = {{NULL, "<|%r|>\n%c\n"}}, .opening = "<|assistant|>\n"},
    {.name = "zephyr", .turns = {{NULL, "<|%r|>\n%c<|endoftext|>\n"}}, .opening = "<|assistant|>\n"},
    {.name = "monarch", .between = "<s>", .turns = {{NULL, "%r\n%c</s>\n"}}, .opening = "<s>assistant\n"},
    {.name = "gemma", .hold_system = 2,
     .turns = {{"assistant", "<start_of_turn>model\n%t<end_of_turn>\n"},
               {NULL, "<start_of_turn>%r\n%S%t<end_of_turn>\n"}},
     .opening = "<start_of_turn>model\n"},
    {.name = "orion", .hold_system = 1,
     .turns = {{"user", "Human: %S%c\n\nAssistant: </s>"}, {NULL, "%c</s>"}}},
    {.name = "openchat", .turns = {{"system", "%c<|end_of_turn|>"}, {NULL, "GPT4 Correct %R: %c<|end_of_turn|>"}},
     .opening = "GPT4 Correct Assistant:"},
    {.name = "vicuna",
     .turns = {{"system", "%c\n\n"}, {"user", "USER: %c\n"}, {"assistant", "ASSISTANT: %c</s>\n"}},
     .opening = "ASSISTANT:"},
    {.name = "vicuna-orca",
     .turns = {{"system", "SYSTEM: %c\n"}, {"user", "USER: %c\n"}, {"assistant", "ASSISTANT: %c</s>\n"}},
     .opening = "ASSISTANT:"},
    {.name = "deepseek",
     .turns = {{"system", "%c"}, {"user", "### Instruction:\n%c\n"}, {"assistant", "### Response:\n%c\n<|EOT|>\n"}},
     .opening = "### Response:\n"},
    {.name = "deepseek2",
     .turns = {{"system", "%c\n\n"}, {"user", "User: %c\n\n"}, {"assistant", "Assistant: %c<｜end▁of▁sentence｜>"}},
     .opening = "Assistant:"},
    {.name = "deepseek3",
     .turns = {{"system", "%c\n\n"}, {"user", "<｜User｜>%c"}, {"assistant", "<｜Assistant｜>%c<｜end▁of▁sentence｜>"}},
     .opening = "<｜Assistant｜>"},
    {.name = "deepseek-ocr", .turns = {{NULL, "%c"}}},
    {.name = "command-r",
     .turns = {{"system", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>%t<|END_OF_TURN_TOKEN|>"},
               {"user", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>%t<|END_OF_TURN_TOKEN|>"},
               {"assistant", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>%t<|END_OF_TURN_TOKEN|>"}},
     .opening = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {.name = "chatglm3", .begin = "[gMASK]sop", .turns = {{NULL, "<|%r|>\n %c"}}, .opening = "<|assistant|>"},
    {.name = "chatglm4", .begin = "[gMASK]<sop>", .turns = {{NULL, "<|%r|>\n%c"}}, .opening = "<|assistant|>\n"},
    {.name = "glmedge", .turns = {{NULL, "<|%r|>\n%c"}}, .opening = "<|assistant|>"},
    {.name = "minicpm", .turns = {{"user", "<用户>%t<AI>"}, {NULL, "%t"}}},
    {.name = "exaone3",
     .turns = {{"system", "[|system|]%t[|endofturn|]\n"}, {"user", "[|user|]%t\n"},
               {"assistant", "[|assistant|]%t[|endofturn|]\n"}},
     .opening = "[|assistant|]"},
    {.name = "exaone4",
     .turns = {{"system", "[|system|]%t[|endofturn|]\n"}, {"user", "[|user|]%t\n"},
               {"assistant", "[|assistant|]%t[|endofturn|]\n"}, {"tool", "[|tool|]%t[|endofturn|]\n"}},
     .opening = "[|assistant|]"},
    {.name = "exaone-moe",
     .turns = {{"system", "<|system|>\n%t<|endofturn|>\n"}, {"user", "<|user|>\n%t<|endofturn|>\n"},
               {"assistant", "<|assistant|>\n%t<|endofturn|>\n"}, {"tool", "<|tool|>\n%t<|endofturn|>\n"}},
     .opening = "<|assistant|>\n"},
    {.name = "granite", .turns = GRANITE_TURNS("%r"), .opening = GRANITE_OPENING},
    {.name = "granite-4.0", .turns = GRANITE_TURNS("assistant"), .opening = GRANITE_OPENING},
    {.name = "granite-4.1", .turns = GRANITE_TURNS("assistant"), .opening = GRANITE_OPENING},
    {.name = "megrez", .turns = {{NULL, "<|role_start|>%r<|role_end|>%c<|turn_end|>"}},
     .opening = "<|role_start|>assistant<|role_end|>"},
    {.name = "bailing", .turns = {{"user", "<role>HUMAN</role>%c"}, {NULL, "<role>%U</role>%c"}},
     .opening = "<role>ASSISTANT</role>"},
    {.name = "bailing-think", .turns = {{"user", "<role>HUMAN</role>%c"}, {NULL, "<role>%U</role>%c"}},
     .opening = "<role>ASSISTANT</role><think>"},
    {.name = "smolvlm", .begin = "<|im_start|>",
     .turns = {{"system", "%c\n\n"}, {"user", "User: %c<end_of_utterance>\n"},
               {NULL, "Assistant: %c<end_of_utterance>\n"}},
     .opening = "Assistant:"},
    {.name = "hunyuan-moe",
     .turns = {{"system", "<|startoftext|>%c<|extra_4|>"}, {"assistant", "%c<|eos|>"},
               {NULL, "<|startoftext|>%c<|extra_0|>"}}},
    {.name = "gpt-oss",
     .turns = {{"assistant", "<|start|>%r<|message|>%c<|return|>"}, {NULL, "<|start|>%r<|message|>%c<|end|>"}},
     .opening = "<|start|>assistant"},
    {.name = "kimi-k2",
     .turns = {{"system", "<|im_system|>system<|im_middle|>%c<|im_end|>"},
               {"user", "<|im_user|>user<|im_middle|>%c<|im_end|>"},
               {"assistant", "<|im_assistant|>assistant<|im_middle|>%c<|im_end|>"},
               {"tool", "<|im_system|>tool<|im_middle|>%c<|im_end|>"}, {NULL, "%c<|im_end|>"}},
     .opening = "<|im_assistant|>assistant<|im_middle|>"},
    {.name = "seed_oss", .turns = {{"assistant", "<seed:bos>%r\n%t<seed:eos>"}, {NULL, "<seed:bos>%r\n%c<seed:eos>"}},
     .opening = "<seed:bos>assistant\n"},
    {.name = "grok-2",
     .turns = {{"system", "System: %t<|separator|>\n\n"}, {"user", "Human: %t<|separator|>\n\n"},
               {"assistant", "Assistant: %c<|separator|>\n\n"}},
     .opening = "Assistant:"},
    {.name = "solar-open", .turns = {{NULL, "<|begin|>%r<|content|>%c<|end|>"}}, .opening = "<|begin|>assistant"},
};
enum { N_FAMILIES = sizeof families / sizeof families[0] };

static const chat_family *family_named(const char *name)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (!strcmp(families[i].name, name))
            return &families[i];
    return NULL;
}

/* Formatting one conversation. */
typedef struct {
    const chat_family *f;
    const hx_chat_message *msgs;
    size_t held; /* the first system message held back, or SIZE_MAX */
    chat_out *o;
} chat_run;

/* %S: the held system messages from r->held up to message i. */
static void put_held(chat_run *r, size_t i)
{
    if (r->held == SIZE_MAX)
        return;
    size_t before = r->o->len;
    for (size_t j = r->held; j < i; j++)
        if (!strcmp(r->msgs[j].role, "system"))
            (r->f->hold_system == 2 ? put_trimmed : put)(r->o, r->msgs[j].content);
    if (r->o->len != before)
        put(r->o, "\n\n");
    r->held = SIZE_MAX;
}

/* Message i in format `fmt` (see the table's placeholders). */
static void put_turn(chat_run *r, const char *fmt, size_t i)
{
    chat_out *o = r->o;
    const hx_chat_message *m = &r->msgs[i];
    for (const char *p = fmt; *p;) {
        const char *q = strchr(p, '%');
        if (!q) {
            put(o, p);
            return;
        }
        put_n(o, p, (size_t)(q - p));
        if (q[1] == 'r') {
            put(o, m->role);
        } else if (q[1] == 'R' || q[1] == 'U') {
            for (size_t k = 0; m->role[k]; k++) {
                char c = q[1] == 'U' || k == 0 ? (char)toupper((unsigned char)m->role[k]) : m->role[k];
                put_n(o, &c, 1);
            }
        } else if (q[1] == 'c') {
            put(o, m->content);
        } else if (q[1] == 't') {
            put_trimmed(o, m->content);
        } else if (q[1] == 'S') {
            put_held(r, i);
        }
        p = q + 2;
    }
}

static hx_status format(const chat_family *f, const hx_chat_message *msgs, size_t n, int add_assistant,
                        chat_out *o)
{
    chat_run r = {f, msgs, SIZE_MAX, o};
    int in_turn = f->begin && f->open;
    if (f->begin)
        put(o, f->begin);
    for (size_t i = 0; i < n; i++) {
        if (f->hold_system && !strcmp(msgs[i].role, "system")) {
            if (r.held == SIZE_MAX)
                r.held = i;
            continue;
        }
        const chat_turn *t = f->turns;
        while (t < f->turns + N_TURNS && t->fmt && t->role && strcmp(t->role, msgs[i].role))
            t++;
        if (t == f->turns + N_TURNS || !t->fmt)
            return hx_error(HX_ERR_UNSUPPORTED, "chat template '%s' has no role '%s' (message %zu)", f->name,
                            msgs[i].role, i);
        if (i && f->between)
            put(o, f->between);
        if (f->open && !in_turn)
            put(o, f->open);
        in_turn = !f->open || t->role;
        put_turn(&r, t->fmt, i);
    }
    if (add_assistant && f->opening)
        put(o, f->opening);
    return HX_OK;
}

const char *hx_chat_template_builtin(size_t i) { return i < N_FAMILIES ? families[i].name : NULL; }

/* The family `tmpl` names or is, with the reason in hx_last_error when
 * there is none. */
static hx_status family_of(const char *tmpl, const chat_family **out)
{
    const chat_family *f = family_named(tmpl);
    const char *detected = f ? f->name : hx_chat_detect(tmpl);
    if (!detected) {
        /* Quote its first line, at most 48 bytes: a template may be pages long. */
        int quote = (int)strcspn(tmpl, "\n");
        return hx_error(HX_ERR_UNSUPPORTED,
                        "chat template \"%.*s%s\" is no built-in family name, nor a template whose markers "
                        "name one (hx_chat_template_builtin lists the families)",
                        quote < 48 ? quote : 48, tmpl, tmpl[quote < 48 ? quote : 48] ? "..." : "");
    }
    if (!(f = family_named(detected)))
        return hx_error(HX_ERR_UNSUPPORTED,
                        "chat template family '%s' is one hetero does not format (hx_chat_template_builtin "
                        "lists those it does)",
                        detected);
    *out = f;
    return HX_OK;
}

static hx_status template_name(const char *tmpl, const char **name)
{
    if (!tmpl || !name)
        return hx_error(HX_ERR_INVALID_ARG, "hx_chat_template_name: NULL argument");
    const chat_family *f;
    hx_status st = family_of(tmpl, &f);
    *name = st == HX_OK ? f->name : NULL;
    return st;
}

static hx_status apply_template(const char *tmpl, const hx_chat_message *msgs, size_t n, int add_assistant,
                                char *buf, size_t cap, size_t *len)
{
    if (!tmpl || (!msgs && n) || (!buf && cap) || !len)
        return hx_error(HX_ERR_INVALID_ARG, "hx_chat_apply_template: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return hx_error(HX_ERR_INVALID_ARG, "hx_chat_apply_template: message %zu has a NULL %s", i,
                            msgs[i].role ? "content" : "role");
    *len = 0;
    const chat_family *f;
    hx_status st = family_of(tmpl, &f);
    if (st != HX_OK)
        return st;
    chat_out o = {buf, cap, 0, 0};
    st = format(f, msgs, n, add_assistant, &o);
    if (st != HX_OK)
        return st;
    if (o.overflow)
        return hx_error(HX_ERR_RANGE, "hx_chat_apply_template: the text is longer than memory");
    *len = o.len;
    if (o.len >= cap) {
        if (cap)
            buf[0] = '\0';
        return hx_error(HX_ERR_RANGE, "hx_chat_apply_template: %zu bytes and a NUL do not fit in %zu", o.len,
                        cap);
    }
    buf[o.len] = '\0';
    return HX_OK;
}

hx_status hx_chat_template_name(const char *tmpl, const char **name)
{
    hx_api_enter();
    return hx_api_leave(template_name(tmpl, name));
}

hx_status hx_chat_apply_template(const char *tmpl, const hx_chat_message *msgs, size_t n, int add_assistant,
                                 char *buf, size_t cap, size_t *len)
{
    hx_api_enter();
    return hx_api_leave(apply_template(tmpl, msgs, n, add_assistant, buf, cap, len));
}
