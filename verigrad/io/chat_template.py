"""Chat templates rendered in jinja2's immutable sandbox, with bounds on what a render may cost.

The sandbox keeps a template away from Python's internals (`__class__`, `__globals__`, mutating methods);
the bounds below keep it from hanging or exhausting memory. A render has a budget (`LIMITS`): characters
(or list items) it may create, loop iterations and calls it may make, nested calls, wall-clock time; one
`range` has a bounded length, an integer a bounded size, `tojson` a bounded indent. Every creation
charges its size before it is made (`+`, `*`, `%`, `~`, each filter, each string method, the output),
so a hostile template is refused at the first step past a limit. Templates cannot include, import or
extend other templates. Every failure is a `TemplateError` naming the template's source (the file).
Real templates render exactly as transformers renders them.
"""

from __future__ import annotations

import json
import math
import operator
import re
import time
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, Sized, ValuesView
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError
from jinja2.runtime import LoopContext, Namespace
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import _PassArg
from jinja2.visitor import NodeTransformer

from ..errors import TemplateError


@dataclass(frozen=True)
class Limits:
    """What one render may cost. The defaults leave real templates (a few kB, a few passes over the
    messages) a thousand times the room they need."""

    source_chars: int = 1_000_000  # characters of template source
    chars: int = 32_000_000  # characters (or list items) created in all, the output included
    steps: int = 100_000  # loop iterations, calls and filters
    depth: int = 64  # nested calls: macros, recursive loops, caller()
    range_length: int = 100_000  # items of one range()
    int_bits: int = 65_536  # bits of an integer made by * or **
    tojson_indent: int = 16  # tojson's indent (spaces, or characters of an indent string)
    seconds: float = 5.0  # wall-clock time


LIMITS = Limits()


class _Limit(Exception):
    """A render went past one of LIMITS (the message says which)."""


