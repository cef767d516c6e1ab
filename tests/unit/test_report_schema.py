"""One JSON schema for every command (issue 14): the ``schema``/``version``/``file``/``arch``
header, ``max_live`` one shape in ``analyze`` and ``allocate``, and every key documented in
docs/report-schema.md — on the project's own PTX and on the shipped Triton PTX."""

from __future__ import annotations

import json
import re

import pytest

import ptxalloc
from conftest import DATA, REPO
from ptxalloc.cli import main

OWN = REPO / "examples" / "saxpy_poly.ptx"
TRITON = DATA / "explain" / "triton_matmul_sm80.ptx"
DOC = (REPO / "docs" / "report-schema.md").read_text()
# every name written in a code span of the document
DOCUMENTED = set(re.findall(r"[a-z_]+", " ".join(re.findall(r"`([^`]*)`", DOC))))


def run_json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def reports(capsys, path) -> dict[str, dict]:
    p = str(path)
    return {
        "parse": run_json(capsys, ["parse", p, "--json"]),
        "analyze": run_json(capsys, ["analyze", p, "--json", "--lines"]),
        "allocate": run_json(capsys, ["allocate", p, "-o", "/dev/null", "--json", "-"]),
        "allocate-fatpoint": run_json(capsys, ["allocate", p, "-o", "/dev/null", "--json", "-",
                                               "--allocator", "fatpoint", "--registers",
                                               "auto"]),
        "allocate-uniform": run_json(capsys, ["allocate", p, "-o", "/dev/null", "--json", "-",
                                              "--uniform"]),
        "diff": run_json(capsys, ["diff", p, p, "--json", "--registers", "32"]),
    }


@pytest.mark.parametrize("path,arch", [(OWN, "sm_90"), (TRITON, "sm_80")],
                         ids=["own", "triton"])
def test_every_command_has_the_header(capsys, path, arch):
    for command, report in reports(capsys, path).items():
        command = command.split("-")[0]
        assert list(report)[:4] == ["schema", "version", "file", "arch"], command
        assert report["schema"] == f"ptxalloc/{command}/1"
        assert report["version"] == ptxalloc.__version__
        if command == "diff":
            assert report["file"] is report["arch"] is None
            assert report["old"] == report["new"] == {"file": str(path), "arch": arch}
        else:
            assert report["file"] == str(path)
            assert report["arch"] == arch
        assert report["functions"]


@pytest.mark.parametrize("path", [OWN, TRITON], ids=["own", "triton"])
def test_max_live_has_one_shape(capsys, path):
    r = reports(capsys, path)
    analyzed = {f["name"]: f["max_live"] for f in r["analyze"]["functions"]}
    allocated = {f["name"]: f["max_live"] for f in r["allocate"]["functions"]}
    fatpoint = {f["name"]: f["max_live"] for f in r["allocate-fatpoint"]["functions"]}
    compared = {f["name"]: {"registers": f["old"]["max_live"]} for f in r["diff"]["functions"]}
    assert analyzed == allocated == fatpoint
    assert compared == {n: {"registers": m["registers"]} for n, m in analyzed.items()}
    for ml in analyzed.values():
        assert set(ml) == {"registers", "predicates"} and ml["registers"] > 0


def _keys(value, out: set[str]) -> set[str]:
    """Every key of a JSON value, nested ones included (not the keys of maps keyed by data:
    register classes, histogram buckets, value names)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if re.fullmatch(r"[a-z_]+", k):
                out.add(k)
                _keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _keys(v, out)
    return out


@pytest.mark.parametrize("path", [OWN, TRITON], ids=["own", "triton"])
def test_every_key_is_documented(capsys, path):
    for command, report in reports(capsys, path).items():
        missing = _keys(report, set()) - DOCUMENTED
        assert not missing, (command, sorted(missing))
