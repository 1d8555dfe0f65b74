"""Chat templates generated from a small grammar of jinja constructs (loops, ranges, macros, namespaces,
operators, filters, str methods, huge numbers): each renders, or fails with a TemplateError; never another
exception, never past the render's time limit."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verigrad.errors import TemplateError
from verigrad.io.chat_template import LIMITS, ChatTemplate

NUMBERS = st.sampled_from(
    ["0", "1", "-1", "3", "7", "100", "10**6", "10**9", "2**64", "1.5", "1e308", "(1/3)"]
)
STRINGS = st.sampled_from(
    ["'a'", "'ab\\n'", "''", "'%d'", "'%s%s'", "'{}'", "'{:>9}'", "'\\t'", "'日本'", "'x y z'"]
)
NAMES = st.sampled_from(
    ["messages", "messages[0]", "messages[0].content", "messages[-1]['role']", "loop", "ns", "ns.x",
     "add_generation_prompt", "bos_token", "undefined_name", "none", "true", "range", "dict", "namespace"]
)  # fmt: skip
BINARY = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "~", "==", "<", "in", "and", "or"])
FILTERS = st.sampled_from(
    ["length", "trim", "upper", "tojson", "tojson(indent=4)", "tojson(indent=10**9)", "join(', ')", "list",
     "first", "last", "reverse", "sort", "unique", "string", "int", "float", "abs", "center(10**8)",
     "indent(4)", "replace('a', 'bb')", "format(1)", "batch(3)", "slice(2)", "items", "default('d')",
     "wordwrap(3)", "truncate(5)", "sum", "map('upper')", "select", "selectattr('role')", "e", "safe",
     "round", "count", "title", "dictsort"]
)  # fmt: skip
METHODS = st.sampled_from(
    ["strip()", "split()", "startswith('a')", "upper()", "center(50)", "ljust(10**8)", "format(1, 2)",
     "replace('a', 'xyz')", "join(['a', 'b'])", "expandtabs(10**7)", "count('a')", "items()", "get('role')",
     "append(1)", "__class__", "zfill(5)"]
)  # fmt: skip


def expressions() -> st.SearchStrategy[str]:
    leaves = st.one_of(NUMBERS, STRINGS, NAMES)
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(lambda a, op, b: f"({a} {op} {b})", inner, BINARY, inner),
            st.builds(lambda a, f: f"({a} | {f})", inner, FILTERS),
            st.builds(lambda a, m: f"{a}.{m}", inner, METHODS),
            st.builds(lambda a, b: f"[{a}, {b}]", inner, inner),
            st.builds(lambda a: f"range({a})", inner),
            st.builds(lambda a: f"({a})[0]", inner),
            st.builds(lambda a, b: f"{{'k': {a}, 'v': {b}}}", inner, inner),
            st.builds(lambda a: f"f({a})", inner),
        ),
        max_leaves=6,
    )


def statements() -> st.SearchStrategy[str]:
    expr = expressions()
    leaves = st.one_of(
        st.builds(lambda e: "{{ " + e + " }}", expr),
        st.sampled_from(
            ["text", "\n", "{{ loop.index }}", "{% break %}", "{{ caller() }}", "{% raw %}{{{% endraw %}"]
        ),
        st.builds(lambda e: "{% set ns.x = " + e + " %}", expr),
        st.builds(lambda e: "{% set v = " + e + " %}{{ v }}", expr),
    )
    return st.recursive(
        leaves,
        lambda body: st.one_of(
            st.builds(lambda e, b: "{% for i in " + e + " %}" + b + "{% endfor %}", expr, body),
            st.builds(
                lambda e, b: "{% for i in " + e + " recursive %}" + b + "{{ loop(i) }}{% endfor %}",
                expr,
                body,
            ),
            st.builds(
                lambda e, b, c: "{% if " + e + " %}" + b + "{% else %}" + c + "{% endif %}", expr, body, body
            ),
            st.builds(lambda b: "{% macro f(x) %}" + b + "{% endmacro %}", body),
            st.builds(lambda e, b: "{% call f(" + e + ") %}" + b + "{% endcall %}", expr, body),
            st.builds(lambda b: "{% filter upper %}" + b + "{% endfilter %}", body),
            st.builds(lambda a, b: a + b, body, body),
            st.builds(lambda b: "{% set t %}" + b + "{% endset %}{{ t ~ t }}", body),
        ),
        max_leaves=8,
    )


TEMPLATES = st.builds(
    lambda m, b: "{% set ns = namespace(x=1) %}" + m + b,
    st.sampled_from(["", "{% macro f(x) %}{{ x }}{% endmacro %}"]),
    statements(),
)


@settings(
    max_examples=200, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(TEMPLATES)
def test_generated_templates_render_or_refuse_cleanly(source):
    start = time.monotonic()
    try:
        out = ChatTemplate(source, "fuzz.gguf").render(
            messages=[{"role": "user", "content": "hi a"}, {"role": "assistant", "content": "b\tc"}],
            add_generation_prompt=True,
            bos_token="<s>",
        )
    except TemplateError as e:
        assert str(e).startswith("fuzz.gguf: the chat template ")
    else:
        assert isinstance(out, str) and len(out) <= LIMITS.chars
    assert time.monotonic() - start < LIMITS.seconds + 1, source


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list("{}%#-+ ()[]'\"|.~*:=,ab0\n")), max_size=40))
def test_random_text_parses_or_refuses_cleanly(source):
    try:
        ChatTemplate(source, "fuzz.gguf").render(messages=[])
    except TemplateError as e:
        assert "fuzz.gguf" in str(e)
