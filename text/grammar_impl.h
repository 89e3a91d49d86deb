/* The compiled grammar's layout, shared by text/grammar*.c only. */
#ifndef HX_TEXT_GRAMMAR_IMPL_H
#define HX_TEXT_GRAMMAR_IMPL_H

#include <stdint.h>

#include "text/grammar.h"

typedef enum {
    HX_GE_END = 0,        /* end of a rule                                   */
    HX_GE_ALT,            /* start of another alternative                    */
    HX_GE_RULE_REF,       /* value: rule id                                  */
    HX_GE_CHAR,           /* value: code point; starts a set                 */
    HX_GE_CHAR_NOT,       /* value: code point; starts a negated set         */
    HX_GE_CHAR_RNG_UPPER, /* value: upper bound of the range it follows      */
    HX_GE_CHAR_ALT,       /* value: another code point of the same set       */
    HX_GE_CHAR_ANY,       /* `.`: any code point                             */
} hx_gelem_type;

typedef struct {
    uint32_t type;
    uint32_t value;
} hx_gelem;

struct hx_grammar {
    hx_gelem *el;       /* every rule's elements, one after the other        */
    uint32_t n_el;
    uint32_t *rule;     /* rule r's first element is el[rule[r]]            */
    uint32_t n_rules;
    uint32_t root;
};

static inline int hx_gelem_is_end(const hx_gelem *e)
{
    return e->type == HX_GE_END || e->type == HX_GE_ALT;
}

static inline int hx_gelem_is_char(const hx_gelem *e)
{
    return e->type == HX_GE_CHAR || e->type == HX_GE_CHAR_NOT || e->type == HX_GE_CHAR_ANY;
}

#endif