class _Budget:
    """What is left of one render's LIMITS."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.chars = limits.chars
        self.steps = limits.steps
        self.depth = 0
        self.deadline = time.monotonic() + limits.seconds

    def charge(self, n: int, what: str) -> None:
        if n > self.chars:
            raise _Limit(
                f"{what} would make {n:,} characters (or items), past what is left of the "
                f"{self.limits.chars:,} a render may make"
            )
        self.chars -= n

    def check(self, n: int, what: str) -> None:
        """Refuse, without charging, work whose result would take `n` characters."""
        if n > self.chars:
            self.charge(n, what)

    def step(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise _Limit(f"more than {self.limits.steps:,} loop iterations, calls and filters")
        if time.monotonic() > self.deadline:
            raise _Limit(f"the render ran past {self.limits.seconds:g} s")


_BUDGET: ContextVar[_Budget | None] = ContextVar("chat_template_budget", default=None)


def _budget() -> _Budget:
    budget = _BUDGET.get()
    if budget is None:  # only while compiling (constant folding): bounded by the source's size
        return _Budget(LIMITS)
    return budget


def _size(value: Any, limit: int) -> int:
    """At least the characters of `value`'s text (str or repr), counting a part it holds twice twice;
    counting stops once past `limit`."""
    memo: dict[int, int] = {}

    def walk(x: Any, inside: bool) -> int:
        if isinstance(x, str):
            return len(x) + 2 * inside
        if isinstance(x, bool | float | type(None) | range | jinja2.Undefined):
            return 24
        if isinstance(x, int):
            return x.bit_length() // 3 + 2
        if isinstance(x, bytes):
            return 4 * len(x) + 3
        key = id(x)
        if key in memo:
            return memo[key]
        if isinstance(x, Namespace):
            items: Iterable[Any] = _namespace_attrs(x).items()
        elif isinstance(x, Mapping):
            items = x.items()
        elif isinstance(x, list | tuple | set | frozenset | KeysView | ValuesView | ItemsView):
            items = x
        else:
            return 64  # another object: its repr names its type
        total = _flat_size(items) + 2
        if total < 2:  # items of several kinds, or containers: one at a time
            total = 2
            for item in items:
                total += walk(item, True) + 2
                if total > limit:
                    break
        memo[key] = total
        return total

    return walk(value, False)


def _flat_size(items: Iterable[Any]) -> int:
    """The text size of a flat collection of strs or numbers, counted at C speed; -1 for anything else."""
    if isinstance(items, ItemsView | Mapping):
        return -1
    kinds = set(map(type, items))
    n = len(items)  # type: ignore[arg-type]
    if kinds <= {str}:
        return sum(map(len, items)) + 4 * n
    if kinds <= {int, bool}:
        return sum(map(int.bit_length, items)) // 3 + 4 * n
    if kinds <= {float, bool, type(None)}:
        return 26 * n
    return -1


def _namespace_attrs(ns: Namespace) -> dict[str, Any]:
    return ns._Namespace__attrs  # type: ignore[attr-defined]


def _sized(value: Any, what: str) -> None:
    """Refuse a value whose text would not fit in what is left of the budget (before str() makes it)."""
    if not isinstance(value, str):
        budget = _budget()
        budget.check(_size(value, budget.chars), what)


# operators, calls, loops ---------------------------------------------------------------------------------


def _check_int_product(bits: float, what: str) -> None:
    most = _budget().limits.int_bits
    if bits > most:
        raise _Limit(f"{what} would make an integer of about {bits:,.0f} bits (at most {most:,})")


def _repeat_count(left: Any, right: Any) -> tuple[Any, int] | None:
    """(sequence, count) of a `*` that repeats a sequence, else None."""
    for seq, n in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(n, int):
            return seq, n
    return None


_OPERATORS = {"+": operator.add, "*": operator.mul, "**": operator.pow, "%": operator.mod}
_DIGITS = re.compile(r"\d+")
_NESTED_FIELD = re.compile(r"\{[^{}]*\{")


def _check_widths(fmt: str, args: Iterable[Any], what: str) -> None:
    """Refuse a format string whose widths (or precisions) would make more than the budget allows: every
    number written in it counts, and the integer arguments too when a width is given by one."""
    widths = _DIGITS.findall(fmt)
    total = sum(int(w) if len(w) < 12 else 10**12 for w in widths)
    if "*" in fmt or _NESTED_FIELD.search(fmt):
        total += sum(abs(a) for a in args if isinstance(a, int) and a.bit_length() < 40)
        if any(isinstance(a, int) and a.bit_length() >= 40 for a in args):
            total += 10**12
    _budget().check(total, what)


def _binop(op: str, left: Any, right: Any) -> Any:
    budget = _budget()
    if op == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        _check_int_product(right * math.log2(max(abs(left), 1)), f"{left!r:.20} ** {right!r:.20}")
    elif op == "*":
        if isinstance(left, int) and isinstance(right, int):
            _check_int_product(left.bit_length() + right.bit_length(), "a product")
        elif (repeat := _repeat_count(left, right)) is not None:
            seq, n = repeat
            budget.charge(len(seq) * max(n, 0), f"repeating a {type(seq).__name__} {n:,} times")
    elif op == "+" and isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
        budget.charge(len(left) + len(right), "a concatenation")
    elif op == "%" and isinstance(left, str):
        args = right if isinstance(right, tuple) else (right,)
        _check_widths(left, args, "a % format")
        for a in args:
            _sized(a, "a % format's argument")
    result = _OPERATORS[op](left, right)
    if op == "%" and isinstance(result, str):
        budget.charge(len(result), "a % format")
    return result


class _Counted:
    """A loop's items, one step of the budget each; the length of the items where they have one."""

    def __init__(self, items: Any) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        budget = _budget()
        for item in self.items:
            budget.step()
            yield item


@jinja2.pass_context
def _loop_items(context: Any, items: Any) -> Any:
    if isinstance(items, jinja2.Undefined):
        return items  # iterating it is jinja2's business (nothing, or an error)
    return _Counted(items)


@jinja2.pass_context
def _concat(context: Any, parts: list[Any]) -> str:
    """`a ~ b`, with the size of the result charged first."""
    for p in parts:
        _sized(p, "a ~ concatenation")
    texts = [str(p) for p in parts]
    _budget().charge(sum(map(len, texts)), "a ~ concatenation")
    return "".join(texts)


def _bounded_range(*args: Any) -> range:
    r = range(*args)
    most = _budget().limits.range_length
    if len(r) > most:
        raise _Limit(f"range{args} has {len(r):,} items (at most {most:,})")
    return r


def _materialized(value: Any) -> Any:
    """An iterator's items in a list (a generator from `map` or `select` has no size until it runs)."""
    return list(value) if isinstance(value, Iterator) else value


