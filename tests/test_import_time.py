"""`import verigrad` leaves its rarely used submodules and the `gguf` package unread until first used (as
`import torch` leaves torch.distributions), and every way of reaching them still works; nor does it read
numpy.random (until a draw), jinja2 (until a chat template is rendered) or rich (until a command prints a
table or a progress bar); `verigrad chat`'s command line reads none of the other commands' modules (the
trainers, the GGUF writer and its yaml, the data loaders): their memory counts in a chat's peak."""

from __future__ import annotations

import subprocess
import sys

import pytest

import verigrad

LAZY = (
    "data", "distributed", "distributions", "fft", "io", "ir", "jit", "library", "linalg", "masked", "models",
    "nn", "optim", "signal", "special", "testing", "utils",
)  # fmt: skip


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_reads_no_lazy_submodule_nor_gguf():
    names = [f"verigrad.{n}" for n in LAZY] + ["gguf", "verigrad.io.gguf", "verigrad.serve", "verigrad.cli"]
    out = _run(f"import sys, verigrad; print([n for n in {names!r} if n in sys.modules])")
    assert out.strip() == "[]"


# what a GGUF model's load never needs: the families of layers it has no use for, the compiler (its decode
# loop compiles at the first token), the other models, linalg; numpy.ma (NumPy's unique imports it); the
# downloads (a load from a path) and the cpu backend's build (its subprocess)
NOT_FOR_A_LOAD = [
    "numpy.ma", "verigrad.models.fetch", "verigrad.models.gpt", "subprocess",
    "verigrad.compile", "verigrad.ir.plan", "verigrad.ir.trace", "verigrad.ir.passes", "verigrad.masked",
    "verigrad.linalg", "verigrad.fft", "verigrad.nn.convolution", "verigrad.nn.recurrent",
    "verigrad.nn.losses", "verigrad.nn.transformer", "verigrad.nn.pooling", "verigrad.nn.utils",
    "verigrad.nn.functional.losses", "verigrad.nn.functional.convolution", "verigrad.models.cnn",
    "verigrad.models.gpt2", "verigrad.optim",
]  # fmt: skip


def test_import_reads_no_family_of_layers_nor_the_compiler():
    out = _run(
        f"import sys, verigrad; print([n for n in {[*NOT_FOR_A_LOAD, 'verigrad.nn']!r} if n in sys.modules])"
    )
    assert out.strip() == "[]"


def test_loading_a_gguf_model_reads_only_what_it_uses(tmp_path):
    from llama_gguf import write_llama_gguf

    path = write_llama_gguf(tmp_path / "tiny.gguf")
    code = (
        "import sys, verigrad\n"
        "from verigrad.models.catalog import load_language_model\n"
        f"model, tokenizer = load_language_model({str(path)!r})\n"
        "print(type(model).__name__, [n for n in sys.argv[1:] if n in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *NOT_FOR_A_LOAD], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Llama", "[]"]


def test_import_reads_no_random_numbers_templates_nor_tables():
    names = ["numpy.random", "jinja2", "rich", "yaml", "secrets", "safetensors", "verigrad.io.checkpoint"]
    code = "import sys, verigrad\nverigrad.manual_seed(3)\nverigrad.Generator(5)\n"
    out = _run(code + f"print([n for n in {names!r} if n in sys.modules])")
    assert out.strip() == "[]"


def test_loading_the_cpu_kernels_draws_no_random_numbers():
    # the element-wise kernels' probe of the C library (backends/cpu/elementwise.py) spreads its values
    # without numpy.random: a greedy chat, which draws nothing, then never imports it
    code = "import sys, verigrad\nprint((verigrad.ones(8) * 2).exp().sum().item() > 0)\n"
    out = _run(code + "print('numpy.random' in sys.modules, verigrad.backends.get_backend().name)")
    assert out.split() == ["True", "False", "cpu"]


def test_the_cpu_kernel_families_are_imported_when_the_library_loads():
    # `import verigrad` registers the cpu backend, not its families nor its build (the compiler's subprocess,
    # hashlib, sysconfig): each is imported by the library's load (its first kernel), and the families'
    # tables are the package's names on first use
    names = ("elementwise", "matmul", "quant", "attention", "fused", "build", "fastcall")
    families = [f"verigrad.backends.cpu.{n}" for n in names] + ["subprocess", "hashlib", "sysconfig"]
    code = (
        "import sys, verigrad\n"
        "from verigrad.backends import cpu\n"
        f"print([n for n in {families!r} if n in sys.modules], 'rope' in cpu.ROPE, 'ROPE' in dir(cpu))\n"
        "x = (verigrad.ones(8) * 2).exp().sum().item()\n"
        f"print([n for n in {families[:4]!r} if n not in sys.modules], cpu.cpu.kernels() != [])"
    )
    assert _run(code).split() == ["[]", "True", "True", "[]", "True"]


