"""Where the commands write and read (issue 11): special files are written, never replaced;
regular files are replaced whole, through symlinks, keeping their mode; ``-`` is standard
input or output everywhere; an output never destroys an input; a failed allocation writes
nothing; the exit statuses.

Nothing here touches the real /dev/null or /dev/stdout: devices, FIFOs and links to standard
output are made in tmp_path, and descriptors are handed to subprocesses."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import threading

import pytest

from conftest import DATA, REPO
from ptxalloc.cli import main
from ptxalloc.pipeline import allocate
from ptxalloc.ptx import emit_module, parse_file

SRC = DATA / "hand" / "diamond.ptx"


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("ptxalloc: "), err
    assert "Traceback" not in err
    return err


def expected_ptx(path=SRC, registers=None) -> str:
    """The allocation the CLI writes by default (ptxas's register limit as the budget)."""
    return allocate(path.read_text(), registers=registers, filename=str(path)).ptx


def cli(*argv, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "ptxalloc", *map(str, argv)], env=env,
                          timeout=120, **kw)


def no_temporaries(directory) -> None:
    assert not [p.name for p in directory.iterdir() if "ptxalloc" in p.name]


# --- special files are written, not replaced ------------------------------------------------


class FifoReader(threading.Thread):
    """Reads a FIFO to its end in the background (the writer's open blocks until then)."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.data = path, None

    def run(self):
        with open(self.path, "rb") as f:
            self.data = f.read()


@pytest.mark.parametrize("command", ["allocate -o", "allocate --json", "parse --emit"])
def test_fifo_output_is_written_through(tmp_path, capsys, command):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    reader.start()
    if command == "allocate -o":
        rc, _, err = run(capsys, "allocate", SRC, "-o", fifo)
        want = expected_ptx()
    elif command == "allocate --json":
        rc, _, err = run(capsys, "allocate", SRC, "-o", tmp_path / "o.ptx", "--json", fifo)
        want = None
    else:
        rc, _, err = run(capsys, "parse", SRC, "--emit", fifo)
        want = emit_module(parse_file(str(SRC)))
    assert rc == 0, err
    reader.join(30)
    assert not reader.is_alive()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)           # still a FIFO
    text = reader.data.decode()
    if want is None:
        assert json.loads(text)["functions"][0]["name"] == "diamond"
    else:
        assert text == want
    no_temporaries(tmp_path)


def test_character_device_output_is_written_not_replaced(tmp_path, capsys):
    """A null device made in tmp_path (root only), never the system's /dev/null."""
    dev = tmp_path / "null"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        with open(dev, "w") as f:
            f.write("probe")
    except OSError as e:
        pytest.skip(f"cannot make a character device here: {e.strerror}")
    mode = os.lstat(dev).st_mode
    rc, out, err = run(capsys, "allocate", SRC, "-o", dev, "--json", dev.with_name("r.json"))
    assert rc == 0, err
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert st.st_mode == mode
    rc, out, err = run(capsys, "parse", SRC, "--emit", dev)
    assert rc == 0 and stat.S_ISCHR(os.lstat(dev).st_mode)
    no_temporaries(tmp_path)


