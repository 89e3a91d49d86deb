/* JSON Schema to GBNF (hx_json_schema_to_grammar in hetero.h), in the shape
 * of llama.cpp's json-schema-to-grammar: one rule per schema node, shared
 * primitive rules, properties in the order the schema gives them (the
 * required ones, then each optional one that may follow).  A keyword the
 * grammar cannot enforce is refused by name, never dropped. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "text/grammar.h"

/* Room for a rule name: derived names are clipped well inside it. */
#define NAME_CAP 128

/* llama.cpp's primitives, so that the same schema constrains the same way. */
static const struct {
    const char *name, *body, *deps;
} primitives[] = {
    {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", ""},
    {"boolean", "(\"true\" | \"false\") space", "space"},
    {"null", "\"null\" space", "space"},
    {"decimal-part", "[0-9]{1,16}", ""},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", ""},
    {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
     "integral-part decimal-part space"},
    {"integer", "(\"-\"? integral-part) space", "integral-part space"},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", ""},
    {"string", "\"\\\"\" char* \"\\\"\" space", "char space"},
    {"value", "object | array | string | number | boolean | null", "object array string number boolean null"},
    {"object",
     "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
     "string space value"},
    {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", "value space"},
    {"uuid",
     "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
     "[0-9a-fA-F]{12} \"\\\"\" space",
     "space"},
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", ""},
    {"time",
     "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" "
     ") ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
     ""},
    {"date-time", "date \"T\" time", "date time"},
    {"date-string", "\"\\\"\" date \"\\\"\" space", "date space"},
    {"time-string", "\"\\\"\" time \"\\\"\" space", "time space"},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\" space", "date-time space"},
};

/* Keywords that describe and constrain nothing the grammar could check. */
static const char *const annotations[] = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "format",
                                          "$defs", "definitions", "nullable", "strict", NULL};
/* Keywords handled below. */
static const char *const handled[] = {"type", "properties", "required", "additionalProperties", "items",
                                      "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "enum",
                                      "const", "anyOf", "oneOf", "allOf", "$ref", NULL};

typedef struct {
    char **name, **body;
    size_t n, cap;
    json_t *root;
    char err[256];
    int depth;
} conv;

static int failf(conv *c, const char *fmt, ...)
{
    if (!c->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int find(const conv *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name))
            return (int)i;
    return -1;
}

/* Adds (or, for a placeholder, fills) a rule. */
static int put(conv *c, const char *name, const char *body)
{
    int i = find(c, name);
    if (i >= 0) {
        if (!c->body[i]) {
            if (!(c->body[i] = strdup(body)))
                return failf(c, "out of memory");
        }
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 32;
        char **n = realloc(c->name, cap * sizeof *n), **b = n ? realloc(c->body, cap * sizeof *b) : NULL;
        if (n)
            c->name = n;
        if (!b)
            return failf(c, "out of memory");
        c->body = b;
        c->cap = cap;
    }
    c->name[c->n] = strdup(name);
    c->body[c->n] = body ? strdup(body) : NULL;
    if (!c->name[c->n] || (body && !c->body[c->n]))
        return failf(c, "out of memory");
    c->n++;
    return 0;
}

static int primitive(conv *c, const char *name)
{
    for (size_t i = 0; i < sizeof primitives / sizeof *primitives; i++) {
        if (strcmp(primitives[i].name, name))
            continue;
        if (find(c, name) >= 0)
            return 0;
        if (put(c, name, primitives[i].body))
            return -1;
        char deps[128];
        snprintf(deps, sizeof deps, "%s", primitives[i].deps);
        for (char *save, *d = strtok_r(deps, " ", &save); d; d = strtok_r(NULL, " ", &save))
            if (primitive(c, d))
                return -1;
        return 0;
    }
    return failf(c, "internal: no primitive '%s'", name);
}

/* A growing string. */
typedef struct {
    char *s;
    size_t n, cap;
} buf;

static int addf(conv *c, buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t cap = (b->n + (size_t)k + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s)
            return failf(c, "out of memory");
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
    return 0;
}

/* A GBNF literal of bytes: quotes, backslashes and control characters
 * escaped. */
