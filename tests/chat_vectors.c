/* Test vectors of the chat templates: data, not code.
 *
 * The conversation and the cases up to Granite 4.1 are llama.cpp's
 * tests/test-chat-template.cpp: a model's Jinja template and the text that
 * llama.cpp's llama_chat_apply_template gives for it.  Then real templates
 * from llama.cpp's models/templates and SmolLM2-135M-Instruct's GGUF file,
 * and the families that file has no case for, by name; their texts are
 * what llama_chat_apply_template gives for them. */
#include "tests/chat_vectors.h"

const hx_chat_message hx_chat_conversation[HX_CHAT_CONVERSATION] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

static const hx_chat_message granite3_tool_call[] = {
    {"user", "What is the weather?"},
    {"assistant_tool_call", "[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]"},
    {"tool_response", "{\"temperature\": 72}"},
};

static const hx_chat_message granite4_tool_call[] = {
    {"user", "What is the weather?"},
    {"assistant_tool_call", "<tool_call>\n"
     "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n"
     "</tool_call>"},
    {"tool_response", "{\"temperature\": 72}"},
};

/* Texts several templates of one family give. */
static const char expected_chatml[] = "<|im_start|>system\n"
    "You are a helpful assistant<|im_end|>\n"
    "<|im_start|>user\n"
    "Hello<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Hi there<|im_end|>\n"
    "<|im_start|>user\n"
    "Who are you<|im_end|>\n"
    "<|im_start|>assistant\n"
    "   I am an assistant   <|im_end|>\n"
    "<|im_start|>user\n"
    "Another question<|im_end|>\n"
    "<|im_start|>assistant\n";
static const char expected_gemma[] = "<start_of_turn>user\n"
    "You are a helpful assistant\n"
    "\n"
    "Hello<end_of_turn>\n"
    "<start_of_turn>model\n"
    "Hi there<end_of_turn>\n"
    "<start_of_turn>user\n"
    "Who are you<end_of_turn>\n"
    "<start_of_turn>model\n"
    "I am an assistant<end_of_turn>\n"
    "<start_of_turn>user\n"
    "Another question<end_of_turn>\n"
    "<start_of_turn>model\n";
static const char expected_phi3[] = "<|system|>\n"
    "You are a helpful assistant<|end|>\n"
    "<|user|>\n"
    "Hello<|end|>\n"
    "<|assistant|>\n"
    "Hi there<|end|>\n"
    "<|user|>\n"
    "Who are you<|end|>\n"
    "<|assistant|>\n"
    "   I am an assistant   <|end|>\n"
    "<|user|>\n"
    "Another question<|end|>\n"
    "<|assistant|>\n";
static const char expected_granite_4_0[] = "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
    "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
    "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
    "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
    "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
    "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
    "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
    "<|start_of_role|>assistant<|end_of_role|><|tool_call|><tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}\n"
    "</tool_call><|end_of_text|>\n"
    "<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 72}<|end_of_text|>\n"
    "<|start_of_role|>assistant<|end_of_role|>";
static const char expected_exaone3[] = "[|system|]You are a helpful assistant[|endofturn|]\n"
    "[|user|]Hello\n"
    "[|assistant|]Hi there[|endofturn|]\n"
    "[|user|]Who are you\n"
    "[|assistant|]I am an assistant[|endofturn|]\n"
    "[|user|]Another question\n"
    "[|assistant|]";