def test_chat_command_line_reads_no_other_command():
    names = [
        "verigrad.cli.finetune_trainer",
        "verigrad.cli.trainer",
        "verigrad.cli.lm_trainer",
        "verigrad.cli.demo",
        "verigrad.io.gguf_writer",
        "gguf",
        "yaml",
        "verigrad.optim",
        "verigrad.data",
        "verigrad.distributed",
        "jinja2",
        "rich",
        "safetensors",
        "tokenizers",
    ]
    code = "import sys\nfrom verigrad.cli import build_parser\nbuild_parser('chat').parse_args(['chat'])\n"
    out = _run(code + f"print([n for n in {names!r} if n in sys.modules])")
    assert out.strip() == "[]"


def test_each_command_alone_parses_as_the_whole_command_line():
    from verigrad.cli import COMMANDS, build_parser

    def commands(parser):
        return next(a for a in parser._actions if a.dest == "command").choices

    whole = commands(build_parser())
    assert sorted(COMMANDS) == sorted(whole)
    for name in COMMANDS:
        own = commands(build_parser(name))
        assert own[name].format_help() == whole[name].format_help(), name
    assert sorted(commands(build_parser("no-such-command"))) == sorted(whole)  # its error lists them all


def test_lazy_submodules_are_attributes_and_importable():
    out = _run(
        "import verigrad\n"
        "from verigrad import distributions\n"
        "from verigrad.models.catalog import load_language_model\n"
        "import verigrad.library as lib\n"
        "print(verigrad.distributions is distributions, verigrad.library is lib,\n"
        "      callable(verigrad.utils.data.DataLoader), callable(verigrad.io.read_gguf),\n"
        "      verigrad.io.GGUFFile.__name__, callable(load_language_model))"
    )
    assert out.split() == ["True", "True", "True", "True", "GGUFFile", "True"]


def test_load_and_save_are_imported_on_first_use():
    out = _run(
        "import sys, verigrad\n"
        "from verigrad import save\n"
        "print(verigrad.load is verigrad.io.load, save is verigrad.io.checkpoint.save,\n"
        "      'load' in dir(verigrad), 'save' in verigrad.__all__, 'verigrad.io.checkpoint' in sys.modules)"
    )
    assert out.split() == ["True", "True", "True", "True", "True"]


def test_star_import_and_dir_list_the_lazy_submodules():
    for name in LAZY:
        assert name in verigrad.__all__ and name in dir(verigrad)
    namespace: dict = {}
    exec("from verigrad import *", namespace)
    assert all(namespace[name] is getattr(verigrad, name) for name in LAZY)


def test_lazy_names_are_the_same_objects_whichever_module_comes_first():
    # importing the module verigrad.compile sets the attribute `compile` on verigrad, where the name is
    # nn.compiled's function: the function stays, whether the module came before or after the name
    out = _run(
        "import verigrad, verigrad.compile, verigrad.nn.compiled as c\n"
        "from verigrad import compile, compiler, func\n"
        "from verigrad.nn.utils.stateless import functional_call\n"
        "print(verigrad.compile is c.compile is compile is compiler.compile,\n"
        "      func.functional_call is functional_call, verigrad.cat is verigrad.concatenate,\n"
        "      verigrad.softmax is verigrad.nn.functional.softmax)"
    )
    assert out.split() == ["True", "True", "True", "True"]
    out = _run("import verigrad\nf = verigrad.compile\nimport verigrad.compile\nprint(verigrad.compile is f)")
    assert out.split() == ["True"]


def test_pytorch_module_paths_import_the_families_on_first_use():
    out = _run(
        "import sys, verigrad.nn as nn\n"
        "print('verigrad.nn.losses' in sys.modules)\n"
        "import verigrad.nn.modules.loss\n"
        "from verigrad.nn.modules.conv import Conv2d\n"
        "from verigrad.nn.parameter import Parameter\n"
        "from verigrad.nn.modules.utils import _pair\n"
        "print(sys.modules['verigrad.nn.modules.loss'] is nn.losses is nn.modules.loss,\n"
        "      Conv2d is nn.Conv2d, nn.losses.__spec__.name, Parameter is nn.Parameter, _pair(3),\n"
        "      nn.modules.Linear is nn.Linear)"
    )
    assert out.split() == ["False", "True", "True", "verigrad.nn.losses", "True", "(3,", "3)", "True"]


def test_unknown_attributes_are_still_attribute_errors():
    with pytest.raises(AttributeError, match="module 'verigrad' has no attribute 'no_such_thing'"):
        verigrad.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError, match=r"module 'verigrad\.io' has no attribute 'nope'"):
        verigrad.io.nope  # noqa: B018
    assert not hasattr(verigrad, "__wrapped__")