static int literal(conv *c, buf *b, const char *s)
{
    if (addf(c, b, "\""))
        return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int rc = *p == '"' || *p == '\\' ? addf(c, b, "\\%c", *p)
                 : *p < 0x20 || *p == 0x7F ? addf(c, b, "\\x%02X", *p)
                                            : addf(c, b, "%c", *p);
        if (rc)
            return -1;
    }
    return addf(c, b, "\"");
}

/* The literal rule text of a JSON value as the model must write it. */
static int json_literal(conv *c, buf *b, const json_t *v)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!text)
        return failf(c, "out of memory");
    int rc = literal(c, b, text);
    free(text);
    return rc ? -1 : addf(c, b, " space");
}

/* A rule name from free text: letters, digits and '-'. */
static void sanitize(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = (src[i] >= 'a' && src[i] <= 'z') || (src[i] >= 'A' && src[i] <= 'Z') || (src[i] >= '0' && src[i] <= '9')
                     ? src[i]
                     : '-';
    dst[i] = '\0';
    if (!i)
        snprintf(dst, cap, "x");
}

/* A fresh rule name derived from `base`. */
static void fresh(const conv *c, char *dst, size_t cap, const char *base)
{
    char clean[80];
    sanitize(clean, sizeof clean, base);
    snprintf(dst, cap, "%s", clean);
    for (int k = 1; find(c, dst) >= 0 || !strcmp(dst, "root"); k++)
        snprintf(dst, cap, "%.80s-%d", clean, k);
}

static int visit(conv *c, const json_t *schema, const char *name, char *out, size_t cap);

/* Rule `name` := body (the caller frees body); out gets the name. */
static int emit(conv *c, const char *name, const buf *body, char *out, size_t cap)
{
    int rc = body->s ? put(c, name, body->s) : failf(c, "internal: empty rule");
    if (out != name)
        snprintf(out, cap, "%s", name);
    return rc;
}

static int check_keywords(conv *c, const json_t *schema, const char *where)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)schema, key, v) {
        int ok = 0;
        for (int i = 0; annotations[i] && !ok; i++)
            ok = !strcmp(key, annotations[i]);
        for (int i = 0; handled[i] && !ok; i++)
            ok = !strcmp(key, handled[i]);
        if (!ok)
            return failf(c, "%s: the keyword '%s' is not supported (a grammar cannot enforce it)", where, key);
    }
    return 0;
}

static int size_kw(conv *c, const json_t *schema, const char *kw, long dflt, long *out, const char *where)
{
    const json_t *v = json_object_get(schema, kw);
    *out = dflt;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > HX_GRAMMAR_MAX_REPEAT)
        return failf(c, "%s: '%s' must be a whole number from 0 to %d", where, kw, HX_GRAMMAR_MAX_REPEAT);
    *out = (long)json_integer_value(v);
    return 0;
}

