/* Which chat family a Jinja template is, by llama.cpp's rules
 * (llm_chat_detect_template): the first rule whose markers the source
 * holds.  llama.cpp writes the rules as nested ifs; here each is a row
 * whose clauses must all hold, a clause holding when one of its markers
 * is in the source ("^x": the source starts with x).  Rows keep llama.cpp's
 * order, a branch's specific rows before its catch-all, so the first match
 * is llama.cpp's answer. */
#include <string.h>

#include "text/chat_template.h"

enum { CLAUSES = 4, MARKERS = 2 };

typedef struct {
    const char *family;
    const char *clause[CLAUSES][MARKERS];
} detect_rule;

/* llama.cpp's Mistral branch: named "mistral..." or holding [INST]; its
 * official v1/v3 templates are told apart by these. */
#define MISTRAL {"^mistral", "[INST]"}
#define MISTRAL_OFFICIAL {"' [INST] ' + system_message", "[AVAILABLE_TOOLS]"}
#define GRANITE_TOOLS {"<tool_call>", "<tools>"}

static const detect_rule rules[] = {
    {"phi4", {{"<|im_start|>"}, {"<|im_sep|>"}}},
    {"smolvlm", {{"<|im_start|>"}, {"<end_of_utterance>"}}},
    {"chatml", {{"<|im_start|>"}}},
    {"mistral-v7", {MISTRAL, {"[SYSTEM_PROMPT]"}}},
    {"mistral-v1", {MISTRAL, MISTRAL_OFFICIAL, {" [INST]"}}},
    {"mistral-v3-tekken", {MISTRAL, MISTRAL_OFFICIAL, {"\"[INST]\""}}},
    {"mistral-v3", {MISTRAL, MISTRAL_OFFICIAL}},
    {"llama2-sys-strip", {MISTRAL, {"content.strip()"}}},
    {"llama2-sys-bos", {MISTRAL, {"bos_token + '[INST]"}}},
    {"llama2-sys", {MISTRAL, {"<<SYS>>"}}},
    {"llama2", {MISTRAL}},
    {"phi3", {{"<|assistant|>"}, {"<|end|>"}}},
    {"chatglm4", {{"[gMASK]<sop>"}}},
    {"exaone-moe", {{"<|assistant|>"}, {"<|user|>"}, {"<|tool_declare|>"}}},
    {"falcon3", {{"<|assistant|>"}, {"<|user|>"}, {"</s>"}}},
    {"glmedge", {{"<|assistant|>"}, {"<|user|>"}}},
    {"glmedge", {{"<|{{ item['role'] }}|>"}, {"<|begin_of_image|>"}}},
    {"zephyr", {{"<|user|>"}, {"<|endoftext|>"}}},
    {"monarch", {{"bos_token + message['role']"}}},
    {"gemma", {{"<start_of_turn>"}}},
    {"orion", {{"'\\n\\nAssistant: ' + eos_token"}}},
    {"openchat", {{"GPT4 Correct "}}},
    {"vicuna-orca", {{"USER: "}, {"ASSISTANT: "}, {"SYSTEM: "}}},
    {"vicuna", {{"USER: "}, {"ASSISTANT: "}}},
    {"deepseek", {{"### Instruction:"}, {"<|EOT|>"}}},
    {"command-r", {{"<|START_OF_TURN_TOKEN|>"}, {"<|USER_TOKEN|>"}}},
    {"llama3", {{"<|start_header_id|>"}, {"<|end_header_id|>"}}},
    {"chatglm3", {{"[gMASK]sop"}}},
    {"minicpm", {{"<用户>"}}},
    {"deepseek2", {{"'Assistant: ' + message['content'] + eos_token"}}},
    {"deepseek3", {{"<｜Assistant｜>"}, {"<｜User｜>"}, {"<｜end▁of▁sentence｜>"}}},
    {"exaone4", {{"[|system|]"}, {"[|assistant|]"}, {"[|endofturn|]"}, {"[|tool|]"}}},
    {"exaone3", {{"[|system|]"}, {"[|assistant|]"}, {"[|endofturn|]"}}},
    {"rwkv-world", {{"rwkv-world", "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"}}},
    {"granite-4.0", {{"<|start_of_role|>"}, GRANITE_TOOLS, {"g4_default_system_message"}}},
    {"granite-4.1", {{"<|start_of_role|>"}, GRANITE_TOOLS}},
    {"granite", {{"<|start_of_role|>"}}},
    {"gigachat",
     {{"message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"}}},
    {"megrez", {{"<|role_start|>"}}},
    {"yandex", {{" Ассистент:"}}},
    {"bailing", {{"<role>ASSISTANT</role>"}, {"'HUMAN'"}}},
    {"bailing-think", {{"<role>ASSISTANT</role>"}, {"\"HUMAN\""}, {"<think>"}}},
    {"bailing2", {{"<role>ASSISTANT</role>"}, {"<role>HUMAN</role>"}, {"<|role_end|>"}}},
    {"llama4", {{"<|header_start|>"}, {"<|header_end|>"}}},
    {"dots1", {{"<|endofuserprompt|>"}}}, /* llama.cpp has no name for it: this one is ours */
    {"hunyuan-moe", {{"<|extra_0|>"}, {"<|extra_4|>"}}},
    {"gpt-oss", {{"<|start|>"}, {"<|channel|>"}}},
    {"hunyuan-vl", {{"<｜hy_Assistant｜>"}, {"<｜hy_begin▁of▁sentence｜>"}}},
    {"hunyuan-dense", {{"<｜hy_Assistant｜>"}, {"<｜hy_place▁holder▁no▁3｜>"}}},
    {"kimi-k2", {{"<|im_assistant|>assistant<|im_middle|>"}}},
    {"seed_oss", {{"<seed:bos>"}}},
    {"grok-2", {{"'Assistant: '  + message['content'] + '<|separator|>"}}},
    {"pangu-embedded", {{"[unused9]系统：[unused10]"}}},
    {"solar-open", {{"<|begin|>"}, {"<|end|>"}, {"<|content|>"}}},
};

/* llama.cpp's family names that no rule detects: given only by name. */
static const char *const named_only[] = {"mistral-v7-tekken", "deepseek-ocr"};

static int holds(const char *tmpl, const char *marker)
{
    if (marker[0] == '^')
        return !strncmp(tmpl, marker + 1, strlen(marker + 1));
    return strstr(tmpl, marker) != NULL;
}

static int matches(const char *tmpl, const detect_rule *r)
{
    for (int c = 0; c < CLAUSES && r->clause[c][0]; c++) {
        int any = 0;
        for (int k = 0; k < MARKERS && r->clause[c][k] && !any; k++)
            any = holds(tmpl, r->clause[c][k]);
        if (!any)
            return 0;
    }
    return 1;
}

const char *hx_chat_detect(const char *tmpl)
{
    const size_t n = sizeof rules / sizeof rules[0];
    for (size_t i = 0; i < n; i++)
        if (!strcmp(tmpl, rules[i].family))
            return rules[i].family;
    for (size_t i = 0; i < sizeof named_only / sizeof named_only[0]; i++)
        if (!strcmp(tmpl, named_only[i]))
            return named_only[i];
    for (size_t i = 0; i < n; i++)
        if (matches(tmpl, &rules[i]))
            return rules[i].family;
    return NULL;
}
