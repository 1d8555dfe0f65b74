"""Chat templates as an attacker writes them: each one is refused with a TemplateError naming the file,
quickly and in bounded memory, and real templates (SmolLM2's, Llama-3's, Llama-3.1's with tools, a
Qwen-style one with a namespace) render exactly as jinja2's plain sandbox renders them (transformers' way)."""

from __future__ import annotations

import json
import re
import threading
import time
import tracemalloc

import pytest
from lm_fakes import tokenizer

from verigrad.errors import TemplateError
from verigrad.io.chat_template import LIMITS, ChatTemplate, Limits

SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>"
    "system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
LLAMA31 = """{{- bos_token }}
{%- if not date_string is defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %}
{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}{{- "Environment: ipython\\n" }}{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\\n\\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none %}
    {{- 'Respond in the format {"name": function name, "parameters": a dictionary}.' }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}
        {{- message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {%- for arg_name, arg_val in tool_call.arguments | items %}
            {{- arg_name ~ '=' ~ arg_val }}{%- if not loop.last %}{{- ", " }}{%- endif %}
        {%- endfor %}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""
QWEN_STYLE = """{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not message.content.startswith('<tool') %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}
    {{- '<|im_start|>' + message.role + '\\n' + content }}
    {%- if loop.index0 > ns.last_query_index %}{{- ' (after the last query)' }}{%- endif %}
    {{- '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
{{- ', '.join(messages | map(attribute='role')) }}{{- messages | map(attribute='role') | join('/') }}
{{- (messages | selectattr('role', 'equalto', 'user') | first).content }}
{{- messages | map(attribute='role') | list }}
{{- '%-5s|%5.2f' % ('end', 3.14159) }}{{- ' ' * 3 }}{{- [1, 2] * 2 }}{{- 2 ** 10 }}{{- 'x'.center(7) }}
"""
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city, «now» 😀",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CONVERSATIONS = [
    [{"role": "user", "content": "Hi!"}],
    [{"role": "system", "content": "  Be brief.  "}, {"role": "user", "content": "What is 2+2?"}],
    [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "<think>hmm</think>\nBlue."},
        {"role": "user", "content": "Another, in 日本語 😀"},
    ],
]
TOOL_CALLS = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
    },
    {"role": "tool", "content": {"temperature": 21}},
]
REAL = {"smollm2": SMOLLM2, "llama3": LLAMA3, "llama3.1": LLAMA31, "qwen_style": QWEN_STYLE}


def plain_sandbox(source: str):
    """The template as transformers compiles it: jinja2's immutable sandbox with no bounds."""
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


@pytest.mark.parametrize("name", list(REAL))
def test_real_templates_render_as_the_plain_sandbox(name):
    ours, theirs = ChatTemplate(REAL[name], "model.gguf"), plain_sandbox(REAL[name])
    for messages in [*CONVERSATIONS, *([TOOL_CALLS] if name == "llama3.1" else [])]:
        for prompt in (True, False):
            for extra in ({}, {"tools": TOOLS, "builtin_tools": ["code_interpreter", "wolfram"]}):
                names = dict(messages=messages, add_generation_prompt=prompt, bos_token="<s>", **extra)
                assert ours.render(**names) == theirs.render(**names)
    assert "SmolLM" in ChatTemplate(SMOLLM2).render(messages=CONVERSATIONS[0], add_generation_prompt=True)


def test_a_long_conversation_renders():
    """A conversation far beyond any context (20,000 turns, 4 MB of text) is within the limits, and one of
    2,000 turns with a template that takes `messages | length` at every turn (filters that count items do
    not measure their text: that made this render quadratic and stopped it at the time limit)."""
    messages = [{"role": "user" if i % 2 else "assistant", "content": "word " * 40} for i in range(20_000)]
    for source, n in ((SMOLLM2, 20_000), (LLAMA31, 20_000), (QWEN_STYLE, 2_000)):
        names = dict(messages=messages[:n], add_generation_prompt=True, bos_token="<s>")
        assert ChatTemplate(source).render(**names) == plain_sandbox(source).render(**names)


HOSTILE = {
    # loops and ranges
    "nested_range_1e5": "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    "nested_range_1e6": "{% for i in range(10**6) %}{% for j in range(10**6) %}{% endfor %}{% endfor %}",
    "loop_over_a_string": "{% for c in 'ab' * 60000 %}{% endfor %}",
    "recursive_loop": "{% for x in [1] recursive %}{{ loop([1, 2]) }}{% endfor %}",
    # arithmetic
    "power_tower": "{{ 9 ** (9 ** 9) }}",
    "power_literal": "{{ 9 ** 387420489 }}",
    "repeated_squaring": "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}"
    "{% endfor %}",
    "string_repetition": "{{ 'a' * 10**10 }}",
    "list_repetition": "{{ [0] * 10**9 }}",
    "list_of_lists": "{% set l = [0] * 10**6 %}{% set m = [l] * 10**3 %}{{ m }}",
    "doubling_plus": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}",
    "doubling_tilde": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}",
    "doubling_macro": "{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('ab') }}",
    "printf_width": "{{ '%0999999999d' % 1 }}",
    "printf_star": "{{ '%*d' % (999999999, 1) }}",
    # output
    "output_loop": "{% set s = 'a' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}",
    "caller_fanout": "{% macro m() %}{{ caller() }}{{ caller() }}{% endmacro %}{% set s = 'a' * 10**6 %}"
    + "{% call m() %}" * 30
    + "{{ s }}"
    + "{% endcall %}" * 30,
    "dict_items_repeated": "{% set d = {'a': 'b' * 1000000} %}{{ [d.items()] * 1000 }}",
    # filters and str methods
    "tojson_indent": "{{ messages | tojson(indent=10**9) }}",
    "tojson_indent_literal": "{{ messages | tojson(indent=1000000000) }}",
    "center_filter": "{{ 'a' | center(1000000000) }}",
    "indent_filter": "{{ ('a\n' * 1000) | indent(1000000) }}",
    "format_filter": "{{ '%0999999999d' | format(1) }}",
    "replace_filter": "{{ ('a' * 100000) | replace('a', 'b' * 100000) }}",
    "join_filter": "{% set l = ['a' * 1000000] * 1000 %}{{ l | join }}",
    "join_filter_of_a_generator": "{% set s = 'a' * 1000000 %}{{ ([s] * 1000) | map('string') | join }}",
    "str_join_of_a_generator": "{% set s = 'a' * 1000000 %}{{ ''.join(([s] * 1000) | map('string')) }}",
    "batch_filter": "{{ [1] | batch(1000000000, 'x') | list }}",
    "slice_filter": "{{ [1] | slice(1000000000) | list }}",
    "wordwrap_filter": "{{ ('a ' * 100000) | wordwrap(1, wrapstring='x' * 100000) }}",
    "str_center": "{{ 'a'.center(1000000000) }}",
    "str_ljust": "{{ 'a'.ljust(10**9) }}",
    "str_format_width": "{{ '{:>999999999}'.format(1) }}",
    "str_expandtabs": "{{ ('\t' * 1000).expandtabs(1000000) }}",
    "str_translate": "{{ 'a'.translate({97: 'b' * 1000}) }}",
    "lipsum": "{{ lipsum(10**9) }}",
    # recursion
    "recursive_macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "deep_parentheses": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
    # other templates
    "include": "{% include 'x' %}",
    "extends": "{% extends 'base.html' %}",
    "import": "{% import 'macros' as m %}",
    "from_import": "{% from 'macros' import m %}",
    # the sandbox
    "cycler_globals": "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "joiner_globals": "{{ joiner.__init__.__globals__ }}",
    "class_mro": "{{ messages.__class__.__mro__[1].__subclasses__() }}",
    "function_globals": "{{ raise_exception.__globals__ }}",
    "mutating_a_list": "{{ messages.append(1) }}",
    "format_attribute": "{{ '{0.__class__}'.format(messages) }}",
    # plain failures
    "undefined": "{{ nothing.at.all }}",
    "syntax_error": "{% for %}",
    "unclosed_block": "{% if messages %}",
    "unknown_filter": "{{ messages | nosuchfilter }}",
    "division_by_zero": "{{ 1 / 0 }}",
    "type_error": "{{ 1 + 'a' }}",
    "float_overflow": "{{ 2.0 ** 100000 }}",
    "huge_int_text": "{{ 10 ** 5000 }}",
    "raise_exception": "{{ raise_exception('roles must alternate') }}",
    "not_iterable": "{% for x in 3 %}{% endfor %}",
}


