"""Start-up (issue 16): ``--version``, and each command imports only what it needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

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


def test_analyze_command_imports_no_allocator():
    """analyze reads the budgets (target.register_limit) without importing the pipeline and
    the allocator behind it (about 5 ms of a small file's analyze, issue 16)."""
    loaded = _modules_after(
        "import contextlib, io\nfrom ptxalloc.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['analyze', {str(REPO / 'examples' / 'saxpy_poly.ptx')!r}])")
    assert "ptxalloc.analysis" in loaded
    assert not loaded & {"ptxalloc.pipeline", "ptxalloc.alloc.driver", "ptxalloc.alloc.api"}


def test_parse_command_imports_no_dataclasses():
    """dataclasses (with inspect) cost parse's start-up some 5 ms (issue 16)."""
    out = _run("import contextlib, io, sys\nfrom ptxalloc.cli import main\n"
               "with contextlib.redirect_stdout(io.StringIO()):\n"
               f"    main(['parse', {str(REPO / 'examples' / 'saxpy_poly.ptx')!r}])\n"
               "print('dataclasses' in sys.modules)")
    assert out.strip().splitlines()[-1] == "False"


def test_module_records_compare_and_show_by_field():
    from ptxalloc.ir.module import Function, Module, Param

    a, b = Param("x", "param", ".u32", 4), Param("x", "param", ".u32", 4)
    assert a == b and a != Param("y", "param", ".u32", 4)
    assert repr(a) == ("Param(name='x', space='param', ptype='.u32', size=4, align=0, vec=0, "
                       "is_return=False, vid=-1)")
    f = Function("k", "entry", ".entry k()", params=[a])
    assert f == f and f.copy().params == f.params and Function("k", "entry", "h").body == []
    assert Module().items == [] and Module() == Module() and Module().items is not Module().items


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


def test_knob_table_is_built_only_for_the_help():
    """``allocate``'s epilog (the knob table) imports the knob registry and textwrap: built
    when the help is shown, not on every run (issue 16)."""
    out = _run("import sys\nfrom ptxalloc.cli import build_parser\n"
               "build_parser().parse_args(['allocate', 'x.ptx'])\n"
               "print('textwrap' in sys.modules, 'ptxalloc.alloc.knobs' in sys.modules)")
    assert out.split() == ["False", "False"]
    env = dict(os.environ, PYTHONPATH=SRC)
    shown = subprocess.run([sys.executable, "-m", "ptxalloc", "allocate", "--help"], env=env,
                           capture_output=True, text=True).stdout
    assert "RegAllocThresholdForDiscardConflicts=50 [fatpoint]" in shown
    assert "exit status: 0 success" in shown


def test_version_imports_only_the_command_line(tmp_path):
    """``--version`` loads the CLI module and nothing of the allocator, the parser or json."""
    loaded = _modules_after(
        "import contextlib, io\nfrom ptxalloc.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--version'])\n    except SystemExit:\n        pass")
    assert loaded <= {"ptxalloc", "ptxalloc.cli", "ptxalloc.errors"}, sorted(loaded)


def test_allocate_of_a_small_file_imports_only_what_it_runs(tmp_path):
    """A default ``allocate`` (briggs, the checker, no pass records but recomputation's and the
    schedule's) imports no other allocator, no validator of a pass that did not run, no
    report it does not write, and no dataclasses, inspect or json (issue 16: each costs
    start-up on every small file)."""
    out = tmp_path / "out.ptx"
    code = ("import contextlib, io, json, sys\nbefore = set(sys.modules)\n"
            "from ptxalloc.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    code = main(['allocate', {str(REPO / 'examples' / 'saxpy_poly.ptx')!r}, "
            f"'-o', {str(out)!r}])\n"
            "print(json.dumps([code, sorted(set(sys.modules) - before)]))")
    code, loaded = json.loads(_run(code).splitlines()[-1])
    assert code == 0 and "//@ptxalloc" in out.read_text()
    assert {"ptxalloc.alloc.briggs", "ptxalloc.verify.checker"} <= set(loaded)
    unwanted = {"dataclasses", "inspect", "json", "ptxalloc.alloc.fatpoint",
                "ptxalloc.alloc.linear", "ptxalloc.alloc.optimal", "ptxalloc.verify.hoist",
                "ptxalloc.verify.promote", "ptxalloc.verify.induction", "ptxalloc.ir.induction",
                "ptxalloc.report.allocation_report", "ptxalloc.target.budget"}
    assert not unwanted & set(loaded), sorted(unwanted & set(loaded))


def test_record_prefixes_the_checker_reads_are_the_ones_written():
    """The matcher reads the pre-passes' record prefixes from verify/header.py, so that the
    checker imports neither ptxalloc.ir.induction nor ptxalloc.ir.recompute (issue 16): they
    are the prefixes those modules write."""
    from ptxalloc.ir import induction, recompute
    from ptxalloc.verify import header

    assert (header.INDUCTION, header.RECOMPUTE, header.DEAD) == (
        induction.INDUCTION, recompute.RECOMPUTE, recompute.DEAD)


def test_verify_of_a_function_without_records_imports_no_pass_validator(tmp_path):
    """``verify`` of an allocation whose header names no recomputation imports neither the
    recomputation's validator nor its records (issue 16); one that names it does, and proves."""
    plain = str(REPO / "tests" / "data" / "hand" / "diamond.ptx")
    recomputed = str(REPO / "examples" / "saxpy_poly.ptx")
    loaded = []
    for src in (plain, recomputed):
        out = tmp_path / "out.ptx"
        assert _command("allocate", src, "-o", str(out)).returncode == 0
        code = ("import contextlib, io, json, sys\nfrom ptxalloc.cli import main\n"
                "with contextlib.redirect_stdout(io.StringIO()):\n"
                f"    v = main(['verify', {src!r}, {str(out)!r}])\n"
                "print(json.dumps([v, 'ptxalloc.verify.recompute' in sys.modules,\n"
                "                  'ptxalloc.ir.recompute' in sys.modules]))")
        loaded.append((json.loads(_run(code).splitlines()[-1]), "recompute=1" in out.read_text()))
    assert loaded == [([0, False, False], False), ([0, True, True], True)]


def test_pass_validators_still_run_when_their_records_are_present(tmp_path):
    """The validators imported on demand are imported, and prove, when a header names their
    pass (``--knob hoist=1`` on a loop with an invariant: the hoist validator replays the
    records, in allocate's own proof and in ``verify``)."""
    out = tmp_path / "out.ptx"
    src = str(REPO / "tests" / "data" / "hand" / "hoist_loop.ptx")
    code = ("import contextlib, io, json, sys\nfrom ptxalloc.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    a = main(['allocate', {src!r}, '--knob', 'hoist=1', '-o', {str(out)!r}])\n"
            "    loaded = 'ptxalloc.verify.hoist' in sys.modules\n"
            f"    v = main(['verify', {src!r}, {str(out)!r}])\n"
            "print(json.dumps([a, v, loaded]))")
    assert json.loads(_run(code).splitlines()[-1]) == [0, 0, True]
    assert "hoist=1" in out.read_text() and "//@hoist " in out.read_text()


def test_startup_bench_times_each_tree(tmp_path):
    """bench/startup.py runs the command from each tree in turn and prints a median per tree."""
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "startup.py"), "--src", SRC,
                           "--runs", "2", "--", "--version"], env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    row = [ln for ln in proc.stdout.splitlines() if SRC in ln]
    assert len(row) == 1 and float(row[0].split("median")[1].split()[0]) > 0