static int object_rule(conv *c, const json_t *schema, const char *name, char *out, size_t cap)
{
    const json_t *props = json_object_get(schema, "properties"), *req = json_object_get(schema, "required");
    const json_t *addl = json_object_get(schema, "additionalProperties");
    if (props && !json_is_object(props))
        return failf(c, "%s: 'properties' must be an object", name);
    if (req && !json_is_array(req))
        return failf(c, "%s: 'required' must be an array", name);
    size_t np = props ? json_object_size(props) : 0;
    const char **keys = calloc(np + 1, sizeof *keys);
    char (*kv)[NAME_CAP] = calloc(np + 1, sizeof *kv);
    int *is_req = calloc(np + 1, sizeof *is_req);
    buf b = {0};
    int rc = keys && kv && is_req ? 0 : failf(c, "out of memory");
    size_t k = 0;
    const char *key;
    json_t *ps;
    if (!rc && props)
        json_object_foreach((json_t *)props, key, ps) keys[k++] = key;
    for (size_t i = 0; !rc && req && i < json_array_size(req); i++) {
        const json_t *r = json_array_get(req, i);
        if (!json_is_string(r))
            rc = failf(c, "%s: 'required' holds a non-string", name);
        size_t j = 0;
        while (!rc && j < np && strcmp(keys[j], json_string_value(r)))
            j++;
        if (!rc && j == np)
            rc = failf(c, "%s: required property '%s' is not among its properties", name, json_string_value(r));
        if (!rc)
            is_req[j] = 1;
    }
    /* One key-value rule per property. */
    for (size_t i = 0; !rc && i < np; i++) {
        char sub[NAME_CAP], val[96];
        snprintf(sub, sizeof sub, "%.60s-%.60s", name, keys[i]);
        rc = visit(c, json_object_get(props, keys[i]), sub, val, sizeof val);
        buf kb = {0};
        if (!rc) {
            json_t *js = json_string(keys[i]);
            rc = js ? json_literal(c, &kb, js) : failf(c, "out of memory");
            json_decref(js);
        }
        if (!rc)
            rc = addf(c, &kb, " \":\" space %s", val);
        char kvname[NAME_CAP];
        snprintf(kvname, sizeof kvname, "%.120s-kv", sub);
        fresh(c, kv[i], sizeof kv[i], kvname);
        if (!rc)
            rc = emit(c, kv[i], &kb, kv[i], sizeof kv[i]);
        free(kb.s);
    }
    char addl_kv[NAME_CAP] = "";
    if (!rc && addl && !json_is_false(addl)) {
        char val[NAME_CAP], nm[160];
        snprintf(nm, sizeof nm, "%.100s-additional", name);
        if (json_is_true(addl))
            rc = primitive(c, "value") || (snprintf(val, sizeof val, "value"), 0);
        else
            rc = visit(c, addl, nm, val, sizeof val);
        buf kb = {0};
        if (!rc)
            rc = primitive(c, "string") || addf(c, &kb, "string \":\" space %s", val);
        snprintf(nm, sizeof nm, "%.100s-additional-kv", name);
        fresh(c, addl_kv, sizeof addl_kv, nm);
        if (!rc)
            rc = emit(c, addl_kv, &kb, addl_kv, sizeof addl_kv);
        free(kb.s);
    }
    /* "{" required (in order), then any of the optional ones in order,
     * then additional pairs; commas only between pairs. */
    int first = 1;
    if (!rc)
        rc = addf(c, &b, "\"{\" space");
    for (size_t i = 0; !rc && i < np; i++)
        if (is_req[i]) {
            rc = addf(c, &b, first ? " %s" : " \",\" space %s", kv[i]);
            first = 0;
        }
    if (!rc && first) {
        /* Nothing required: the first pair present takes no comma. */
        int any = 0;
        for (size_t i = 0; !rc && i < np; i++) {
            rc = addf(c, &b, any ? " | %s" : " ( %s", kv[i]);
            for (size_t j = i + 1; !rc && j < np; j++)
                rc = addf(c, &b, " ( \",\" space %s )?", kv[j]);
            if (!rc && addl_kv[0])
                rc = addf(c, &b, " ( \",\" space %s )*", addl_kv);
            any = 1;
        }
        if (!rc && addl_kv[0])
            rc = addf(c, &b, any ? " | %s ( \",\" space %s )*" : " ( %s ( \",\" space %s )*", addl_kv, addl_kv),
            any = 1;
        if (!rc && any)
            rc = addf(c, &b, " )?");
    } else {
        for (size_t i = 0; !rc && i < np; i++)
            if (!is_req[i])
                rc = addf(c, &b, " ( \",\" space %s )?", kv[i]);
        if (!rc && addl_kv[0])
            rc = addf(c, &b, " ( \",\" space %s )*", addl_kv);
    }
    if (!rc)
        rc = addf(c, &b, " \"}\" space") || primitive(c, "space");
    free(keys);
    free(kv);
    free(is_req);
    if (!rc)
        rc = emit(c, name, &b, out, cap);
    free(b.s);
    return rc;
}