def render(source: str) -> str:
    return ChatTemplate(source, "evil.gguf").render(
        messages=[{"role": "user", "content": "hi"}], add_generation_prompt=True
    )


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_templates_are_refused_quickly_naming_the_file(name):
    start = time.process_time()
    with pytest.raises(TemplateError, match=r"^evil\.gguf: the chat template ") as info:
        render(HOSTILE[name])
    assert time.process_time() - start < 1.0, name
    assert len(str(info.value)) < 500 and "Traceback" not in str(info.value)


@pytest.mark.parametrize(
    "name",
    ["nested_range_1e5", "power_tower", "list_of_lists", "doubling_tilde", "output_loop", "caller_fanout"],
)
def test_hostile_templates_stay_in_bounded_memory(name):
    tracemalloc.start()
    try:
        with pytest.raises(TemplateError):
            render(HOSTILE[name])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20, f"{name}: {peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("nested_range_1e5", f"more than {LIMITS.steps:,} loop iterations"),
        ("nested_range_1e6", "range(1000000,) has 1,000,000 items (at most 100,000)"),
        ("power_tower", "9 ** 387420489 would make an integer of about 1,228,093,894 bits"),
        ("string_repetition", "repeating a str 10,000,000,000 times"),
        ("tojson_indent", "tojson's indent is 1000000000; it takes 0 to 16"),
        ("recursive_macro", "calls nested more than 64 deep"),
        ("include", "{% include %} is not available"),
        ("cycler_globals", "access to attribute '__init__'"),
        ("function_globals", "access to attribute '__globals__' of a 'function' object is unsafe"),
        ("undefined", "'nothing' is undefined"),
        ("syntax_error", "does not parse"),
        ("division_by_zero", "ZeroDivisionError"),
        ("deep_parentheses", "nests too deeply"),
        ("raise_exception", "roles must alternate"),
    ],
)
def test_the_error_says_what_went_wrong(name, says):
    with pytest.raises(TemplateError) as info:
        render(HOSTILE[name])
    assert says in str(info.value)


