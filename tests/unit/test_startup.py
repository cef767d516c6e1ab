"""Start-up (issue 16): ``--version``, and each command imports only what it needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from conftest import REPO

SRC = str(REPO / "src")


def _run(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout


def test_version_constant_matches_pyproject():
    import ptxalloc

    text = (REPO / "pyproject.toml").read_text()
    declared = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M).group(1)
    assert ptxalloc.__version__ == declared


def test_version_option_prints_the_version():
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.run([sys.executable, "-m", "ptxalloc", "--version"], env=env,
                          capture_output=True, text=True)
    import ptxalloc

    assert proc.returncode == 0
    assert proc.stdout.strip() == f"ptxalloc {ptxalloc.__version__}"


def _modules_after(statements: str) -> set[str]:
    code = (f"import sys\n{statements}\nimport json\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ptxalloc'))))")
    return set(json.loads(_run(code).splitlines()[-1]))


def test_building_the_parser_imports_no_allocator():
    loaded = _modules_after("from ptxalloc.cli import build_parser\n"
                            "build_parser().parse_args(['parse', 'x.ptx'])")
    heavy = {"ptxalloc.pipeline", "ptxalloc.alloc.api", "ptxalloc.alloc.driver",
             "ptxalloc.analysis", "ptxalloc.verify"}
    assert not loaded & heavy, sorted(loaded & heavy)


def test_import_ptxalloc_is_light_and_allocate_still_reachable():
    loaded = _modules_after("import ptxalloc")
    assert loaded == {"ptxalloc"}
    assert _run("import ptxalloc; print(callable(ptxalloc.allocate))").strip() == "True"


def test_parse_command_imports_no_allocator(tmp_path):
    loaded = _modules_after(
        "import contextlib, io\nfrom ptxalloc.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['parse', {str(REPO / 'examples' / 'saxpy_poly.ptx')!r}])")
    assert "ptxalloc.alloc.api" not in loaded and "ptxalloc.analysis" not in loaded


def test_allocator_choices_still_checked_and_listed():
    from ptxalloc.cli import build_parser

    ap = build_parser()
    assert ap.parse_args(["allocate", "f.ptx", "--allocator", "fatpoint"]).allocator == "fatpoint"
    env = dict(os.environ, PYTHONPATH=SRC)
    bad = subprocess.run([sys.executable, "-m", "ptxalloc", "allocate", "f.ptx", "--allocator",
                          "nope"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 'nope'" in bad.stderr
    shown = subprocess.run([sys.executable, "-m", "ptxalloc", "allocate", "--help"], env=env,
                           capture_output=True, text=True).stdout
    assert "briggs, fatpoint, linear" in " ".join(shown.split())
