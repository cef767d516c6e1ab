"""The formats other tools parse (issue 14): ``allocate --format cuobjdump`` as
``cuobjdump -res-usage`` prints it, ``allocate --remarks`` as LLVM optimization records that a
YAML parser loads with LLVM's fields, and the knob warnings — on nvcc output of the project
(tests/data/diff) and on the shipped Triton PTX."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import DATA
from ptxalloc.cli import main

yaml = pytest.importorskip("yaml")

OWN = DATA / "diff" / "acc24_sm90.ptx"
TRITON = DATA / "explain" / "triton_matmul_sm80.ptx"
FUNCTION = re.compile(r"^ Function (\S+):$")
USAGE = re.compile(r"^  REG:(\d+) STACK:(\d+) SHARED:(\?|\d+) LOCAL:(\d+)")


def allocate(capsys, tmp_path, path, *options) -> tuple[str, dict]:
    rep = tmp_path / "r.json"
    rc = main(["allocate", str(path), "-o", str(tmp_path / "out.ptx"), "--json", str(rep),
               *map(str, options)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out, json.loads(rep.read_text())


def parse_res_usage(text: str) -> dict[str, tuple]:
    out, name = {}, None
    for line in text.splitlines():
        if m := FUNCTION.match(line):
            name = m.group(1)
        elif (m := USAGE.match(line)) and name:
            out[name] = m.groups()
    return out


@pytest.mark.parametrize("path,k", [(OWN, 24), (TRITON, 128)], ids=["own", "triton"])
def test_cuobjdump_format(capsys, tmp_path, path, k):
    out, rep = allocate(capsys, tmp_path, path, "--registers", k, "--format", "cuobjdump")
    lines = out.splitlines()
    assert lines[0] == "Resource usage:"
    got = parse_res_usage(out)
    assert len(lines) == 1 + 2 * len(got)
    assert got == {r["name"]: (str(r["registers"]), str(r["stack_frame_bytes"]), "?", "0")
                   for r in rep["functions"]}
    assert any(int(stack) > 0 for _, stack, _, _ in got.values())   # these budgets spill


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
    except Exception:
        return None
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(bundled) if bundled.is_file() else None


@pytest.mark.ptxas
def test_cuobjdump_format_reads_as_cuobjdump_prints_it(capsys, tmp_path):
    """The same parser reads cuobjdump's own dump of the allocated PTX assembled by ptxas; the
    stack frame agrees (ptxas adds registers of its own, so REG may differ)."""
    tool = _cuobjdump()
    if shutil.which("ptxas") is None or tool is None:
        pytest.skip("ptxas or cuobjdump is not available")
    out, rep = allocate(capsys, tmp_path, OWN, "--registers", 24, "--format", "cuobjdump")
    cubin = tmp_path / "out.cubin"
    subprocess.run(["ptxas", "-arch=sm_90", str(tmp_path / "out.ptx"), "-o", str(cubin)],
                   check=True)
    real = parse_res_usage(subprocess.run([tool, "-res-usage", str(cubin)], check=True,
                                          capture_output=True, text=True).stdout)
    ours = parse_res_usage(out)
    assert set(real) == set(ours)
    for name in ours:
        assert real[name][1] == ours[name][1]       # STACK
        assert int(real[name][0]) >= int(ours[name][0])


class _RemarkLoader(yaml.SafeLoader):
    """Reads LLVM's tagged documents as opt-viewer's optrecord.py does (!Passed, !Missed,
    !Analysis)."""


for _tag in ("!Passed", "!Missed", "!Analysis"):
    _RemarkLoader.add_constructor(
        _tag, lambda loader, node, t=_tag: {"kind": t, **loader.construct_mapping(node, deep=True)})


def remarks(capsys, tmp_path, path, *options) -> tuple[list[dict], dict]:
    target = tmp_path / "remarks.yaml"
    _, rep = allocate(capsys, tmp_path, path, "--remarks", target, *options)
    return list(yaml.load_all(target.read_text(), Loader=_RemarkLoader)), rep


def _args(doc: dict) -> dict:
    out = {}
    for arg in doc["Args"]:
        ((key, value),) = arg.items()
        if key != "String":
            out[key] = value
    return out


@pytest.mark.parametrize("path,k", [(OWN, 24), (TRITON, 128)], ids=["own", "triton"])
def test_remarks_load_as_llvm_optimization_records(capsys, tmp_path, path, k):
    docs, rep = remarks(capsys, tmp_path, path, "--registers", k)
    assert docs
    for d in docs:
        assert d["kind"] == "!Missed" and d["Pass"] == "regalloc"
        assert d["Name"] in ("SpillReloadCopies", "LoopSpillReloadCopies")
        assert d["Args"][-1]["String"] in ("generated in function", "generated in loop")
    rows = {r["name"]: r for r in rep["functions"]}
    by_function = {d["Function"]: _args(d) for d in docs if d["Name"] == "SpillReloadCopies"}
    assert set(by_function) == {n for n, r in rows.items() if r["spills"]["values"]}
    for name, args in by_function.items():
        values = rows[name]["spills"]["values"]
        for key, field in (("NumSpills", "stores"), ("NumReloads", "reloads"),
                           ("NumRemats", "recomputations")):
            assert int(args.get(key, 0)) == sum(v[field] for v in values), key
        assert float(args["TotalSpillsCost"]) >= int(args["NumSpills"])  # entry weight 1
    loops = [d for d in docs if d["Name"] == "LoopSpillReloadCopies"]
    assert loops      # both kernels spill inside their loop
    for d in loops:
        fn = by_function[d["Function"]]
        assert int(_args(d).get("NumReloads", 0)) <= int(fn.get("NumReloads", 0))


def test_remarks_carry_the_triton_source_location(capsys, tmp_path):
    docs, _ = remarks(capsys, tmp_path, TRITON, "--registers", 128)
    for d in docs:
        loc = d["DebugLoc"]
        assert loc["File"].endswith("triton_matmul.py")
        assert isinstance(loc["Line"], int) and loc["Line"] > 0
        assert isinstance(loc["Column"], int)


def test_no_spill_no_remark(capsys, tmp_path):
    docs, rep = remarks(capsys, tmp_path, DATA / "diff" / "acc16_sm90.ptx")
    assert docs == [] and not any(r["spills"]["values"] for r in rep["functions"])


@pytest.mark.parametrize("argv,warned", [
    (["--knob", "RegAllocNumNonSpillTrials=3"], "RegAllocNumNonSpillTrials"),
    (["--knob", "RegTgtCoeffA=0.3", "--allocator", "fatpoint"], "RegTgtCoeffA"),
    (["--knob", "RegAllocNumNonSpillTrials=3", "--allocator", "fatpoint"], None),
    (["--knob", "RegTgtCoeffA=0.3", "--registers", "auto"], None),
    (["--knob", "TupleReuse=0", "--allocator", "linear"], "TupleReuse"),
    (["--knob", "TupleReuse=0", "--allocator", "fatpoint"], None),
])
def test_a_knob_nothing_reads_is_a_warning(capsys, argv, warned):
    rc = main(["allocate", str(OWN), "-o", "/dev/null", *argv])
    err = capsys.readouterr().err
    assert rc == 0
    if warned:
        assert f"ptxalloc: warning: knob {warned} has no effect here" in err
    else:
        assert "knob" not in err


def test_allocate_help_lists_the_knobs_and_no_seed_numbers(capsys):
    with pytest.raises(SystemExit):
        main(["allocate", "--help"])
    out = capsys.readouterr().out
    for name in ("RegAllocThresholdForDiscardConflicts=50", "RegAllocNumNonSpillTrials=2",
                 "RegTgtCoeffC=0.3"):
        assert name in out
    assert "seed 00" not in out
