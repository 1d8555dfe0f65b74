"""What the C sources share is written once: vg.h's CPU-feature checks and f16 conversion (each checked
here against the OS's flags and NumPy's conversion), the extension's files all compiled into vg_eager and
covered by its build's hash, and every C file shipped with the package."""

from __future__ import annotations

import ctypes
import fnmatch
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from verigrad.backends import cpu
from verigrad.backends.cpu import build, fastcall

HERE = build.HERE
EXTENSION = HERE / "extension"
ROOT = HERE.parents[2]
needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

# CPU-feature checks written out in a source rather than vg.h's helpers
OWN_CHECKS = re.compile(r"__builtin_cpu_supports|__get_cpuid|__cpuid|xgetbv")

HELPERS = r"""
#include <stdint.h>
#include "vg.h"
int vgt_has_avx2(void) { return vg_has_avx2(); }
int vgt_has_avx2_fma(void) { return vg_has_avx2_fma(); }
int vgt_has_avx512(void) { return vg_has_avx512(); }
int vgt_has_avx512bw(void) { return vg_has_avx512bw(); }
int vgt_has_avx512vnni(void) { return vg_has_avx512vnni(); }
int vgt_has_f16c(void) { return vg_has_f16c(); }
int vgt_has_amx_int8(void) { return vg_has_amx_int8(); }
void vgt_f16(const uint16_t *h, float *out, float *at, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        out[i] = vg_f16_to_f32(h[i]);
        at[i] = vg_f16_at((const uint8_t *)(h + i));
    }
}
"""


@pytest.fixture(scope="module")
def helpers(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VERIGRAD_CACHE", str(tmp_path_factory.mktemp("cache")))
        lib, _ = build.build("vgh-test", HELPERS)
    lib.vgt_f16.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.vgt_f16.restype = None
    return lib


def cpu_flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text()
    return set(re.search(r"^flags\s*:(.*)$", text, re.M).group(1).split())


@needs_cc
def test_the_f16_conversion_is_numpys_on_every_bit_pattern(helpers):
    bits = np.arange(1 << 16, dtype=np.uint16)
    out, at = np.empty(bits.size, np.float32), np.empty(bits.size, np.float32)
    helpers.vgt_f16(bits.ctypes.data, out.ctypes.data, at.ctypes.data, bits.size)
    want = bits.view(np.float16).astype(np.float32)  # exact, NaN payloads kept
    assert out.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert at.view(np.uint32).tolist() == want.view(np.uint32).tolist()  # little-endian bytes


@needs_cc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU's flags from Linux's /proc/cpuinfo")
def test_the_feature_checks_agree_with_the_cpus_flags(helpers):
    flags = cpu_flags()
    x86 = "sse2" in flags
    assert helpers.vgt_has_avx2() == (x86 and "avx2" in flags)
    assert helpers.vgt_has_avx2_fma() == (x86 and {"avx2", "fma"} <= flags)
    assert helpers.vgt_has_avx512() == (x86 and {"avx512f", "avx512dq"} <= flags)
    assert helpers.vgt_has_avx512bw() == (x86 and "avx512bw" in flags)
    assert helpers.vgt_has_avx512vnni() == (x86 and {"avx512_vnni", "avx512vl", "avx512bw"} <= flags)
    assert helpers.vgt_has_f16c() == (x86 and {"f16c", "avx"} <= flags)
    assert helpers.vgt_has_amx_int8() == (x86 and {"amx_tile", "amx_int8"} <= flags)


def test_cpu_feature_checks_are_vg_hs_alone():
    own = sorted(p.name for p in HERE.glob("*.[ch]") if p.name != "vg.h" and OWN_CHECKS.search(p.read_text()))
    assert not own, f"{own}: call vg.h's vg_has_* instead"


def test_every_extension_file_is_compiled_into_one_module_and_hashed():
    """The extension's build hashes the text it compiles (its files joined), not the files a source
    includes: a header in extension/ included rather than listed would change without a rebuild."""
    listed = {p.name for p in fastcall.EAGER_SOURCES} | {fastcall.SOURCE.name}
    assert {p.name for p in EXTENSION.iterdir() if p.suffix in (".c", ".h")} == listed
    for path in EXTENSION.glob("*.[ch]"):
        local = re.search(r'^\s*#\s*include\s+"', path.read_text(), re.M)
        assert not local, f"{path.name} includes a file of its own"
    assert fastcall.EAGER_SOURCES[0].suffix == ".h"  # the declarations first


def test_every_c_file_is_package_data():
    """A wheel holds what package-data names: a source or header left out builds nowhere but here."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["verigrad.backends.cpu"]
    for path in [*HERE.glob("*.[ch]"), *EXTENSION.glob("*.[ch]")]:
        name = path.relative_to(HERE).as_posix()
        assert any(fnmatch.fnmatch(name, p) and name.count("/") == p.count("/") for p in patterns), name