static int array_rule(conv *c, const json_t *schema, const char *name, char *out, size_t cap)
{
    const json_t *items = json_object_get(schema, "items"), *prefix = json_object_get(schema, "prefixItems");
    if (!prefix && json_is_array(items)) { /* draft 4's tuple form, as llama.cpp reads it: prefixItems */
        prefix = items;
        items = NULL;
    }
    buf b = {0};
    int rc = primitive(c, "space") || addf(c, &b, "\"[\" space");
    if (!rc && prefix) {
        if (!json_is_array(prefix))
            rc = failf(c, "%s: 'prefixItems' must be an array", name);
        if (items && !json_is_false(items))
            rc = failf(c, "%s: 'items' beside 'prefixItems' is not supported", name);
        for (size_t i = 0; !rc && i < json_array_size(prefix); i++) {
            char sub[NAME_CAP], val[96];
            snprintf(sub, sizeof sub, "%.100s-%zu", name, i);
            rc = visit(c, json_array_get(prefix, i), sub, val, sizeof val) ||
                 addf(c, &b, i ? " \",\" space %s" : " %s", val);
        }
    } else if (!rc) {
        long lo, hi;
        char val[NAME_CAP], sub[160];
        snprintf(sub, sizeof sub, "%.100s-item", name);
        rc = size_kw(c, schema, "minItems", 0, &lo, name) || size_kw(c, schema, "maxItems", -1, &hi, name);
        if (!rc && hi >= 0 && hi < lo)
            rc = failf(c, "%s: maxItems %ld is below minItems %ld", name, hi, lo);
        if (!rc && items)
            rc = visit(c, items, sub, val, sizeof val);
        else if (!rc)
            rc = primitive(c, "value") || (snprintf(val, sizeof val, "value"), 0);
        if (!rc && hi != 0) {
            /* item ("," item){lo-1, hi-1}, optional when lo is 0 */
            long rlo = lo > 0 ? lo - 1 : 0;
            if (hi < 0)
                rc = addf(c, &b, " %s%s ( \",\" space %s ){%ld,}%s", lo ? "" : "( ", val, val, rlo, lo ? "" : " )?");
            else
                rc = addf(c, &b, " %s%s ( \",\" space %s ){%ld,%ld}%s", lo ? "" : "( ", val, val, rlo, hi - 1,
                          lo ? "" : " )?");
        }
    }
    if (!rc)
        rc = addf(c, &b, " \"]\" space");
    if (!rc)
        rc = emit(c, name, &b, out, cap);
    free(b.s);
    return rc;
}

static int string_rule(conv *c, const json_t *schema, const char *name, char *out, size_t cap)
{
    const json_t *fmt = json_object_get(schema, "format");
    const char *f = json_is_string(fmt) ? json_string_value(fmt) : "";
    long lo, hi;
    if (size_kw(c, schema, "minLength", 0, &lo, name) || size_kw(c, schema, "maxLength", -1, &hi, name))
        return -1;
    if (hi >= 0 && hi < lo)
        return failf(c, "%s: maxLength %ld is below minLength %ld", name, hi, lo);
    static const char *const formats[][2] = {
        {"date", "date-string"}, {"time", "time-string"}, {"date-time", "date-time-string"}, {"uuid", "uuid"}};
    for (size_t i = 0; i < 4; i++)
        if (!strcmp(f, formats[i][0])) {
            if (lo || hi >= 0)
                return failf(c, "%s: minLength/maxLength with format '%s' is not supported", name, f);
            snprintf(out, cap, "%s", formats[i][1]);
            return primitive(c, formats[i][1]);
        }
    if (!lo && hi < 0) {
        snprintf(out, cap, "string");
        return primitive(c, "string");
    }
    buf b = {0};
    int rc = primitive(c, "char") || primitive(c, "space") ||
             (hi < 0 ? addf(c, &b, "\"\\\"\" char{%ld,} \"\\\"\" space", lo)
                     : addf(c, &b, "\"\\\"\" char{%ld,%ld} \"\\\"\" space", lo, hi));
    if (!rc)
        rc = emit(c, name, &b, out, cap);
    free(b.s);
    return rc;
}