def test_startup_bench_wants_a_place_for_the_file_with_files():
    """``--files N`` runs the command on each small file: a command without ``{}`` is refused
    before anything runs."""
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "startup.py"), "--files", "2",
                           "--", "parse", "x.ptx"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "write {} in the command" in proc.stderr


@pytest.mark.corpus
def test_startup_bench_times_the_small_files_of_the_sample():
    """``--files N``: the small files of whole_process's sample (ptxas under 50 ms: not
    renderer.ptx nor matrix_free, which the sample always takes), one median per tree."""
    from conftest import corpus_root

    if corpus_root() is None:
        pytest.skip("../shared/corpus is absent")
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from startup import small_files
    finally:
        sys.path.remove(str(REPO / "bench"))
    files = small_files(4)
    assert 1 <= len(files) <= 4 and all(f.endswith(".ptx") for f in files)
    assert not any(f.endswith(("renderer.ptx", "vector_01.1.sm_80.ptx")) for f in files)
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "startup.py"), "--src", SRC,
                           "--runs", "1", "--files", "4", "--", "parse", "{}"], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"on {len(files)} small files" in proc.stdout
    row = [ln for ln in proc.stdout.splitlines() if SRC in ln]
    assert len(row) == 1 and float(row[0].split("median")[1].split()[0]) > 0