def test_dev_fd_process_substitution(tmp_path):
    """``-o >(cat)``: the shell passes /dev/fd/N, a pipe this process holds."""
    r, w = os.pipe()
    try:
        p = subprocess.Popen([sys.executable, "-m", "ptxalloc", "allocate", str(SRC), "-o",
                              f"/dev/fd/{w}"], pass_fds=(w,), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE,
                             env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
        os.close(w)
        w = -1
        with os.fdopen(r, "rb") as f:
            r = -1
            data = f.read()
        out, err = p.communicate(timeout=120)
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
    assert p.returncode == 0, err
    assert data.decode() == expected_ptx() and out == b""


def test_link_to_dev_stdout_writes_standard_output(tmp_path):
    """``-o`` naming /dev/stdout (here through a link in tmp_path) writes the descriptor: the
    link stays, and a file standard output was redirected to keeps its inode."""
    link = tmp_path / "stdout"
    link.symlink_to("/dev/stdout")
    redirected = tmp_path / "redirected.txt"
    with open(redirected, "w") as f:
        ino = os.fstat(f.fileno()).st_ino
        p = cli("allocate", SRC, "-o", link, stdout=f, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    assert os.readlink(link) == "/dev/stdout"
    assert os.stat(redirected).st_ino == ino
    assert redirected.read_text() == expected_ptx()
    # and it counts as standard output: with --json - both would go there
    p = cli("allocate", SRC, "-o", link, "--json", "-", capture_output=True, text=True)
    assert p.returncode == 2 and "standard output" in one_line(p.stderr)


# --- regular files: through symlinks, modes -------------------------------------------------


def test_symlink_output_replaces_the_target_not_the_link(tmp_path, capsys):
    target = tmp_path / "real" / "out.ptx"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.ptx"
    link.symlink_to(os.path.relpath(target, tmp_path))
    rc, out, err = run(capsys, "allocate", SRC, "-o", link)
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == "real/out.ptx"
    assert target.read_text() == expected_ptx()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    no_temporaries(tmp_path)
    no_temporaries(target.parent)


def test_dangling_symlink_output_creates_the_target(tmp_path, capsys):
    link = tmp_path / "report.json"
    link.symlink_to("made.json")
    rc, _, err = run(capsys, "allocate", SRC, "-o", tmp_path / "o.ptx", "--json", link)
    assert rc == 0, err
    assert link.is_symlink()
    assert json.loads((tmp_path / "made.json").read_text())["functions"][0]["name"] == "diamond"


def test_symlink_loop_is_a_one_line_error(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    rc, out, err = run(capsys, "allocate", SRC, "-o", a)
    assert rc == 2 and "cannot write" in one_line(err)
    assert a.is_symlink() and b.is_symlink()


@pytest.mark.parametrize("mode", [0o644, 0o755, 0o600])
def test_existing_file_keeps_its_mode(tmp_path, capsys, mode):
    out = tmp_path / "out.ptx"
    out.write_text("old\n")
    out.chmod(mode)
    rc, _, err = run(capsys, "allocate", SRC, "-o", out)
    assert rc == 0, err
    assert out.read_text() == expected_ptx()
    assert stat.S_IMODE(out.stat().st_mode) == mode


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_file_honours_the_umask(tmp_path, capsys, umask):
    old = os.umask(umask)
    try:
        rc, _, err = run(capsys, "allocate", SRC, "-o", tmp_path / "o.ptx", "--json",
                         tmp_path / "r.json")
        rc2, _, err2 = run(capsys, "parse", SRC, "--emit", tmp_path / "e.ptx")
    finally:
        os.umask(old)
    assert rc == rc2 == 0, err + err2
    for name in ("o.ptx", "r.json", "e.ptx"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask, name


@pytest.mark.parametrize("argv", [["allocate", SRC, "-o", ""],
                                  ["allocate", SRC, "-o", "o.ptx", "--json", ""],
                                  ["parse", SRC, "--emit", ""]])
def test_empty_output_path_is_refused(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and "empty path" in one_line(err)
    assert list(tmp_path.iterdir()) == []


def test_directory_output_is_refused(tmp_path, capsys):
    rc, out, err = run(capsys, "allocate", SRC, "-o", tmp_path)
    assert rc == 2 and "cannot write" in one_line(err)


# --- '-' --------------------------------------------------------------------------------------


def test_json_dash_writes_standard_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "allocate", SRC, "-o", "o.ptx", "--json", "-", "-v")
    assert rc == 0, err
    assert json.loads(out)["functions"][0]["name"] == "diamond"     # nothing else on stdout
    assert "ptxas info    : Used " in err
    assert (tmp_path / "o.ptx").read_text() == expected_ptx()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.ptx"]   # no file named '-'


def test_emit_dash_writes_standard_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "parse", SRC, "--emit", "-")
    assert rc == 0
    assert out == emit_module(parse_file(str(SRC)))
    assert "1 function(s)" in err                                     # the summary
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["--json", "-"], ["-o", "-", "--json", "-"]])
def test_ptx_and_json_both_on_standard_output_is_refused(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "allocate", SRC, *argv)
    assert rc == 2 and out == ""
    assert "standard output" in one_line(err)
    assert list(tmp_path.iterdir()) == []


def stdin_with(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_dash_input_reads_standard_input(capsys, monkeypatch):
    data = SRC.read_bytes()
    stdin_with(monkeypatch, data)
    rc, out, err = run(capsys, "allocate", "-")
    assert rc == 0, err
    assert out == allocate(SRC.read_text(), filename="<stdin>").ptx
    stdin_with(monkeypatch, data)
    rc, out, err = run(capsys, "parse", "-")
    assert rc == 0 and out.startswith("<stdin>: PTX 7.0 sm_80, 1 function(s)")
    stdin_with(monkeypatch, data)
    rc, out, err = run(capsys, "analyze", "-")
    assert rc == 0 and out.startswith("<stdin>: 1 function(s)")


def test_dash_input_errors_name_stdin(capsys, monkeypatch):
    stdin_with(monkeypatch, b".version 7.0\n.target sm_80\n.visible .entry k()\n{\n"
                            b"\tadd.s32 %r1, %r2, 1;\n}\n")
    rc, out, err = run(capsys, "parse", "-")
    assert rc == 2 and one_line(err).startswith("ptxalloc: <stdin>:5:")
    stdin_with(monkeypatch, b".version 7.0\n\xff\n")
    rc, out, err = run(capsys, "allocate", "-")
    assert rc == 2 and one_line(err).startswith("ptxalloc: <stdin>:2:1:")


def test_verify_reads_one_file_from_standard_input(tmp_path, capsys, monkeypatch):
    allocated = expected_ptx().encode()
    stdin_with(monkeypatch, allocated)
    rc, out, err = run(capsys, "verify", SRC, "-")
    assert rc == 0, err
    assert out.startswith("verified: ")
    stdin_with(monkeypatch, SRC.read_bytes())
    (tmp_path / "a.ptx").write_bytes(allocated)
    rc, out, err = run(capsys, "verify", "-", tmp_path / "a.ptx")
    assert rc == 0, err
    rc, out, err = run(capsys, "verify", "-", "-")
    assert rc == 2 and "only one" in one_line(err)


# --- an output never destroys an input ------------------------------------------------------


@pytest.mark.parametrize("how", ["same path", "through a symlink", "hard link"])
@pytest.mark.parametrize("command", ["allocate -o", "allocate --json", "parse --emit"])
def test_output_naming_the_input_is_refused(tmp_path, capsys, how, command):
    src = tmp_path / "in.ptx"
    src.write_bytes(SRC.read_bytes())
    out = {"same path": src, "through a symlink": tmp_path / "link.ptx",
           "hard link": tmp_path / "hard.ptx"}[how]
    if how == "through a symlink":
        out.symlink_to("in.ptx")
    elif how == "hard link":
        os.link(src, out)
    argv = {"allocate -o": ["allocate", src, "-o", out],
            "allocate --json": ["allocate", src, "-o", tmp_path / "o.ptx", "--json", out],
            "parse --emit": ["parse", src, "--emit", out]}[command]
    rc, stdout, err = run(capsys, *argv)
    assert rc == 2 and stdout == ""
    assert "input" in one_line(err)
    assert src.read_bytes() == SRC.read_bytes()
    assert not (tmp_path / "o.ptx").exists()


def test_output_naming_redirected_standard_input_is_refused(tmp_path):
    src = tmp_path / "in.ptx"
    src.write_bytes(SRC.read_bytes())
    with open(src, "rb") as f:
        p = cli("allocate", "-", "-o", src, stdin=f, capture_output=True, text=True)
    assert p.returncode == 2 and "<stdin>" in p.stderr
    assert src.read_bytes() == SRC.read_bytes()


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys):
    out = tmp_path / "o"
    out.write_text("keep\n")
    rc, _, err = run(capsys, "allocate", SRC, "-o", out, "--json", out)
    assert rc == 2 and "same file" in one_line(err)
    assert out.read_text() == "keep\n"


# --- a failed allocation writes nothing -----------------------------------------------------


def _break_the_emitter(monkeypatch) -> None:
    """An emitter bug: the value stored at the end comes out of another register (the checker
    must refute it)."""
    import ptxalloc.pipeline as pipeline
    real = pipeline.emit_function

    def wrong(fn, name):
        text = real(fn, name)
        m = re.search(r"(st\.global\.u32\s+\[[^\]]+\], )%R(\d+);", text)
        assert m
        other = "%R1" if m.group(2) != "1" else "%R0"
        return text.replace(m.group(0), m.group(1) + other + ";", 1)
    monkeypatch.setattr(pipeline, "emit_function", wrong)


def test_refuted_allocation_is_an_internal_error_and_writes_nothing(tmp_path, capsys,
                                                                    monkeypatch):
    _break_the_emitter(monkeypatch)
    out, rep = tmp_path / "o.ptx", tmp_path / "r.json"
    rep.write_text("previous\n")
    rc, stdout, err = run(capsys, "allocate", SRC, "-o", out, "--json", rep)
    assert rc == 1 and stdout == ""
    assert one_line(err).startswith("ptxalloc: internal error: the allocation failed its "
                                    "proof; no output written; please report: ")
    assert "diamond" in err
    assert not out.exists() and rep.read_text() == "previous\n"
    no_temporaries(tmp_path)


def test_no_verify_never_writes_an_allocation_known_over_budget(tmp_path, capsys,
                                                                  monkeypatch):
    """Without the checker the allocator still checks what it knows (its register count
    against the budget); a bug there aborts with an internal error and no output."""
    import ptxalloc.alloc.driver as driver
    monkeypatch.setattr(driver, "high_water", lambda problem, start: 99)
    out = tmp_path / "o.ptx"
    rc, stdout, err = run(capsys, "allocate", SRC, "-o", out, "--no-verify", "--registers", "15")
    assert rc == 3 and stdout == ""
    assert one_line(err).startswith("ptxalloc: internal error: function 'diamond': ")
    assert not out.exists()
    rc, stdout, err = run(capsys, "allocate", SRC, "--no-verify", "--registers", "15")
    assert rc == 3 and stdout == ""


def test_second_output_failing_says_the_first_was_written(tmp_path, capsys):
    out = tmp_path / "o.ptx"
    rc, stdout, err = run(capsys, "allocate", SRC, "-o", out, "--json",
                          tmp_path / "missing" / "r.json")
    assert rc == 2
    assert "cannot write" in one_line(err) and f"already written: {out}" in err


# --- exit statuses and keeping what worked --------------------------------------------------


@pytest.mark.parametrize("command", ["parse", "analyze", "allocate", "verify"])
def test_help_documents_the_exit_statuses(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for fragment in ("0 success", "2 bad input or usage", "3 internal error",
                     "130 interrupted", "1 refuted"):
        assert fragment in text, fragment


def test_closed_standard_output_is_not_an_error(tmp_path):
    """``ptxalloc allocate f.ptx | head``: the reader goes away; exit 0, nothing on stderr."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = cli("allocate", DATA / "pressure_sm80.ptx", "--registers", "64", stdout=w,
                stderr=subprocess.PIPE, text=True)
    finally:
        os.close(w)
    assert p.returncode == 0 and p.stderr == ""


def test_own_descriptor_names():
    from ptxalloc.files import own_descriptor
    assert own_descriptor("/dev/stdout") == 1
    assert own_descriptor("/dev/stderr") == 2
    assert own_descriptor("/dev/fd/7") == 7
    assert own_descriptor(f"/proc/{os.getpid()}/fd/5") == 5
    assert own_descriptor("/proc/self/fd/9") == 9
    assert own_descriptor(f"/proc/{os.getpid() + 1}/fd/5") is None
    assert own_descriptor("/tmp/stdout") is None