/* Alternatives: each sub-schema's rule. */
static int alternatives(conv *c, const json_t *list, const char *kw, const char *name, char *out, size_t cap)
{
    if (!json_is_array(list) || !json_array_size(list))
        return failf(c, "%s: '%s' must be a non-empty array", name, kw);
    buf b = {0};
    int rc = 0;
    for (size_t i = 0; !rc && i < json_array_size(list); i++) {
        char sub[NAME_CAP], val[96];
        snprintf(sub, sizeof sub, "%.100s-%zu", name, i);
        rc = visit(c, json_array_get(list, i), sub, val, sizeof val) || addf(c, &b, i ? " | %s" : "%s", val);
    }
    if (!rc)
        rc = emit(c, name, &b, out, cap);
    free(b.s);
    return rc;
}

static int ref_rule(conv *c, const char *ref, char *out, size_t cap)
{
    const char *def = NULL;
    const json_t *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) {
        defs = json_object_get(c->root, "$defs");
        def = ref + 8;
    } else if (!strncmp(ref, "#/definitions/", 14)) {
        defs = json_object_get(c->root, "definitions");
        def = ref + 14;
    } else if (!strcmp(ref, "#")) {
        snprintf(out, cap, "root");
        return 0;
    } else {
        return failf(c, "$ref '%s': only local references (#/$defs/..., #/definitions/...) are supported", ref);
    }
    const json_t *target = defs ? json_object_get(defs, def) : NULL;
    if (!target)
        return failf(c, "$ref '%s' names no definition", ref);
    char name[NAME_CAP], clean[80];
    sanitize(clean, sizeof clean, def);
    snprintf(name, sizeof name, "ref-%.80s", clean);
    snprintf(out, cap, "%s", name);
    if (find(c, name) >= 0)
        return 0; /* visited, or being visited: a recursive reference */
    if (put(c, name, NULL))
        return -1;
    char inner[NAME_CAP];
    buf b = {0};
    int rc = visit(c, target, name, inner, sizeof inner);
    if (!rc && strcmp(inner, name)) {
        rc = addf(c, &b, "%s", inner);
        if (!rc)
            rc = put(c, name, b.s);
    }
    free(b.s);
    return rc;
}

static int visit(conv *c, const json_t *schema, const char *base, char *out, size_t cap)
{
    if (++c->depth > 64)
        return failf(c, "%s: the schema is nested past 64 levels", base);
    int rc = -1;
    char name[NAME_CAP];
    fresh(c, name, sizeof name, base);
    if (!strcmp(base, "root") && find(c, "root") < 0)
        snprintf(name, sizeof name, "root");
    buf b = {0};
    if (json_is_true(schema)) {
        rc = primitive(c, "value");
        snprintf(out, cap, "value");
        goto done;
    }
    if (!json_is_object(schema)) {
        rc = failf(c, "%s: a schema must be an object or true", base);
        goto done;
    }
    if (check_keywords(c, schema, base))
        goto done;
    const json_t *t = json_object_get(schema, "type"), *v;
    if ((v = json_object_get(schema, "$ref"))) {
        rc = json_is_string(v) ? ref_rule(c, json_string_value(v), out, cap) : failf(c, "%s: '$ref' must be a string", base);
    } else if ((v = json_object_get(schema, "anyOf")) || (v = json_object_get(schema, "oneOf"))) {
        rc = alternatives(c, v, json_object_get(schema, "anyOf") ? "anyOf" : "oneOf", name, out, cap);
    } else if ((v = json_object_get(schema, "allOf"))) {
        if (json_is_array(v) && json_array_size(v) == 1)
            rc = visit(c, json_array_get(v, 0), name, out, cap);
        else
            rc = failf(c, "%s: 'allOf' with more than one schema is not supported", base);
    } else if ((v = json_object_get(schema, "const"))) {
        rc = primitive(c, "space") || json_literal(c, &b, v) || emit(c, name, &b, out, cap);
    } else if ((v = json_object_get(schema, "enum"))) {
        rc = json_is_array(v) && json_array_size(v) ? primitive(c, "space") : failf(c, "%s: 'enum' must be a non-empty array", base);
        for (size_t i = 0; !rc && i < json_array_size(v); i++)
            rc = (i && addf(c, &b, " | ")) || json_literal(c, &b, json_array_get(v, i));
        if (!rc)
            rc = emit(c, name, &b, out, cap);
    } else if (json_is_array(t)) {
        /* A list of types: one alternative per type, the rest of the
         * schema kept for each. */
        json_t *alts = json_array();
        for (size_t i = 0; alts && i < json_array_size(t); i++) {
            json_t *copy = json_copy((json_t *)schema);
            if (copy) {
                json_object_set(copy, "type", json_array_get(t, i));
                json_array_append_new(alts, copy);
            }
        }
        rc = alts ? alternatives(c, alts, "type", name, out, cap) : failf(c, "out of memory");
        json_decref(alts);
    } else if (t && !json_is_string(t)) {
        rc = failf(c, "%s: 'type' must be a string or an array of strings", base);
    } else {
        const char *ty = t ? json_string_value(t) : json_object_get(schema, "properties") ? "object"
                                              : json_object_get(schema, "items") || json_object_get(schema, "prefixItems")
                                                  ? "array"
                                                  : "";
        if (!strcmp(ty, "object"))
            rc = json_object_get(schema, "properties") || json_object_get(schema, "additionalProperties")
                     ? object_rule(c, schema, name, out, cap)
                     : (primitive(c, "object"), snprintf(out, cap, "object"), 0);
        else if (!strcmp(ty, "array"))
            rc = array_rule(c, schema, name, out, cap);
        else if (!strcmp(ty, "string"))
            rc = string_rule(c, schema, name, out, cap);
        else if (!strcmp(ty, "number") || !strcmp(ty, "integer") || !strcmp(ty, "boolean") || !strcmp(ty, "null"))
            rc = primitive(c, ty) || (snprintf(out, cap, "%s", ty), 0);
        else if (!*ty)
            rc = primitive(c, "value") || (snprintf(out, cap, "value"), 0);
        else
            rc = failf(c, "%s: unknown type '%s'", base, ty);
    }
done:
    free(b.s);
    c->depth--;
    return rc;
}