def test_a_template_renders_again_after_a_refusal():
    """The budget is per render: a refused render leaves nothing behind, and two renders of 90,000 loop
    iterations each both fit."""
    template = ChatTemplate("{% for i in range(n) %}{% for j in range(n) %}{% endfor %}{% endfor %}{{ n }}")
    with pytest.raises(TemplateError, match="loop iterations"):
        template.render(n=1000)
    assert template.render(n=300) == template.render(n=300) == "300"


def test_limits_of_ones_own_apply():
    small = Limits(steps=10, range_length=5, int_bits=64, tojson_indent=2, chars=100, depth=3)
    cases = {
        "{% for i in [1] * 20 %}{% endfor %}": "more than 10 loop iterations",
        "{{ range(6) | list }}": "range(6,) has 6 items (at most 5)",
        "{{ 2 ** 65 }}": "about 65 bits (at most 64)",
        "{{ [1] | tojson(indent=3) }}": "it takes 0 to 2",
        "{{ 'a' * 101 }}": "of the 100 a render may make",
        "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}": "calls nested more than 3 deep",
    }
    for source, says in cases.items():
        with pytest.raises(TemplateError, match=re.escape(says)):
            ChatTemplate(source, "t.gguf", small).render()
        if "macro" not in source:
            ChatTemplate(source).render()  # within the default limits
    assert ChatTemplate(
        "{{ range(5) | list }}{{ 2 ** 64 }}", limits=small
    ).render() == "[0, 1, 2, 3, 4]" + str(2**64)


def test_threads_render_with_budgets_of_their_own():
    """A hostile render in one thread neither spends nor breaks the budget of the others."""
    good = ChatTemplate(SMOLLM2, "good.gguf")
    bad = ChatTemplate(HOSTILE["nested_range_1e5"], "bad.gguf")
    names = dict(messages=CONVERSATIONS[2], add_generation_prompt=True)
    expected = plain_sandbox(SMOLLM2).render(**names)
    results: list[object] = []

    def work(i: int) -> None:
        for _ in range(20):
            try:
                results.append((bad if i % 2 else good).render(**names))
            except TemplateError as e:
                results.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r == expected for r in results) == 40
    assert sum(isinstance(r, TemplateError) and "bad.gguf" in str(r) for r in results) == 40


def test_the_tokenizer_names_its_file_in_template_errors(tmp_path):
    tok = tokenizer(tmp_path, chat_template="{{ 'a' * 10**10 }}")
    with pytest.raises(TemplateError, match=r"tok\.gguf: the chat template went past a limit"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])
    (tmp_path / "s").mkdir()
    broken = tokenizer(tmp_path / "s", chat_template="{% if %}")
    with pytest.raises(TemplateError, match=r"tok\.gguf: the chat template does not parse"):
        broken.apply_chat_template([{"role": "user", "content": "x"}])


def test_a_template_that_is_not_text_or_too_long_is_refused():
    with pytest.raises(TemplateError, match=r"f\.gguf: the chat template is a int, not text"):
        ChatTemplate(3, "f.gguf")  # type: ignore[arg-type]
    with pytest.raises(TemplateError, match="characters"):
        ChatTemplate("x" * (LIMITS.source_chars + 1), "f.gguf")