def _str_method_check(method: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Refuse a call of a str method that would make more than the budget allows (`args` materialized)."""
    s, name, budget = method.__self__, method.__name__, _budget()  # type: ignore[attr-defined]
    what = f"str.{name}"
    if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
        budget.check(args[0], what)
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        budget.check(len(s) + s.count("\t") * max(int(size), 0), what)
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = s.count(args[0]) if args[0] else len(s) + 1
        budget.check(len(s) + count * len(args[1]), what)
    elif name == "join" and args:
        items = args[0]
        for item in items:
            _sized(item, what)
        budget.check(sum(len(i) for i in items if isinstance(i, str)) + len(s) * len(items), what)
    elif name in ("format", "format_map"):
        _check_widths(s, [*args, *kwargs.values()], what)
        for a in [*args, *kwargs.values()]:
            _sized(a, what)
    elif name in ("translate", "maketrans"):
        raise _Limit(f"{what} is not available in chat templates")


# filters -------------------------------------------------------------------------------------------------


# filters that make text of their whole input (the others count or pick its items, or check themselves)
_TEXT_FILTERS = frozenset(
    [
        "string",
        "join",
        "format",
        "center",
        "indent",
        "trim",
        "upper",
        "lower",
        "title",
        "capitalize",
        "replace",
        "truncate",
        "wordwrap",
        "striptags",
        "urlize",
        "urlencode",
        "e",
        "escape",
        "forceescape",
        "safe",
        "pprint",
        "xmlattr",
        "wordcount",
        "int",
        "float",
    ]
)


def _filter_check(name: str, value: Any, args: tuple, kwargs: dict) -> None:
    """Checks of the filters whose arguments can make a result far larger than their input."""
    budget, what = _budget(), f"the {name} filter"
    if isinstance(value, str):
        length = len(value)
    elif name in _TEXT_FILTERS:
        length = _size(value, budget.chars)
    else:  # the items, not their text: a filter like `length` costs nothing on a long conversation
        length = len(value) if isinstance(value, Sized) else 0
    arg = lambda i, key, default: args[i] if len(args) > i else kwargs.get(key, default)
    if name == "center":
        width = arg(0, "width", 80)
        budget.check(max(width, length) if isinstance(width, int) else length, what)
    elif name == "indent":
        width = arg(0, "width", 4)
        w = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        budget.check(length + (str(value).count("\n") + 1) * max(w, 0), what)
    elif name == "format":
        _check_widths(str(value), [*args, *kwargs.values()], what)
    elif name == "replace":
        old, new = arg(0, "old", ""), arg(1, "new", "")
        if isinstance(old, str) and isinstance(new, str):
            count = str(value).count(old) if old else length + 1
            budget.check(length + count * len(new), what)
    elif name == "join":
        sep = arg(0, "d", "")
        n = len(value) if hasattr(value, "__len__") else 0
        budget.check(length + n * len(sep if isinstance(sep, str) else str(sep)), what)
    elif name == "wordwrap":
        wrap = arg(3, "wrapstring", None)
        budget.check(length * (1 + len(wrap if isinstance(wrap, str) else "\n")), what)
    elif name in ("batch", "slice"):
        n = arg(0, "linecount" if name == "batch" else "slices", 1)
        if isinstance(n, int):
            budget.check(n, what)
    elif name == "truncate":
        end = arg(2, "end", "...")
        budget.check(length + (len(end) if isinstance(end, str) else 0), what)
    budget.check(length, what)


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """The filter with its arguments checked first and its result charged (never folded at compile time)."""
    pass_arg = _PassArg.from_obj(func)

    @jinja2.pass_context
    def bounded(context: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.step()
        items = _materialized(value)
        _filter_check(name, items, args, kwargs)
        if items is not value:
            value = iter(items)  # still an iterator: the filter sees what it would have seen
        if pass_arg is _PassArg.context:
            result = func(context, value, *args, **kwargs)
        elif pass_arg is _PassArg.eval_context:
            result = func(context.eval_ctx, value, *args, **kwargs)
        elif pass_arg is _PassArg.environment:
            result = func(context.environment, value, *args, **kwargs)
        else:
            result = func(value, *args, **kwargs)
        if isinstance(result, str | list | tuple):
            budget.charge(len(result), f"the {name} filter")
        return result

    return bounded


def _tojson(
    x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
) -> str:
    """transformers' tojson (unicode kept), with a bounded indent and the result's size checked first."""
    budget = _budget()
    step, most = len(indent) if isinstance(indent, str) else indent, budget.limits.tojson_indent
    if step is not None and not (isinstance(step, int) and 0 <= step <= most):
        raise _Limit(f"tojson's indent is {indent!r:.40}; it takes 0 to {most} (or a string as long)")
    # an indented line is at most (nesting depth) * indent longer: a depth past 1000 fails in json anyway
    budget.check(_size(x, budget.chars) * (1 + (step or 0)), "tojson")
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


# the environment -----------------------------------------------------------------------------------------


class _Bounds(NodeTransformer):
    """Rewrites a parsed template: each loop counts its items, each `~` charges its result; refuses
    include, import and extends (a chat template stands alone)."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        node = self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, "_loop_items", [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        node = self.generic_visit(node)
        return nodes.Filter(nodes.List(node.nodes), "_concat", [], [], None, None, lineno=node.lineno)

    def generic_visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        if isinstance(node, nodes.Include | nodes.Import | nodes.FromImport | nodes.Extends):
            kind = type(node).__name__.lower().replace("fromimport", "import")
            raise jinja2.TemplateSyntaxError(
                f"{{% {kind} %}} is not available: a chat template cannot load other templates", node.lineno
            )
        return super().generic_visit(node, *args, **kwargs)


class _BoundedCodeGenerator(CodeGenerator):
    def visit_Template(self, node: nodes.Template, frame: Any = None) -> None:
        node = _Bounds().visit(node)
        node.set_environment(self.environment)
        super().visit_Template(node, frame)


def _finalize(value: Any) -> Any:
    if _BUDGET.get() is not None:
        _sized(value, "an output")
    return value


def _bounded_join(pieces: Iterable[str]) -> str:
    """The output (of the template, a macro, a block): its size charged before it is joined."""
    parts = list(pieces)
    if _BUDGET.get() is not None:
        _budget().charge(sum(map(len, parts)), "the output")
    return "".join(parts)


class _Environment(ImmutableSandboxedEnvironment):
    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        """Refuse access to an unsafe attribute now (jinja2 gives an undefined that prints as nothing)."""
        raise SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__!r} object is unsafe")

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        return _binop(operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.step()
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)  # str.format is wrapped
        if isinstance(owner, str):
            args = tuple(map(_materialized, args))
            _str_method_check(getattr(__obj, "__wrapped__", __obj), args, kwargs)
        if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level counts its items too
            args = (_Counted(args[0]), *args[1:])
        if budget.depth >= budget.limits.depth:
            raise _Limit(f"calls nested more than {budget.limits.depth} deep (a recursive macro or loop?)")
        budget.depth += 1
        try:
            result = super().call(__context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        if isinstance(result, str) and isinstance(owner, str):
            budget.charge(len(result), f"str.{getattr(__obj, '__name__', '?')}")
        return result


def _environment() -> _Environment:
    env = _Environment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols], finalize=_finalize
    )
    env.concat = _bounded_join  # type: ignore[method-assign]
    env.filters = {name: _bounded_filter(name, f) for name, f in env.filters.items()}
    env.filters["tojson"] = _bounded_filter("tojson", _tojson)
    env.filters["_loop_items"] = _loop_items
    env.filters["_concat"] = _concat
    env.globals.pop("lipsum", None)  # makes paragraphs of text on demand: no chat template uses it
    env.globals["range"] = _bounded_range
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