static hx_status convert(const char *schema_json, char **out)
{
    json_error_t jerr;
    json_t *root = json_loads(schema_json, JSON_DECODE_ANY, &jerr);
    if (!root)
        return hx_error(HX_ERR_INVALID_ARG, "JSON schema: not JSON (line %d, column %d: %s)", jerr.line,
                        jerr.column, jerr.text);
    conv c = {.root = root};
    char top[NAME_CAP];
    int rc = visit(&c, root, "root", top, sizeof top);
    if (!rc && strcmp(top, "root")) {
        /* The schema's rule is shared or primitive: root names it. */
        rc = put(&c, "root", top);
    }
    buf b = {0};
    for (size_t i = 0; !rc && i < c.n; i++)
        rc = c.body[i] ? addf(&c, &b, "%s ::= %s\n", c.name[i], c.body[i])
                       : failf(&c, "internal: rule '%s' has no body", c.name[i]);
    hx_status st = HX_OK;
    if (rc) {
        st = hx_error(HX_ERR_INVALID_ARG, "JSON schema: %s", c.err[0] ? c.err : "cannot convert");
        free(b.s);
    } else {
        /* The result must be a grammar the parser takes. */
        hx_grammar *g;
        st = hx_grammar_parse(b.s, b.n, &g);
        hx_grammar_free(g);
        if (st)
            free(b.s);
        else
            *out = b.s;
    }
    for (size_t i = 0; i < c.n; i++) {
        free(c.name[i]);
        free(c.body[i]);
    }
    free(c.name);
    free(c.body);
    json_decref(root);
    return st;
}

hx_status hx_json_schema_to_grammar(const char *schema_json, char *buf, size_t cap, size_t *len)
{
    hx_api_enter();
    if (!schema_json || !len || (!buf && cap))
        return hx_api_leave(hx_error(HX_ERR_INVALID_ARG, "hx_json_schema_to_grammar: NULL argument"));
    char *gbnf = NULL;
    hx_status st = convert(schema_json, &gbnf);
    if (st == HX_OK) {
        *len = strlen(gbnf);
        if (cap <= *len)
            st = hx_error(HX_ERR_RANGE, "hx_json_schema_to_grammar: the grammar takes %zu bytes and a NUL; the buffer has %zu",
                          *len, cap);
        else
            memcpy(buf, gbnf, *len + 1);
    }
    free(gbnf);
    return hx_api_leave(st);
}
