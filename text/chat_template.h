/* Chat templates, shared by text/chat_*.c only. */
#ifndef HX_TEXT_CHAT_TEMPLATE_H
#define HX_TEXT_CHAT_TEMPLATE_H

/* The family llama.cpp gives a template: `tmpl` itself when it is one of
 * llama.cpp's family names, else the family whose markers (substrings)
 * the Jinja source holds, by llm_chat_detect_template's rules and order;
 * NULL when none does.  The name is static; it may be a family that
 * chat_template.c does not format. */
const char *hx_chat_detect(const char *tmpl);

#endif
