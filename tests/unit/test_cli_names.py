"""Small things users tripped on (issue 14): ``--function`` by demangled name or unique
substring (ambiguity is an error listing the matches), ``--arch sm_90a`` — on nvcc output of
the project and on the shipped Triton PTX."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import DATA
from ptxalloc.cli import main
from ptxalloc.target.sm import profile_for

OWN = DATA / "diff" / "acc24_sm90.ptx"
TRITON = DATA / "explain" / "triton_matmul_sm80.ptx"
ACC, COPY = "_Z5k_accPfPKfS1_i", "_Z6k_copyPfPKfi"
needs_cxxfilt = pytest.mark.skipif(shutil.which("c++filt") is None,
                                   reason="c++filt is not on the PATH")


def names(capsys, *argv) -> list[str]:
    assert main(["analyze", *map(str, argv), "--json"]) == 0
    return [f["name"] for f in json.loads(capsys.readouterr().out)["functions"]]


@pytest.mark.parametrize("query,want", [
    (ACC, ACC), ("k_copyPf", COPY),                  # PTX names and their substrings
    pytest.param("k_acc", ACC, marks=needs_cxxfilt),  # demangled, without parameters
    pytest.param("k_copy(float*, float const*, int)", COPY, marks=needs_cxxfilt),
    pytest.param("float const*, float const*", ACC, marks=needs_cxxfilt),
])
def test_function_by_demangled_name_or_substring(capsys, query, want):
    assert names(capsys, OWN, "--function", query) == [want]


@pytest.mark.parametrize("query", ["k_", "float const*"])
def test_an_ambiguous_substring_lists_the_matches(capsys, query):
    rc = main(["allocate", str(OWN), "--function", query, "-o", "/dev/null"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert f"'{query}' matches 2 functions: " in err and ACC in err and COPY in err


def test_an_unknown_function_lists_the_functions(capsys):
    rc = main(["analyze", str(OWN), "--function", "nope"])
    err = capsys.readouterr().err
    assert rc == 2 and "no function named 'nope'" in err and COPY in err


def test_allocate_one_function_by_substring_on_triton(capsys, tmp_path):
    rep = tmp_path / "r.json"
    assert main(["allocate", str(TRITON), "--function", "matmul", "-o", "/dev/null",
                 "--json", str(rep), "--registers", "128"]) == 0
    (row,) = json.loads(rep.read_text())["functions"]
    assert row["name"] == "matmul_kernel" and row["verified"] is True
    assert names(capsys, TRITON, "--function", "mul_ker") == ["matmul_kernel"]


@pytest.mark.parametrize("arch,profile", [("sm_90a", "sm_90"), ("sm_100f", "sm_100"),
                                          ("sm_87", "sm_86"), ("sm_90", "sm_90")])
def test_arch_suffixes_and_real_targets(capsys, arch, profile):
    assert profile_for(arch).name == profile
    assert main(["analyze", str(OWN), "--arch", arch, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["arch"] == profile
    assert main(["allocate", str(TRITON), "--arch", arch, "-o", "/dev/null",
                 "--registers", "200"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("arch", ["sm_99", "sm_90x", "compute_90"])
def test_unknown_arch_is_a_usage_error(capsys, arch):
    rc = main(["analyze", str(OWN), "--arch", arch])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown architecture" in err and err.count("\n") == 1
