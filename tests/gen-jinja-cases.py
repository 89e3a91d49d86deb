#!/usr/bin/env python3
"""Writes tests/jinja_cases.h: the Jinja engine's unit cases (tests/test_jinja.c),
each expected text rendered by Python's jinja2 in the environment of
tests/chat_corpus.py (apply_chat_template's).  Run it again after adding a case:

    python3 tests/gen-jinja-cases.py > tests/jinja_cases.h
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_corpus as cc  # noqa: E402
env = cc.environment()
V = {"messages": [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
     "d": {"b": 2, "a": 1, "C": 3}, "xs": [3, 1, 2, 1], "s": "  Hello World  ", "u": "héllo 世界", "n": None,
     "users": [{"name": "ann", "age": 30, "admin": True}, {"name": "bob", "age": 25, "admin": False}]}
cases = [
 ("ws_trim_lstrip", "{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content }}]\n  {% endif %}\n{% endfor %}\nend"),
 ("ws_minus", "a  {%- if true -%}  b  {%- endif -%}  c {{- ' d ' -}} e"),
 ("ws_plus", "x\n    {%+ if true %}y{% endif %}\n{# c #}\nz"),
 ("loop_vars", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}"),
 ("loop_prev_next", "{% for x in xs %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}"),
 ("for_else_filter", "{% for x in [] %}no{% else %}empty{% endfor %}|{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}"),
 ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor %}"),
 ("for_dict_keys", "{% for k in d %}{{ k }}{% endfor %}"),
 ("scope_loop", "{% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"),
 ("namespace", "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ ns.n }}"),
 ("block_set", "{% set body %}  {{ 1 + 1 }} items  {% endset %}[{{ body }}]{% set t | trim | upper %} low {% endset %}[{{ t }}]"),
 ("macro", "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('ann') }} {{ greet('bob', punct='?') }} {{ greet(name='cy', punct='.') }}"),
 ("macro_caller", "{% macro box(title) %}[{{ title }}: {{ caller() }}]{% endmacro %}{% call box('t') %}inside {{ 1 + 2 }}{% endcall %}"),
 ("filter_block", "{% filter upper %}abc {{ 'def' }}{% endfilter %}"),
 ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
 ("ternary", "{{ 'yes' if xs else 'no' }} {{ 'a' if n else 'b' }} [{{ 'c' if false }}]"),
 ("in_notin", "{{ 'ell' in 'hello' }} {{ 3 in xs }} {{ 'a' in d }} {{ 'z' not in d }} {{ 9 not in xs }}"),
 ("concat_arith", "{{ 1 ~ 'a' ~ none ~ true }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 - 4 }} {{ 'ab' * 3 }} {{ [1] + [2] }}"),
 ("compare_chain", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ none == none }} {{ [1,2] == [1,2] }}"),
 ("slicing", "{{ xs[::-1] }} {{ xs[1:3] }} {{ xs[-1] }} {{ 'hello'[1:-1] }} {{ u[::-1] }} {{ xs[:2] }} {{ xs[::2] }} {{ u[1] }}"),
 ("repr", "{{ [1, 2.5, 'a', none, true, {'k': [1, 'x']}] }} {{ (1,) }} {{ (1, 'b') }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1/3 }} {{ 1e-5 }} {{ 100.0 }} {{ \"it's\" }} {{ ['it\\'s', 'a\"b', 'c\\nd'] }}"),
 ("str_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ s.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}"),
 ("str_methods2", "{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'hi'.upper() }} {{ 'HI'.lower() }} {{ 'a-b'.replace('-', '+') }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ '{} and {}'.format(1, 'b') }} {{ '{0}{name}'.format('x', name='y') }} {{ ', '.join(['a', 'b']) }}"),
 ("dict_methods", "{{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d['b'] }} {{ d.a }} {{ d.zz is defined }}"),
 ("tojson", "{{ messages[1] | tojson }}|{{ d | tojson(indent=2) }}|{{ u | tojson }}|{{ u | tojson(ensure_ascii=true) }}|{{ d | tojson(sort_keys=true) }}|{{ [1, 2.0, none, true] | tojson(separators=(',', ':')) }}|{{ {} | tojson(indent=2) }}|{{ 'a\"b\\\\c\\n\\t' | tojson }}"),
 ("filters1", "{{ s | trim }}|{{ xs | length }}|{{ xs | join('-') }}|{{ xs | first }}|{{ xs | last }}|{{ n | default('dflt') }}|{{ missing | default('m') }}|{{ '' | default('e', true) }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 42 | string }}|{{ '12' | int + 1 }}|{{ 'x' | int }}|{{ 'abc' | list }}"),
 ("filters2", "{{ users | selectattr('admin') | map(attribute='name') | list }} {{ users | rejectattr('admin') | map(attribute='name') | join }} {{ users | selectattr('age', 'gt', 26) | list | length }} {{ xs | unique | list }} {{ xs | sort }} {{ d | dictsort }} {{ d | items | list }} {{ 'a<b&c' | escape }} {{ 'a-b' | replace('-', '=') }} {{ 'hello' | capitalize }}"),
 ("filters3", "{{ users | map(attribute='age') | sum }} {{ xs | max }} {{ xs | min }} {{ 'a\nb' | indent(2) }} {{ 'a\nb' | indent(2, true) }} {{ 3.7 | round }} {{ -3 | abs }} {{ xs | reverse | list }} {{ ['b', 'A', 'c'] | sort }} {{ 'one two  three' | wordcount }} {{ '%s-%d' | format('a', 3) }}"),
 ("tests", "{{ n is none }} {{ s is string }} {{ d is mapping }} {{ xs is iterable }} {{ xs is sequence }} {{ 1 is number }} {{ 1 is integer }} {{ 1.5 is float }} {{ true is boolean }} {{ missing is defined }} {{ missing is undefined }} {{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ s is not none }} {{ d is not mapping }} {{ 1 is eq 1 }}"),
 ("undefined", "[{{ missing }}][{{ missing | length }}][{% for x in missing %}x{% endfor %}][{{ d.zz }}][{{ xs[10] }}][{{ missing ~ 'a' }}][{{ not missing }}]"),
 ("strftime", "{{ strftime_now('%Y-%m-%d') }} {{ strftime_now('%d %b %Y') }}"),
 ("range_dict", "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b='x') }}"),
 ("messages_loop", "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] | trim }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"),
 ("markup", "{{ ('<b>' | safe) + '<i>' }} {{ '<' ~ ('x' | safe) }}"),
 ("gen_truthy", "{{ 'yes' if [] | select else 'no' }} {{ none | map(attribute='x') | list }}"),
 ("comments_raw", "a{# note #}b{% raw %}{{ not rendered }}{% endraw %}c"),
 ("multiline_expr", "{{\n  'a'\n  ~ 'b'\n}}{%- set x = [\n 1,\n 2,\n] -%}{{ x }}"),
 ("printf_format", "{{ '%s' % 'x' }} {{ '%05.2f' % 3.14159 }} {{ '%d-%s' % (3, 'b') }} {{ '%r' % 'q' }} {{ '%x' % 255 }} {{ '100%%' % () }}"),
 ("set_tuple_cycle", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% for x in xs %}{{ loop.cycle('o', 'e') }}{% endfor %}"),
 ("misc_values", "{{ missing | default(none) is none }} {{ xs | map('string') | join(',') }} {{ 'abc'[-1] }} {{ 10 // 3 * 3 }} {{ -2 ** 2 }} {{ none }} {{ 1.0 }} {{ 3 / 1 }} {{ 2.5 | int }} {{ '3' | float }} {{ 'a' ~ 1.5 }} {{ xs | sort(reverse=true) }} {{ ('a', 'b') | join }} {{ range(3) | reverse | list }}"),
 ("titles", "{{ 'hello-world foo_bar (x)' | title }} {{ 'HeLLo' | lower }} {{ 'MiXed' | upper }} {{ 'aBC dEF'.capitalize() }}"),
 ("nested_macros", "{% macro inner(x) %}<{{ x }}>{% endmacro %}{% macro outer(items) %}{% for i in items %}{{ inner(i) }}{% endfor %}{% endmacro %}{{ outer(xs) }}{{ outer([]) }}"),
 ("loop_in_macro_scope", "{% set g = 'G' %}{% macro m() %}{{ g }}{% set g = 'L' %}{{ g }}{% endmacro %}{{ m() }}{{ g }}"),
 ("recursive_json", "{% macro render(v) %}{% if v is mapping %}{{ '{' }}{% for k, x in v | dictsort %}{{ k }}={{ render(x) }};{% endfor %}{{ '}' }}{% elif v is iterable and v is not string %}[{% for x in v %}{{ render(x) }}{% endfor %}]{% else %}{{ v }}{% endif %}{% endmacro %}{{ render(users) }}"),
 ("string_escapes", "{{ 'tab\\there' }}|{{ \"q\\\"q\" }}|{{ 'u\\u00e9' }}|{{ 'x\\dy' }}"),
]
errors = [
 ("raise", "{{ raise_exception('Only user and assistant roles') }}", "raise_exception: Only user and assistant roles"),
 ("undefined_attr", "line1\n{{ missing.attr }}", "line 2: 'missing' is undefined"),
 ("unknown_filter", "{{ 1 | nosuch }}", "no filter named 'nosuch'"),
 ("unclosed", "{% if true %}x", "not closed"),
 ("bad_syntax", "{{ 1 + }}", "line 1"),
 ("unsafe_append", "{% set l = [] %}{{ l.append(1) }}", "unsafe"),
 ("type_error", "\n\n{{ 1 + 'a' }}", "line 3: unsupported operand type(s) for +: 'int' and 'str'"),
 ("tojson_undefined", "{{ missing | tojson }}", "not JSON serializable"),
]
def render(src):
    t = env.from_string(src)
    return t.render(add_generation_prompt=True, bos_token="<s>", eos_token="</s>", **json.loads(json.dumps(V)))
def cstr(s):
    out = '"'
    for ch in s.encode('utf-8'):
        c = chr(ch)
        if c == '"': out += '\\"'
        elif c == '\\': out += '\\\\'
        elif c == '\n': out += '\\n'
        elif c == '\t': out += '\\t'
        elif 32 <= ch < 127: out += c
        else: out += '\\%03o' % ch
    return out + '"'
print("/* Generated with jinja2 (tests/chat_corpus.py's environment); each expected text is jinja2's. */")
print("static const char JINJA_VARS[] = " + cstr(json.dumps(V, ensure_ascii=False)) + ";")
print("static const jinja_case JINJA_CASES[] = {")
for name, src in cases:
    try:
        exp = render(src)
    except Exception as e:
        print("FAILED", name, e, file=sys.stderr); continue
    print(f"    {{{cstr(name)}, {cstr(src)}, {cstr(exp)}, NULL}},")
for name, src, msg in errors:
    try:
        render(src); print("NO ERROR", name, file=sys.stderr)
    except Exception as e:
        print(f"  {name}: jinja2 says {type(e).__name__}: {e}", file=sys.stderr)
    print(f"    {{{cstr(name)}, {cstr(src)}, NULL, {cstr(msg)}}},")
print("};")