class ChatTemplate:
    """A chat template compiled in the bounded sandbox; `origin` (the file it came from) names it in
    every error."""

    def __init__(self, source: str, origin: str = "", limits: Limits = LIMITS) -> None:
        self.origin = origin or "the chat template"
        self.limits = limits
        if not isinstance(source, str):
            raise TemplateError(f"{self.origin}: the chat template is a {type(source).__name__}, not text")
        if len(source) > limits.source_chars:
            raise TemplateError(
                f"{self.origin}: the chat template has {len(source):,} characters "
                f"(at most {limits.source_chars:,})"
            )
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(
                f"{self.origin}: the chat template does not parse: {e.message} (line {e.lineno})"
            ) from None
        except (RecursionError, MemoryError, SyntaxError, jinja2.TemplateError) as e:
            raise TemplateError(
                f"{self.origin}: the chat template does not compile: {_describe(e)}"
            ) from None

    def render(self, **variables: Any) -> str:
        """The template's text for `variables`, or a `TemplateError` at its first failure or limit."""
        token = _BUDGET.set(_Budget(self.limits))
        try:
            return self._template.render(**variables)
        except _Limit as e:
            raise TemplateError(f"{self.origin}: the chat template went past a limit: {e}") from None
        except jinja2.TemplateError as e:
            raise TemplateError(f"{self.origin}: the chat template failed: {e}") from None
        except Exception as e:  # whatever a template's own code raises is the template's failure
            raise TemplateError(f"{self.origin}: the chat template failed: {_describe(e)}") from None
        finally:
            _BUDGET.reset(token)


def _describe(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return "it nests too deeply (RecursionError)"
    if isinstance(e, MemoryError):
        return "it ran out of memory (MemoryError)"
    return f"{type(e).__name__}: {e}"