def test_allocate_bench_times_ptxas_in_cpu_seconds():
    """bench/allocate.py's ptxas figure is the child's CPU time: positive for a file ptxas
    compiles (of the order of its wall time), None for a file it refuses."""
    import pytest

    from ptxalloc import ptxas
    if not ptxas.available():
        pytest.skip("ptxas is not on the PATH")
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from common import ptxas_cpu_seconds
    finally:
        sys.path.remove(str(REPO / "bench"))
    path = str(REPO / "examples" / "saxpy_poly.ptx")
    cpu = ptxas_cpu_seconds(path, "sm_90", repeat=1)
    assert cpu is not None and 0 < cpu < ptxas.assemble_file(path, "sm_90").seconds * 5
    assert ptxas_cpu_seconds(str(REPO / "README.md"), "sm_90", repeat=1) is None


def _subparser(ap, name):
    return ap._subparsers._group_actions[0].choices[name]


def test_one_command_parser_is_the_whole_parsers_command(capsys):
    """``main`` builds only the named command's parser (issue 16): its help, its defaults and
    its refusals are the whole parser's, command by command; ``COMMANDS`` lists every
    subcommand in order."""
    import pytest

    from ptxalloc.cli import COMMANDS, build_parser
    whole = build_parser()
    assert tuple(whole._subparsers._group_actions[0].choices) == COMMANDS
    for name in COMMANDS:
        alone = build_parser(name)
        assert list(alone._subparsers._group_actions[0].choices) == [name]
        assert _subparser(alone, name).format_help() == _subparser(whole, name).format_help()
        args = [name] + ["x.ptx"] * (2 if name in ("diff", "verify") else 1)
        args += {"batch": ["--out", "r.jsonl"], "graph": ["--function", "f"]}.get(name, [])
        assert alone.parse_args(args) == whole.parse_args(args)
        # refused by the top-level parser (its usage lists every command), then by the
        # command's own (a required argument missing)
        for wrong in (args + ["--no-such-option"], [name]):
            refusals = []
            for parser in (alone, whole):
                with pytest.raises(SystemExit) as exit_:
                    parser.parse_args(wrong)
                assert exit_.value.code == 2
                refusals.append(capsys.readouterr().err)
            assert refusals[0] == refusals[1]
            assert "error: " in refusals[0]