const hx_chat_vector hx_chat_vectors[] = {
    {
        .model = "teknium/OpenHermes-2.5-Mistral-7B",
        .family = "chatml",
        .jinja = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                 "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
                 "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        .expected = expected_chatml,
    },
    {
        .model = "mistralai/Mistral-7B-Instruct-v0.2 (NOTE: Old pre-v1 without a system prompt)",
        .family = "llama2",
        .jinja = "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') "
                 "!= (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
                 "alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
                 "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' "
                 "}}{% elif message['role'] == 'assistant' %}{{ message['content'] + "
                 "eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are "
                 "supported!') }}{% endif %}{% endfor %}",
        .expected = "[INST] You are a helpful assistant\n"
                    "Hello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   "
                    "</s>[INST] Another question [/INST]",
    },
    {
        .model = "TheBloke/FusionNet_34Bx2_MoE-AWQ",
        .family = "llama2-sys-bos",
        .jinja = "{%- for idx in range(0, messages|length) -%}\n"
                 "{%- if messages[idx]['role'] == 'user' -%}\n"
                 "{%- if idx > 1 -%}\n"
                 "{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}\n"
                 "{%- else -%}\n"
                 "{{- messages[idx]['content'] + ' [/INST]' -}}\n"
                 "{%- endif -%}\n"
                 "{% elif messages[idx]['role'] == 'system' %}\n"
                 "{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}\n"
                 "{%- elif messages[idx]['role'] == 'assistant' -%}\n"
                 "{{- ' '  + messages[idx]['content'] + ' ' + eos_token -}}\n"
                 "{% endif %}\n"
                 "{% endfor %}",
        .expected = "[INST] <<SYS>>\n"
                    "You are a helpful assistant\n"
                    "<</SYS>>\n"
                    "\n"
                    "Hello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant  "
                    " </s><s>[INST] Another question [/INST]",
    },
    {
        .model = "bofenghuang/vigogne-2-70b-chat",
        .family = "llama2-sys-strip",
        .jinja = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = "
                 "messages[1:] %}{% set system_message = messages[0]['content'] %}{% elif true "
                 "== true and not '<<SYS>>' in messages[0]['content'] %}{% set loop_messages = "
                 "messages %}{% set system_message = 'Vous êtes Vigogne, un assistant IA créé "
                 "par Zaion Lab. Vous suivez extrêmement bien les instructions. Aidez autant que "
                 "vous le pouvez.' %}{% else %}{% set loop_messages = messages %}{% set "
                 "system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
                 "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
                 "raise_exception('Conversation roles must alternate "
                 "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and "
                 "system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
                 "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
                 "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' "
                 "+ content.strip() + ' [/INST]' }}{% elif message['role'] == 'system' %}{{ "
                 "'<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}{% elif message['role'] "
                 "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% "
                 "endfor %}",
        .expected = "[INST] <<SYS>>\n"
                    "You are a helpful assistant\n"
                    "<</SYS>>\n"
                    "\n"
                    "Hello [/INST]Hi there</s>[INST] Who are you [/INST]I am an "
                    "assistant</s>[INST] Another question [/INST]",
    },
    {
        .model = "mlabonne/AlphaMonarch-7B",
        .family = "monarch",
        .jinja = "{% for message in messages %}{{bos_token + message['role'] + '\\n' + "
                 "message['content'] + eos_token + '\\n'}}{% endfor %}{% if "
                 "add_generation_prompt %}{{ bos_token + 'assistant\\n' }}{% endif %}",
        .expected = "system\n"
                    "You are a helpful assistant</s>\n"
                    "<s>user\n"
                    "Hello</s>\n"
                    "<s>assistant\n"
                    "Hi there</s>\n"
                    "<s>user\n"
                    "Who are you</s>\n"
                    "<s>assistant\n"
                    "   I am an assistant   </s>\n"
                    "<s>user\n"
                    "Another question</s>\n"
                    "<s>assistant\n",
    },
    {
        .model = "google/gemma-7b-it",
        .family = "gemma",
        .jinja = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
                 "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] "
                 "== 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles "
                 "must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
                 "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set "
                 "role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + "
                 "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if "
                 "add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
        .expected = expected_gemma,
    },
    {
        .model = "OrionStarAI/Orion-14B-Chat",
        .family = "orion",
        .jinja = "{% for message in messages %}{% if loop.first %}{{ bos_token }}{% endif %}{% "
                 "if message['role'] == 'user' %}{{ 'Human: ' + message['content'] + "
                 "'\\n\\nAssistant: ' + eos_token }}{% elif message['role'] == 'assistant' %}{{ "
                 "message['content'] + eos_token }}{% endif %}{% endfor %}",
        .expected = "Human: You are a helpful assistant\n"
                    "\n"
                    "Hello\n"
                    "\n"
                    "Assistant: </s>Hi there</s>Human: Who are you\n"
                    "\n"
                    "Assistant: </s>   I am an assistant   </s>Human: Another question\n"
                    "\n"
                    "Assistant: </s>",
    },
    {
        .model = "openchat/openchat-3.5-0106",
        .family = "openchat",
        .jinja = "{{ bos_token }}{% for message in messages %}{{ 'GPT4 Correct ' + "
                 "message['role'].title() + ': ' + message['content'] + '<|end_of_turn|>'}}{% "
                 "endfor %}{% if add_generation_prompt %}{{ 'GPT4 Correct Assistant:' }}{% endif "
                 "%}",
        .expected = "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: "
                    "Hello<|end_of_turn|>GPT4 Correct Assistant: Hi there<|end_of_turn|>GPT4 "
                    "Correct User: Who are you<|end_of_turn|>GPT4 Correct Assistant:    I am an "
                    "assistant   <|end_of_turn|>GPT4 Correct User: Another "
                    "question<|end_of_turn|>GPT4 Correct Assistant:",
    },
    {
        .model = "deepseek-ai/deepseek-coder-33b-instruct",
        .family = "deepseek",
        .jinja = "{% if not add_generation_prompt is defined %}\n"
                 "{% set add_generation_prompt = false %}\n"
                 "{% endif %}\n"
                 "{%- set ns = namespace(found=false) -%}\n"
                 "{%- for message in messages -%}\n"
                 "    {%- if message['role'] == 'system' -%}\n"
                 "        {%- set ns.found = true -%}\n"
                 "    {%- endif -%}\n"
                 "{%- endfor -%}\n"
                 "{{bos_token}}{%- if not ns.found -%}\n"
                 "{{'You are an AI programming assistant, utilizing the Deepseek Coder model, "
                 "developed by Deepseek Company, and you only answer questions related to "
                 "computer science. For politically sensitive questions, security and privacy "
                 "issues, and other non-computer science questions, you will refuse to "
                 "answer\\n'}}\n"
                 "{%- endif %}\n"
                 "{%- for message in messages %}\n"
                 "    {%- if message['role'] == 'system' %}\n"
                 "{{ message['content'] }}\n"
                 "    {%- else %}\n"
                 "        {%- if message['role'] == 'user' %}\n"
                 "{{'### Instruction:\\n' + message['content'] + '\\n'}}\n"
                 "        {%- else %}\n"
                 "{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}\n"
                 "        {%- endif %}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n"
                 "{% if add_generation_prompt %}\n"
                 "{{'### Response:'}}\n"
                 "{% endif %}",
        .expected = "You are a helpful assistant### Instruction:\n"
                    "Hello\n"
                    "### Response:\n"
                    "Hi there\n"
                    "<|EOT|>\n"
                    "### Instruction:\n"
                    "Who are you\n"
                    "### Response:\n"
                    "   I am an assistant   \n"
                    "<|EOT|>\n"
                    "### Instruction:\n"
                    "Another question\n"
                    "### Response:\n",
    },
    {
        .model = "eachadea/vicuna-13b-1.1",
        .family = "vicuna",
        .jinja = "{%- for message in messages %}{%- if message['role'] == 'system' -%}{{- '' + "
                 "message['content'] + '\n"
                 "\n"
                 "' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + "
                 "message['content'] + '\n"
                 "'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n"
                 "' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt "
                 "-%}{{-'ASSISTANT:'-}}{%- endif -%}",
        .expected = "You are a helpful assistant\n"
                    "\n"
                    "USER: Hello\n"
                    "ASSISTANT: Hi there</s>\n"
                    "USER: Who are you\n"
                    "ASSISTANT:    I am an assistant   </s>\n"
                    "USER: Another question\n"
                    "ASSISTANT:",
    },
    {
        .model = "Orca-Vicuna",
        .family = "vicuna-orca",
        .jinja = "{%- for message in messages %}{%- if message['role'] == 'system' "
                 "-%}{{-'SYSTEM: ' + message['content'] + '\n"
                 "' -}}{%- else -%}{%- if message['role'] == 'user' -%}{{-'USER: ' + "
                 "message['content'] + '\n"
                 "'-}}{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\n"
                 "' -}}{%- endif -%}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt "
                 "-%}{{-'ASSISTANT:'-}}{%- endif -%}",
        .expected = "SYSTEM: You are a helpful assistant\n"
                    "USER: Hello\n"
                    "ASSISTANT: Hi there</s>\n"
                    "USER: Who are you\n"
                    "ASSISTANT:    I am an assistant   </s>\n"
                    "USER: Another question\n"
                    "ASSISTANT:",
    },
    {
        .model = "CohereForAI/c4ai-command-r-plus",
        .family = "command-r",
        .jinja = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = "
                 "messages[1:] %}{% set system_message = messages[0]['content'] %}{% elif false "
                 "== true %}{% set loop_messages = messages %}{% set system_message = 'You are "
                 "Command-R, a brilliant, sophisticated, AI-assistant trained to assist human "
                 "users by providing thorough responses. You are trained by Cohere.' %}{% else "
                 "%}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
                 "%}{% if system_message != false %}{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' "
                 "+ system_message + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% for message in "
                 "loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) "
                 "%}{{ raise_exception('Conversation roles must alternate "
                 "user/assistant/user/assistant/...') }}{% endif %}{% set content = "
                 "message['content'] %}{% if message['role'] == 'user' %}{{ "
                 "'<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + "
                 "'<|END_OF_TURN_TOKEN|>' }}{% elif message['role'] == 'assistant' %}{{ "
                 "'<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'  + content.strip() + "
                 "'<|END_OF_TURN_TOKEN|>' }}{% endif %}{% endfor %}{% if add_generation_prompt "
                 "%}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}",
        .expected = "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful "
                    "assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|EN"
                    "D_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi "
                    "there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are "
                    "you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an "
                    "assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another "
                    "question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
    },
    {
        .model = "Llama-3",
        .family = "llama3",
        .jinja = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set "
                 "content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n"
                 "\n"
                 "'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set "
                 "content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ "
                 "'<|start_header_id|>assistant<|end_header_id|>\n"
                 "\n"
                 "' }}",
        .expected = "<|start_header_id|>system<|end_header_id|>\n"
                    "\n"
                    "You are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|"
                    ">\n"
                    "\n"
                    "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
                    "\n"
                    "Hi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
                    "\n"
                    "Who are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
                    "\n"
                    "I am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
                    "\n"
                    "Another question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
                    "\n",
    },
    {
        .model = "Phi-3-mini",
        .family = "phi3",
        .jinja = "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') "
                 "%}{{'<|user|>' + '\n"
                 "' + message['content'] + '<|end|>' + '\n"
                 "' + '<|assistant|>' + '\n"
                 "'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' "
                 "+ '\n"
                 "'}}{% endif %}{% endfor %}",
        .expected = expected_phi3,
    },
    {
        .model = "Phi-3-small",
        .family = "phi3",
        .jinja = "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + "
                 "'\n"
                 "' + message['content'] + '<|end|>\n"
                 "' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n"
                 "' }}{% else %}{{ eos_token }}{% endif %}",
        .expected = expected_phi3,
    },
    {
        .model = "Phi-3-medium",
        .family = "phi3",
        .jinja = "{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' "
                 "+ '\n"
                 "' + message['content'] + '<|end|>' + '\n"
                 "' + '<|assistant|>' + '\n"
                 "'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' "
                 "+ '\n"
                 "'}}{% endif %}{% endfor %}",
        .expected = expected_phi3,
    },
    {
        .model = "Phi-3-vision",
        .family = "phi3",
        .jinja = "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n"
                 "' + message['content'] + '<|end|>\n"
                 "' }}{% endfor %}{% if add_generation_prompt and messages[-1]['role'] != "
                 "'assistant' %}{{- '<|assistant|>\n"
                 "' -}}{% endif %}",
        .expected = expected_phi3,
    },
    {
        .model = "ChatGLM3",
        .family = "chatglm3",
        .jinja = "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] "
                 "}}|>\n"
                 " {{ message['content'] }}{% else %}<|{{ message['role'] }}|>\n"
                 " {{ message['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt "
                 "%}<|assistant|>{% endif %}",
        .expected = "[gMASK]sop<|system|>\n"
                    " You are a helpful assistant<|user|>\n"
                    " Hello<|assistant|>\n"
                    " Hi there<|user|>\n"
                    " Who are you<|assistant|>\n"
                    "    I am an assistant   <|user|>\n"
                    " Another question<|assistant|>",
    },
    {
        .model = "ChatGLM4",
        .family = "chatglm4",
        .jinja = "[gMASK]<sop>{% for item in messages %}{% if item['tools'] is defined "
                 "%}<|system|>\n"
                 "你是一个名为 ChatGLM 的人工智能助手。你是基于智谱AI训练的语言模型 GLM-4 模型开发的，你的任务是针对用户的问题和要求提供适当的答复和支持。\n"
                 "\n"
                 "# 可用工具{% set tools = item['tools'] %}{% for tool in tools %}{% if tool['type'] "
                 "== 'function' %}\n"
                 "\n"
                 "## {{ tool['function']['name'] }}\n"
                 "\n"
                 "{{ tool['function'] | tojson(indent=4) }}\n"
                 "......{% endif %}{% endfor %}{% endif %}{% if item['content'] %}<|{{ "
                 "item['role'] }}|>{{ item['metadata'] }}\n"
                 "{{ item['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt "
                 "%}<|assistant|>\n"
                 "{% endif %}",
        .expected = "[gMASK]<sop><|system|>\n"
                    "You are a helpful assistant<|user|>\n"
                    "Hello<|assistant|>\n"
                    "Hi there<|user|>\n"
                    "Who are you<|assistant|>\n"
                    "   I am an assistant   <|user|>\n"
                    "Another question<|assistant|>\n",
    },
    {
        .model = "GLMEdge",
        .family = "glmedge",
        .jinja = "{% for item in messages %}{% if item['role'] == 'system' %}<|system|>\n"
                 "{{ item['content'] }}{% elif item['role'] == 'user' %}<|user|>\n"
                 "{{ item['content'] }}{% elif item['role'] == 'assistant' %}<|assistant|>\n"
                 "{{ item['content'] }}{% endif %}{% endfor %}<|assistant|>",
        .expected = "<|system|>\n"
                    "You are a helpful assistant<|user|>\n"
                    "Hello<|assistant|>\n"
                    "Hi there<|user|>\n"
                    "Who are you<|assistant|>\n"
                    "   I am an assistant   <|user|>\n"
                    "Another question<|assistant|>",
    },
    {
        .model = "MiniCPM-3B-OpenHermes-2.5-v2-GGUF",
        .family = "minicpm",
        .jinja = "{% for message in messages %}{% if message['role'] == 'user' %}{{'<用户>' + "
                 "message['content'].strip() + '<AI>'}}{% else "
                 "%}{{message['content'].strip()}}{% endif %}{% endfor %}",
        .expected = "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>I am an "
                    "assistant<用户>Another question<AI>",
    },
    {
        .model = "DeepSeek-V2",
        .family = "deepseek2",
        .jinja = "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = "
                 "false %}{% endif %}{{ bos_token }}{% for message in messages %}{% if "
                 "message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\n"
                 "\n"
                 "' }}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + "
                 "message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ "
                 "message['content'] + '\n"
                 "\n"
                 "' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% "
                 "endif %}",
        .expected = "You are a helpful assistant\n"
                    "\n"
                    "User: Hello\n"
                    "\n"
                    "Assistant: Hi there<｜end▁of▁sentence｜>User: Who are you\n"
                    "\n"
                    "Assistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n"
                    "\n"
                    "Assistant:",
    },
    {
        .model = "ibm-granite/granite-3.0-8b-instruct",
        .family = "granite",
        .jinja = "{%- if tools %}\n"
                 "    {{- '<|start_of_role|>available_tools<|end_of_role|>\n"
                 "' }}\n"
                 "    {%- for tool in tools %}\n"
                 "    {{- tool | tojson(indent=4) }}\n"
                 "    {%- if not loop.last %}\n"
                 "        {{- '\n"
                 "\n"
                 "' }}\n"
                 "    {%- endif %}\n"
                 "    {%- endfor %}\n"
                 "    {{- '<|end_of_text|>\n"
                 "' }}\n"
                 "{%- endif %}\n"
                 "{%- for message in messages %}\n"
                 "    {%- if message['role'] == 'system' %}\n"
                 "    {{- '<|start_of_role|>system<|end_of_role|>' + message['content'] + "
                 "'<|end_of_text|>\n"
                 "' }}\n"
                 "    {%- elif message['role'] == 'user' %}\n"
                 "    {{- '<|start_of_role|>user<|end_of_role|>' + message['content'] + "
                 "'<|end_of_text|>\n"
                 "' }}\n"
                 "    {%- elif message['role'] == 'assistant' %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|>'  + message['content'] + "
                 "'<|end_of_text|>\n"
                 "' }}\n"
                 "    {%- elif message['role'] == 'assistant_tool_call' %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + "
                 "message['content'] + '<|end_of_text|>\n"
                 "' }}\n"
                 "    {%- elif message['role'] == 'tool_response' %}\n"
                 "    {{- '<|start_of_role|>tool_response<|end_of_role|>' + message['content'] + "
                 "'<|end_of_text|>\n"
                 "' }}\n"
                 "    {%- endif %}\n"
                 "    {%- if loop.last and add_generation_prompt %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}",
        .expected = "<|start_of_role|>system<|end_of_role|>You are a helpful "
                    "assistant<|end_of_text|>\n"
                    "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
                    "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
                    "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
                    "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   "
                    "<|end_of_text|>\n"
                    "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
                    "<|start_of_role|>assistant<|end_of_role|>",
    },
    {
        .model = "mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system "
                 "prompt)",
        .family = "mistral-v1",
        .jinja = "{%- if messages[0]['role'] == 'system' %}\n"
                 "    {%- set system_message = messages[0]['content'] %}\n"
                 "    {%- set loop_messages = messages[1:] %}\n"
                 "{%- else %}\n"
                 "    {%- set loop_messages = messages %}\n"
                 "{%- endif %}\n"
                 "\n"
                 "{{- bos_token }}\n"
                 "{%- for message in loop_messages %}\n"
                 "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
                 "        {{- raise_exception('After the optional system message, conversation "
                 "roles must alternate user/assistant/user/assistant/...') }}\n"
                 "    {%- endif %}\n"
                 "    {%- if message['role'] == 'user' %}\n"
                 "        {%- if loop.first and system_message is defined %}\n"
                 "            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + "
                 "' [/INST]' }}\n"
                 "        {%- else %}\n"
                 "            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n"
                 "        {%- endif %}\n"
                 "    {%- elif message['role'] == 'assistant' %}\n"
                 "        {{- ' ' + message['content'] + eos_token}}\n"
                 "    {%- else %}\n"
                 "        {{- raise_exception('Only user and assistant roles are supported, with "
                 "the exception of an initial optional system message!') }}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n",
        .expected = " [INST] You are a helpful assistant\n"
                    "\n"
                    "Hello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant  "
                    " </s> [INST] Another question [/INST]",
    },
    {
        .model = "Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system "
                 "prompt at start)",
        .family = "mistral-v3",
        .jinja = "{%- if messages[0][\"role\"] == \"system\" %}\n"
                 "    {%- set system_message = messages[0][\"content\"] %}\n"
                 "    {%- set loop_messages = messages[1:] %}\n"
                 "{%- else %}\n"
                 "    {%- set loop_messages = messages %}\n"
                 "{%- endif %}\n"
                 "{%- if not tools is defined %}\n"
                 "    {%- set tools = none %}\n"
                 "{%- endif %}\n"
                 "{%- set user_messages = loop_messages | selectattr(\"role\", \"equalto\", "
                 "\"user\") | list %}\n"
                 "\n"
                 "{#- This block checks for alternating user/assistant messages, skipping tool "
                 "calling messages #}\n"
                 "{%- set ns = namespace() %}\n"
                 "{%- set ns.index = 0 %}\n"
                 "{%- for message in loop_messages %}\n"
                 "    {%- if not (message.role == \"tool\" or message.role == \"tool_results\" "
                 "or (message.tool_calls is defined and message.tool_calls is not none)) %}\n"
                 "        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0) %}\n"
                 "            {{- raise_exception(\"After the optional system message, "
                 "conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
                 "        {%- endif %}\n"
                 "        {%- set ns.index = ns.index + 1 %}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n"
                 "\n"
                 "{{- bos_token }}\n"
                 "{%- for message in loop_messages %}\n"
                 "    {%- if message[\"role\"] == \"user\" %}\n"
                 "        {%- if tools is not none and (message == user_messages[-1]) %}\n"
                 "            {{- \"[AVAILABLE_TOOLS] [\" }}\n"
                 "            {%- for tool in tools %}\n"
                 "                {%- set tool = tool.function %}\n"
                 "                {{- '{\"type\": \"function\", \"function\": {' }}\n"
                 "                {%- for key, val in tool.items() if key != \"return\" %}\n"
                 "                    {%- if val is string %}\n"
                 "                        {{- '\"' + key + '\": \"' + val + '\"' }}\n"
                 "                    {%- else %}\n"
                 "                        {{- '\"' + key + '\": ' + val|tojson }}\n"
                 "                    {%- endif %}\n"
                 "                    {%- if not loop.last %}\n"
                 "                        {{- \", \" }}\n"
                 "                    {%- endif %}\n"
                 "                {%- endfor %}\n"
                 "                {{- \"}}\" }}\n"
                 "                {%- if not loop.last %}\n"
                 "                    {{- \", \" }}\n"
                 "                {%- else %}\n"
                 "                    {{- \"]\" }}\n"
                 "                {%- endif %}\n"
                 "            {%- endfor %}\n"
                 "            {{- \"[/AVAILABLE_TOOLS]\" }}\n"
                 "            {%- endif %}\n"
                 "        {%- if loop.last and system_message is defined %}\n"
                 "            {{- \"[INST] \" + system_message + \"\\n\\n\" + "
                 "message[\"content\"] + \"[/INST]\" }}\n"
                 "        {%- else %}\n"
                 "            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n"
                 "        {%- endif %}\n"
                 "    {%- elif message.tool_calls is defined and message.tool_calls is not none "
                 "%}\n"
                 "        {{- \"[TOOL_CALLS] [\" }}\n"
                 "        {%- for tool_call in message.tool_calls %}\n"
                 "            {%- set out = tool_call.function|tojson %}\n"
                 "            {{- out[:-1] }}\n"
                 "            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n"
                 "                {{- raise_exception(\"Tool call IDs should be alphanumeric "
                 "strings with length 9!\") }}\n"
                 "            {%- endif %}\n"
                 "            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n"
                 "            {%- if not loop.last %}\n"
                 "                {{- \", \" }}\n"
                 "            {%- else %}\n"
                 "                {{- \"]\" + eos_token }}\n"
                 "            {%- endif %}\n"
                 "        {%- endfor %}\n"
                 "    {%- elif message[\"role\"] == \"assistant\" %}\n"
                 "        {{- \" \" + message[\"content\"]|trim + eos_token}}\n"
                 "    {%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == "
                 "\"tool\" %}\n"
                 "        {%- if message.content is defined and message.content.content is "
                 "defined %}\n"
                 "            {%- set content = message.content.content %}\n"
                 "        {%- else %}\n"
                 "            {%- set content = message.content %}\n"
                 "        {%- endif %}\n"
                 "        {{- '[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}\n"
                 "        {%- if not message.tool_call_id is defined or "
                 "message.tool_call_id|length != 9 %}\n"
                 "            {{- raise_exception(\"Tool call IDs should be alphanumeric strings "
                 "with length 9!\") }}\n"
                 "        {%- endif %}\n"
                 "        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n"
                 "    {%- else %}\n"
                 "        {{- raise_exception(\"Only user and assistant roles are supported, "
                 "with the exception of an initial optional system message!\") }}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n",
        .expected = "[INST] You are a helpful assistant\n"
                    "\n"
                    "Hello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
                    "assistant</s>[INST] Another question[/INST]",
    },
    {
        .model = "Mistral-Nemo-Instruct-2407 (mistralai 'v3-tekken' template; modified to have "
                 "system prompt at start)",
        .family = "mistral-v3-tekken",
        .jinja = "{%- if messages[0][\"role\"] == \"system\" %}\n"
                 "    {%- set system_message = messages[0][\"content\"] %}\n"
                 "    {%- set loop_messages = messages[1:] %}\n"
                 "{%- else %}\n"
                 "    {%- set loop_messages = messages %}\n"
                 "{%- endif %}\n"
                 "{%- if not tools is defined %}\n"
                 "    {%- set tools = none %}\n"
                 "{%- endif %}\n"
                 "{%- set user_messages = loop_messages | selectattr(\"role\", \"equalto\", "
                 "\"user\") | list %}\n"
                 "\n"
                 "{#- This block checks for alternating user/assistant messages, skipping tool "
                 "calling messages #}\n"
                 "{%- set ns = namespace() %}\n"
                 "{%- set ns.index = 0 %}\n"
                 "{%- for message in loop_messages %}\n"
                 "    {%- if not (message.role == \"tool\" or message.role == \"tool_results\" "
                 "or (message.tool_calls is defined and message.tool_calls is not none)) %}\n"
                 "        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0) %}\n"
                 "            {{- raise_exception(\"After the optional system message, "
                 "conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
                 "        {%- endif %}\n"
                 "        {%- set ns.index = ns.index + 1 %}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n"
                 "\n"
                 "{{- bos_token }}\n"
                 "{%- for message in loop_messages %}\n"
                 "    {%- if message[\"role\"] == \"user\" %}\n"
                 "        {%- if tools is not none and (message == user_messages[-1]) %}\n"
                 "            {{- \"[AVAILABLE_TOOLS][\" }}\n"
                 "            {%- for tool in tools %}\n"
                 "                {%- set tool = tool.function %}\n"
                 "                {{- '{\"type\": \"function\", \"function\": {' }}\n"
                 "                {%- for key, val in tool.items() if key != \"return\" %}\n"
                 "                    {%- if val is string %}\n"
                 "                        {{- '\"' + key + '\": \"' + val + '\"' }}\n"
                 "                    {%- else %}\n"
                 "                        {{- '\"' + key + '\": ' + val|tojson }}\n"
                 "                    {%- endif %}\n"
                 "                    {%- if not loop.last %}\n"
                 "                        {{- \", \" }}\n"
                 "                    {%- endif %}\n"
                 "                {%- endfor %}\n"
                 "                {{- \"}}\" }}\n"
                 "                {%- if not loop.last %}\n"
                 "                    {{- \", \" }}\n"
                 "                {%- else %}\n"
                 "                    {{- \"]\" }}\n"
                 "                {%- endif %}\n"
                 "            {%- endfor %}\n"
                 "            {{- \"[/AVAILABLE_TOOLS]\" }}\n"
                 "            {%- endif %}\n"
                 "        {%- if loop.last and system_message is defined %}\n"
                 "            {{- \"[INST]\" + system_message + \"\\n\\n\" + "
                 "message[\"content\"] + \"[/INST]\" }}\n"
                 "        {%- else %}\n"
                 "            {{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}\n"
                 "        {%- endif %}\n"
                 "    {%- elif (message.tool_calls is defined and message.tool_calls is not "
                 "none) %}\n"
                 "        {{- \"[TOOL_CALLS][\" }}\n"
                 "        {%- for tool_call in message.tool_calls %}\n"
                 "            {%- set out = tool_call.function|tojson %}\n"
                 "            {{- out[:-1] }}\n"
                 "            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n"
                 "                {{- raise_exception(\"Tool call IDs should be alphanumeric "
                 "strings with length 9!\") }}\n"
                 "            {%- endif %}\n"
                 "            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n"
                 "            {%- if not loop.last %}\n"
                 "                {{- \", \" }}\n"
                 "            {%- else %}\n"
                 "                {{- \"]\" + eos_token }}\n"
                 "            {%- endif %}\n"
                 "        {%- endfor %}\n"
                 "    {%- elif message[\"role\"] == \"assistant\" %}\n"
                 "        {{- message[\"content\"] + eos_token}}\n"
                 "    {%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == "
                 "\"tool\" %}\n"
                 "        {%- if message.content is defined and message.content.content is "
                 "defined %}\n"
                 "            {%- set content = message.content.content %}\n"
                 "        {%- else %}\n"
                 "            {%- set content = message.content %}\n"
                 "        {%- endif %}\n"
                 "        {{- '[TOOL_RESULTS]{\"content\": ' + content|string + \", \" }}\n"
                 "        {%- if not message.tool_call_id is defined or "
                 "message.tool_call_id|length != 9 %}\n"
                 "            {{- raise_exception(\"Tool call IDs should be alphanumeric strings "
                 "with length 9!\") }}\n"
                 "        {%- endif %}\n"
                 "        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n"
                 "    {%- else %}\n"
                 "        {{- raise_exception(\"Only user and assistant roles are supported, "
                 "with the exception of an initial optional system message!\") }}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n",
        .expected = "[INST]You are a helpful assistant\n"
                    "\n"
                    "Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   "
                    "</s>[INST]Another question[/INST]",
    },
    {
        .model = "mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)",
        .family = "mistral-v7",
        .jinja = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' "
                 "%}{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] == "
                 "'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' "
                 "}}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + "
                 "eos_token }}{% else %}{{ raise_exception('Only user, system and assistant "
                 "roles are supported!') }}{% endif %}{% endfor %}",
        .expected = "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] "
                    "Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   "
                    "</s>[INST] Another question[/INST]",
    },
    {
        .model = "ai-sage/GigaChat-20B-A3B-instruct",
        .family = "gigachat",
        .refused = 1,
        .jinja = "{% if messages[0]['role'] == 'system' -%}\n"
                 "    {%- set loop_messages = messages[1:] -%}\n"
                 "    {%- set system_message = bos_token + messages[0]['content'] + "
                 "additional_special_tokens[1] -%}\n"
                 "{%- else -%}\n"
                 "    {%- set loop_messages = messages -%}\n"
                 "    {%- set system_message = bos_token + '' -%}\n"
                 "{%- endif -%}\n"
                 "{%- for message in loop_messages %}\n"
                 "    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
                 "        {{ raise_exception('Conversation roles must alternate "
                 "user/assistant/user/assistant/...') }}\n"
                 "    {% endif %}\n"
                 "    \n"
                 "    {%- if loop.index0 == 0 -%}\n"
                 "        {{ system_message -}}\n"
                 "    {%- endif -%}\n"
                 "    {%- if message['role'] == 'user' -%}\n"
                 "        {{ message['role'] + additional_special_tokens[0] + message['content'] "
                 "+ additional_special_tokens[1] -}}\n"
                 "        {{ 'available functions' + additional_special_tokens[0] + "
                 "additional_special_tokens[2] + additional_special_tokens[3]  + "
                 "additional_special_tokens[1] -}}\n"
                 "    {%- endif -%}\n"
                 "    {%- if message['role'] == 'assistant' -%}\n"
                 "        {{ message['role'] + additional_special_tokens[0] + message['content'] "
                 "+ additional_special_tokens[1] -}}\n"
                 "    {%- endif -%}\n"
                 "    {%- if loop.last and add_generation_prompt -%}\n"
                 "        {{ 'assistant' + additional_special_tokens[0] -}}\n"
                 "    {%- endif -%}\n"
                 "{%- endfor %}",
    },
    {
        .model = "Infinigence/Megrez-3B-Instruct",
        .family = "megrez",
        .jinja = "{% for message in messages %}{% if loop.first and messages[0]['role'] != "
                 "'system' %}{{ '<|role_start|>system<|role_end|>你是Megrez-3B-Instruct，将针对用户的问题给出详"
                 "细的、积极的回答。<|turn_end|>' }}{% endif %}{{ '<|role_start|>' + message['role'] + "
                 "'<|role_end|>' + message['content'] + '<|turn_end|>' }}{% endfor %}{% if "
                 "add_generation_prompt %}{{ '<|role_start|>assistant<|role_end|>' }}{% endif %}",
        .expected = "<|role_start|>system<|role_end|>You are a helpful "
                    "assistant<|turn_end|><|role_start|>user<|role_end|>Hello<|turn_end|><|role_s"
                    "tart|>assistant<|role_end|>Hi there<|turn_end|><|role_start|>user<|role_end|"
                    ">Who are you<|turn_end|><|role_start|>assistant<|role_end|>   I am an "
                    "assistant   <|turn_end|><|role_start|>user<|role_end|>Another "
                    "question<|turn_end|><|role_start|>assistant<|role_end|>",
    },
    {
        .model = "phi-4",
        .family = "phi4",
        .jinja = "{% for message in messages %}{% if (message['role'] == 'system') "
                 "%}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% "
                 "elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + "
                 "message['content'] + '<|im_end|><|im_start|>assistant<|im_sep|>'}}{% elif "
                 "(message['role'] == 'assistant') %}{{message['content'] + '<|im_end|>'}}{% "
                 "endif %}{% endfor %}",
        .expected = "<|im_start|>system<|im_sep|>You are a helpful "
                    "assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assi"
                    "stant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are "
                    "you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   "
                    "<|im_end|><|im_start|>user<|im_sep|>Another "
                    "question<|im_end|><|im_start|>assistant<|im_sep|>",
    },
    {
        .model = "yandex/YandexGPT-5-Lite-8B-instruct",
        .family = "yandex",
        .refused = 1,
        .jinja = "<s>{%- set names = {'assistant': ' Ассистент:', 'user': ' Пользователь:'} %}\n"
                 "{%- set tools_prefix = 'Тебе доступны следующие функции:' %}\n"
                 "{%- macro __render_tool(tool) %}\n"
                 "    {%- set name = tool.function.name %}\n"
                 "    {%- set description = tool.function.description|default('') %}\n"
                 "    {%- set parameters = tool.function.parameters|tojson %}\n"
                 "    {{- '\\n' }}function {{ '{' }}'name':'{{ name }}',\n"
                 "    {%- if tool.function.description %}'description':'{{ description }}',{% "
                 "endif %}\n"
                 "'parameters':{{ parameters }}\n"
                 "    {{- '}' }}\n"
                 "{%- endmacro %}\n"
                 "{%- macro __render_tools(tools) %}\n"
                 "    {{- tools_prefix }}\n"
                 "    {%- for tool in tools %}\n"
                 "        {{- __render_tool(tool) }}\n"
                 "    {%- endfor %}\n"
                 "    {{- '\\n\\n' }}\n"
                 "{%- endmacro %}\n"
                 "{%- macro __render_tool_message(message) %}\n"
                 "    {{- '\\n\\nРезультат вызова' }} {{ message.name }}: {{ message.content }} "
                 "{{ '\\n\\n' }}\n"
                 "{%- endmacro %}\n"
                 "{%- if tools -%}\n"
                 "    {{- __render_tools(tools) }}\n"
                 "{%- endif -%}\n"
                 "{%- macro __render_user_message(message) %}\n"
                 "{{ names.user }} {{ message.content + '\\n\\n' }}\n"
                 "{%- endmacro %}\n"
                 "{%- macro __render_assistant_message(message) %}\n"
                 "    {{- names.assistant }}\n"
                 "    {%- set call = message['function_call'] %}\n"
                 "    {%- if call %}\n"
                 "        {{- '\\n[TOOL_CALL_START]' }}{{ call.name }}{{ '\\n' }}{{ "
                 "call.arguments|tojson }}\n"
                 "    {%- else %}\n"
                 "        {{- ' ' + message.content + '\\n\\n' }}\n"
                 "    {%- endif %}\n"
                 "{%- endmacro %}\n"
                 "{%- if not add_generation_prompt is defined %}\n"
                 "{%- set add_generation_prompt = false %}\n"
                 "{%- endif %}\n"
                 "{%- for message in messages %}\n"
                 "    {%- if message['role'] == 'user' %}\n"
                 "        {{- __render_user_message(message) }}\n"
                 "    {%- endif %}\n"
                 "    {%- if message.role == 'assistant' and not loop.last %}\n"
                 "        {{- __render_assistant_message(message) }}\n"
                 "    {%- endif %}\n"
                 "    {%- if message.role == 'tool' %}\n"
                 "        {{- __render_tool_message(message) }}\n"
                 "    {%- endif %}\n"
                 "    {%- if loop.last %}\n"
                 "        {{- ' Ассистент:[SEP]' }}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n",
    },
    {
        .model = "inclusionAI/Ling-lite",
        .family = "bailing",
        .jinja = "{% for message in messages %}{% set role = message['role'] | lower %}{% if "
                 "role == 'user' %}{% set role = 'HUMAN' %}{% endif %}{% set role = role | upper "
                 "%}{{ '<role>' + role + '</role>' + message['content'] }}{% endfor %}{% if "
                 "add_generation_prompt %}{{ '<role>ASSISTANT</role>' }}{% endif %}",
        .expected = "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>A"
                    "SSISTANT</role>Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>  "
                    " I am an assistant   <role>HUMAN</role>Another "
                    "question<role>ASSISTANT</role>",
    },
    {
        .model = "ByteDance-Seed/Seed-OSS-36B-Instruct",
        .family = "seed_oss",
        .jinja = "{# <seed:bos> #}{%- for message in messages %}{%- if message.role in "
                 "[\"user\", \"system\"] %}{{ bos_token + message.role + \"\\n\" + "
                 "message.content + eos_token }}{%- elif message.role == \"assistant\" %}{{ "
                 "bos_token + message.role }}{%- if message.content is defined and "
                 "message.content is string and message.content|trim|length > 0 %}{{ \"\\n\" + "
                 "message.content|trim + eos_token }}{%- endif %}{%- else %}{{ bos_token + "
                 "message.role + \"\\n\" + message.content + eos_token }}{%- endif %}{%- endfor "
                 "%}{%- if add_generation_prompt %}{{ bos_token + \"assistant\\n\" }}{%- endif "
                 "%}",
        .expected = "<seed:bos>system\n"
                    "You are a helpful assistant<seed:eos><seed:bos>user\n"
                    "Hello<seed:eos><seed:bos>assistant\n"
                    "Hi there<seed:eos><seed:bos>user\n"
                    "Who are you<seed:eos><seed:bos>assistant\n"
                    "I am an assistant<seed:eos><seed:bos>user\n"
                    "Another question<seed:eos><seed:bos>assistant\n",
    },
    {
        .model = "ibm-granite/granite-3.x (tool call)",
        .family = "granite",
        .jinja = "{%- for message in messages %}\n"
                 "    {%- if message['role'] == 'assistant_tool_call' %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + "
                 "message['content'] + '<|end_of_text|>\\n' }}\n"
                 "    {%- else %}\n"
                 "    {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
                 "message['content'] + '<|end_of_text|>\\n' }}\n"
                 "    {%- endif %}\n"
                 "    {%- if loop.last and add_generation_prompt %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}",
        .expected = "<|start_of_role|>system<|end_of_role|>You are a helpful "
                    "assistant<|end_of_text|>\n"
                    "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
                    "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
                    "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
                    "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   "
                    "<|end_of_text|>\n"
                    "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
                    "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
                    "<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[{\"name\": "
                    "\"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]<|end_of_text|>\n"
                    "<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": "
                    "72}<|end_of_text|>\n"
                    "<|start_of_role|>assistant<|end_of_role|>",
        .extra = granite3_tool_call,
        .n_extra = sizeof granite3_tool_call / sizeof granite3_tool_call[0],
    },
    {
        .model = "ibm-granite/granite-4.0 (tool call)",
        .family = "granite-4.0",
        .jinja = "{%- for message in messages %}\n"
                 "    {%- if message['role'] == 'assistant_tool_call' %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + "
                 "message['content'] + '<|end_of_text|>\\n' }}\n"
                 "    {%- else %}\n"
                 "    {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
                 "message['content'] + '<|end_of_text|>\\n' }}\n"
                 "    {%- endif %}\n"
                 "    {%- if loop.last and add_generation_prompt %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n"
                 "{# <tool_call> <tools> g4_default_system_message #}",
        .expected = expected_granite_4_0,
        .extra = granite4_tool_call,
        .n_extra = sizeof granite4_tool_call / sizeof granite4_tool_call[0],
    },
    {
        .model = "ibm-granite/granite-4.1 (tool call)",
        .family = "granite-4.1",
        .jinja = "{%- for message in messages %}\n"
                 "    {%- if message['role'] == 'assistant_tool_call' %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + "
                 "message['content'] + '<|end_of_text|>\\n' }}\n"
                 "    {%- else %}\n"
                 "    {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
                 "message['content'] + '<|end_of_text|>\\n' }}\n"
                 "    {%- endif %}\n"
                 "    {%- if loop.last and add_generation_prompt %}\n"
                 "    {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n"
                 "    {%- endif %}\n"
                 "{%- endfor %}\n"
                 "{# <tool_call> <tools> #}",
        .expected = expected_granite_4_0,
        .extra = granite4_tool_call,
        .n_extra = sizeof granite4_tool_call / sizeof granite4_tool_call[0],
    },
    {
        .model = "microsoft/Phi-3.5-mini-instruct",
        .family = "phi3",
        .jinja = "{% for message in messages %}{% if message['role'] == 'system' and "
                 "message['content'] %}{{'<|system|>\n"
                 "' + message['content'] + '<|end|>\n"
                 "'}}{% elif message['role'] == 'user' %}{{'<|user|>\n"
                 "' + message['content'] + '<|end|>\n"
                 "'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n"
                 "' + message['content'] + '<|end|>\n"
                 "'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n"
                 "' }}{% else %}{{ eos_token }}{% endif %}",
        .expected = expected_phi3,
    },
    {
        .model = "google/gemma-2-2b-it",
        .family = "gemma",
        .jinja = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ "
                 "raise_exception('System role not supported') }}{% endif %}{% for message in "
                 "messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
                 "raise_exception('Conversation roles must alternate "
                 "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == "
                 "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] "
                 "%}{% endif %}{{ '<start_of_turn>' + role + '\n"
                 "' + message['content'] | trim + '<end_of_turn>\n"
                 "' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n"
                 "'}}{% endif %}",
        .expected = expected_gemma,
    },
    {
        .model = "HuggingFaceTB/SmolLM2-135M-Instruct",
        .family = "chatml",
        .jinja = "{% for message in messages %}{% if loop.first and messages[0]['role'] != "
                 "'system' %}{{ '<|im_start|>system\n"
                 "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                 "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
                 "' + message['content'] + '<|im_end|>' + '\n"
                 "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
                 "' }}{% endif %}",
        .expected = expected_chatml,
    },
    {
        .model = NULL,
        .family = "llama2-sys",
        .expected = "[INST] <<SYS>>\n"
                    "You are a helpful assistant\n"
                    "<</SYS>>\n"
                    "\n"
                    "Hello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   "
                    "</s>[INST] Another question [/INST]",
    },
    {
        .model = NULL,
        .family = "mistral-v7-tekken",
        .expected = "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]"
                    "Hi there</s>[INST]Who are you[/INST]   I am an assistant   "
                    "</s>[INST]Another question[/INST]",
    },
    {
        .model = NULL,
        .family = "llama4",
        .expected = "<|header_start|>system<|header_end|>\n"
                    "\n"
                    "You are a helpful assistant<|eot|><|header_start|>user<|header_end|>\n"
                    "\n"
                    "Hello<|eot|><|header_start|>assistant<|header_end|>\n"
                    "\n"
                    "Hi there<|eot|><|header_start|>user<|header_end|>\n"
                    "\n"
                    "Who are you<|eot|><|header_start|>assistant<|header_end|>\n"
                    "\n"
                    "I am an assistant<|eot|><|header_start|>user<|header_end|>\n"
                    "\n"
                    "Another question<|eot|><|header_start|>assistant<|header_end|>\n"
                    "\n",
    },
    {
        .model = NULL,
        .family = "falcon3",
        .expected = "<|system|>\n"
                    "You are a helpful assistant\n"
                    "<|user|>\n"
                    "Hello\n"
                    "<|assistant|>\n"
                    "Hi there\n"
                    "<|user|>\n"
                    "Who are you\n"
                    "<|assistant|>\n"
                    "   I am an assistant   \n"
                    "<|user|>\n"
                    "Another question\n"
                    "<|assistant|>\n",
    },
    {
        .model = NULL,
        .family = "zephyr",
        .expected = "<|system|>\n"
                    "You are a helpful assistant<|endoftext|>\n"
                    "<|user|>\n"
                    "Hello<|endoftext|>\n"
                    "<|assistant|>\n"
                    "Hi there<|endoftext|>\n"
                    "<|user|>\n"
                    "Who are you<|endoftext|>\n"
                    "<|assistant|>\n"
                    "   I am an assistant   <|endoftext|>\n"
                    "<|user|>\n"
                    "Another question<|endoftext|>\n"
                    "<|assistant|>\n",
    },
    {
        .model = NULL,
        .family = "deepseek3",
        .expected = "You are a helpful assistant\n"
                    "\n"
                    "<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜><｜User｜>Who are "
                    "you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜><｜User｜>Another "
                    "question<｜Assistant｜>",
    },
    {
        .model = NULL,
        .family = "deepseek-ocr",
        .expected = "You are a helpful assistantHelloHi thereWho are you   I am an assistant   "
                    "Another question",
    },
    {
        .model = NULL,
        .family = "exaone3",
        .expected = expected_exaone3,
    },
    {
        .model = NULL,
        .family = "exaone4",
        .expected = expected_exaone3,
    },
    {
        .model = NULL,
        .family = "exaone-moe",
        .expected = "<|system|>\n"
                    "You are a helpful assistant<|endofturn|>\n"
                    "<|user|>\n"
                    "Hello<|endofturn|>\n"
                    "<|assistant|>\n"
                    "Hi there<|endofturn|>\n"
                    "<|user|>\n"
                    "Who are you<|endofturn|>\n"
                    "<|assistant|>\n"
                    "I am an assistant<|endofturn|>\n"
                    "<|user|>\n"
                    "Another question<|endofturn|>\n"
                    "<|assistant|>\n",
    },
    {
        .model = NULL,
        .family = "bailing-think",
        .expected = "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>A"
                    "SSISTANT</role>Hi there<role>HUMAN</role>Who are you<role>ASSISTANT</role>  "
                    " I am an assistant   <role>HUMAN</role>Another "
                    "question<role>ASSISTANT</role><think>",
    },
    {
        .model = NULL,
        .family = "smolvlm",
        .expected = "<|im_start|>You are a helpful assistant\n"
                    "\n"
                    "User: Hello<end_of_utterance>\n"
                    "Assistant: Hi there<end_of_utterance>\n"
                    "User: Who are you<end_of_utterance>\n"
                    "Assistant:    I am an assistant   <end_of_utterance>\n"
                    "User: Another question<end_of_utterance>\n"
                    "Assistant:",
    },
    {
        .model = NULL,
        .family = "hunyuan-moe",
        .expected = "<|startoftext|>You are a helpful assistant<|extra_4|><|startoftext|>Hello<|e"
                    "xtra_0|>Hi there<|eos|><|startoftext|>Who are you<|extra_0|>   I am an "
                    "assistant   <|eos|><|startoftext|>Another question<|extra_0|>",
    },
    {
        .model = NULL,
        .family = "gpt-oss",
        .expected = "<|start|>system<|message|>You are a helpful "
                    "assistant<|end|><|start|>user<|message|>Hello<|end|><|start|>assistant<|mess"
                    "age|>Hi there<|return|><|start|>user<|message|>Who are "
                    "you<|end|><|start|>assistant<|message|>   I am an assistant   "
                    "<|return|><|start|>user<|message|>Another question<|end|><|start|>assistant",
    },
    {
        .model = NULL,
        .family = "kimi-k2",
        .expected = "<|im_system|>system<|im_middle|>You are a helpful "
                    "assistant<|im_end|><|im_user|>user<|im_middle|>Hello<|im_end|><|im_assistant"
                    "|>assistant<|im_middle|>Hi there<|im_end|><|im_user|>user<|im_middle|>Who "
                    "are you<|im_end|><|im_assistant|>assistant<|im_middle|>   I am an assistant "
                    "  <|im_end|><|im_user|>user<|im_middle|>Another "
                    "question<|im_end|><|im_assistant|>assistant<|im_middle|>",
    },
    {
        .model = NULL,
        .family = "grok-2",
        .expected = "System: You are a helpful assistant<|separator|>\n"
                    "\n"
                    "Human: Hello<|separator|>\n"
                    "\n"
                    "Assistant: Hi there<|separator|>\n"
                    "\n"
                    "Human: Who are you<|separator|>\n"
                    "\n"
                    "Assistant:    I am an assistant   <|separator|>\n"
                    "\n"
                    "Human: Another question<|separator|>\n"
                    "\n"
                    "Assistant:",
    },
    {
        .model = NULL,
        .family = "solar-open",
        .expected = "<|begin|>system<|content|>You are a helpful "
                    "assistant<|end|><|begin|>user<|content|>Hello<|end|><|begin|>assistant<|cont"
                    "ent|>Hi there<|end|><|begin|>user<|content|>Who are "
                    "you<|end|><|begin|>assistant<|content|>   I am an assistant   "
                    "<|end|><|begin|>user<|content|>Another question<|end|><|begin|>assistant",
    },
};

const size_t hx_chat_n_vectors = sizeof hx_chat_vectors / sizeof hx_chat_vectors[0];