def test_main_builds_only_the_command_it_runs(monkeypatch, capsys):
    """``ptxalloc allocate ...`` builds the allocate parser alone; an unknown command, the
    top-level help and ``--version`` get the whole parser (its list of commands)."""
    import pytest

    from ptxalloc import cli
    built = []
    real = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda only=None: built.append(only) or real(only))
    assert cli.main(["verify", "missing.ptx", "missing2.ptx"]) == 2
    for argv in (["alocate", "x.ptx"], ["--help"], ["--version"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
    err = capsys.readouterr().err
    assert built == ["verify", None, None, None]
    assert "invalid choice: 'alocate'" in err and "allocate" in err


def test_allocate_of_a_leaf_that_spills_nothing_imports_no_spill_machinery(tmp_path):
    """A leaf kernel allocated without spilling, at MaxLive, imports none of what runs only
    when something spills (relief, splitting, shared-memory slots, slot promotion), a
    function calls (saves) or compaction stays above MaxLive (block_split); a file under a
    budget that spills imports the spill modules and is proven."""
    out = tmp_path / "out.ptx"
    src = str(REPO / "tests" / "data" / "hand" / "diamond.ptx")
    spills = str(REPO / "tests" / "data" / "hand" / "give_way.ptx")
    spill_only = ["ptxalloc.alloc.block_split", "ptxalloc.alloc.relief", "ptxalloc.spill.split",
                  "ptxalloc.spill.shared", "ptxalloc.spill.promote", "ptxalloc.spill.saves"]
    code = ("import contextlib, io, json, sys\nfrom ptxalloc.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    a = main(['allocate', {src!r}, '-o', {str(out)!r}])\n"
            f"    first = [m in sys.modules for m in {spill_only!r}]\n"
            f"    b = main(['allocate', {spills!r}, '--registers', '4', '-o', {str(out)!r}])\n"
            "print(json.dumps([a, first, b, 'ptxalloc.spill.split' in sys.modules]))")
    a, first, b, split_loaded = json.loads(_run(code).splitlines()[-1])
    assert a == 0 and not any(first), [m for m, got in zip(spill_only, first) if got]
    assert b == 0 and split_loaded and "spill=" in out.read_text()


def _command(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-m", "ptxalloc", *args], env=env, stdout=stdout,
                          stderr=subprocess.PIPE, text=True)


def test_commands_ending_the_process_early_print_everything(tmp_path):
    """parse, analyze, allocate and verify end the process without freeing what they built
    (``cli._exit_without_teardown``): what they print, to a pipe or a file, and the files
    they write are whole, and the exit status is theirs."""
    from ptxalloc import cli

    example = str(REPO / "examples" / "saxpy_poly.ptx")
    out = tmp_path / "out.ptx"
    report = tmp_path / "report.json"
    # in process (no early exit) and as a program give the same text
    import contextlib
    import io

    for args in (["analyze", example, "--peak-values", "all"], ["parse", example]):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert cli.main(list(args)) == 0
        proc = _command(*args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == buf.getvalue()
        with open(tmp_path / "printed.txt", "w") as f:         # to a file, not a pipe
            assert _command(*args, stdout=f).returncode == 0
        assert (tmp_path / "printed.txt").read_text() == buf.getvalue()
    proc = _command("allocate", example, "-o", str(out), "--json", str(report), "-v")
    assert proc.returncode == 0, proc.stderr
    assert "ptxas info" in proc.stdout
    assert out.read_text().rstrip().endswith("}")
    assert json.loads(report.read_text())["functions"]
    proc = _command("verify", example, str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    # an error keeps its status and message
    proc = _command("analyze", str(tmp_path / "missing.ptx"))
    assert proc.returncode == 2
    assert "cannot read" in proc.stderr


@pytest.mark.parametrize("command", ["parse", "analyze", "allocate", "verify", "report"])
def test_the_early_exit_skips_the_interpreters_teardown(tmp_path, command):
    """parse, analyze, allocate and verify end the process before the interpreter's teardown
    (``exit_fast``: no ``atexit`` handler runs), with their own status; report, which does
    not set it, ends the usual way and runs it."""
    example = str(REPO / "examples" / "saxpy_poly.ptx")
    out = tmp_path / "out.ptx"
    if command == "verify":
        assert _command("allocate", example, "-o", str(out)).returncode == 0
    args = {"parse": [example], "analyze": [example], "allocate": [example, "-o", str(out)],
            "verify": [example, str(out)],
            "report": [example, "-o", str(tmp_path / "r.html"), "--no-ptxas"]}[command]
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('TEARDOWN', file=sys.stderr))\n"
            f"sys.argv = ['ptxalloc', {command!r}] + {args!r}\n"
            "from ptxalloc.cli import main\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=SRC),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    assert ("TEARDOWN" in proc.stderr) is (command == "report"), proc.stderr


@pytest.mark.parametrize("command", ["allocate", "report"])
def test_the_early_exit_commands_run_without_the_cyclic_collector(tmp_path, command):
    """The program's allocate (like parse, analyze and verify) runs its command with the cyclic
    garbage collector off (issue 16: 1 ms of a small file's start-up), in process too once run
    as the program; report, which ends the usual way, keeps it; a call of ``main`` with
    arguments (a library caller, the tests) leaves it alone."""
    example = str(REPO / "examples" / "saxpy_poly.ptx")
    args = {"allocate": [example, "-o", str(tmp_path / "out.ptx")],
            "report": [example, "-o", str(tmp_path / "r.html"), "--no-ptxas"]}[command]
    code = ("import gc, sys\nfrom ptxalloc import cli\n"
            "real = cli._exit_without_teardown\n"
            "def ending(code):\n"
            "    print('COLLECTOR', gc.isenabled(), file=sys.stderr)\n"
            "    real(code)\n"
            "cli._exit_without_teardown = ending\n"
            f"assert cli.main([{command!r}] + {args!r}) == 0 and gc.isenabled()\n"
            f"sys.argv = ['ptxalloc', {command!r}] + {args!r}\n"
            "cli.main()\n"
            "print('COLLECTOR', gc.isenabled(), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=SRC),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"COLLECTOR {command == 'report'}" in proc.stderr, proc.stderr


def test_a_closed_pipe_ends_an_early_exit_quietly():
    """``ptxalloc analyze F | head -1``: the reader goes away; no traceback, status 0."""
    env = dict(os.environ, PYTHONPATH=SRC)
    example = str(REPO / "tests" / "data" / "triton" / "attn_bwd_d64.ptx")   # 200 KB printed
    proc = subprocess.Popen([sys.executable, "-m", "ptxalloc", "analyze", example, "--lines"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 0
    assert first.startswith(example.encode())
    assert "Traceback" not in err and "Exception" not in err
