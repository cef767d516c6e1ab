"""The files a command reads and writes (issue 11): the one way ptxalloc reads its PTX input and
writes an output (allocated PTX, re-emitted PTX, a JSON report).

* ``-`` is standard input as an input and standard output as an output.
* A regular file (also one reached through symlinks: the link's target is replaced, the link
  kept) is written whole or not at all: into a temporary file beside it, renamed over it. An
  existing file keeps its mode (and, where permitted, its owner); a new one gets ``0666`` less
  the umask, like any file a program creates.
* Anything else is written directly, never replaced: ``/dev/stdout``, ``/dev/stderr``,
  ``/dev/fd/N`` and ``/proc/self/fd/N`` (process substitution) write to the descriptor this
  process already holds; character devices (``/dev/null``), FIFOs and sockets are opened and
  written.
* :func:`check_paths` refuses, before any work is done, an output that names an input file
  (compared by file identity, so through symlinks and hard links), two outputs naming the same
  file, and two outputs both going to standard output.
"""

from __future__ import annotations

import os
import re
import stat
import sys

from .errors import UsageError

STDIO = "-"
STDIN_NAME = "<stdin>"
STDOUT_NAME = "<stdout>"

#: paths that name a descriptor of this process: /dev/stdout, /dev/fd/N, /proc/self/fd/N (a
#: text, compiled by re the first time a path under /dev or /proc is seen: start-up, issue 16)
_OWN_FD = (r"/dev/(?:(stdin)|(stdout)|(stderr)|fd/(\d+))|"
           r"/proc/(?:self|thread-self|(\d+))/fd/(\d+)")
_MAX_LINKS = 40


def input_name(path: str) -> str:
    """How errors name an input: ``<stdin>`` for ``-``."""
    return STDIN_NAME if path == STDIO else path


def read_input(path: str) -> tuple[bytes, str]:
    """The bytes of an input (standard input for ``-``) and the name errors give it."""
    name = input_name(path)
    try:
        if path == STDIO:
            return sys.stdin.buffer.read(), name
        with open(path, "rb") as f:
            return f.read(), name
    except OSError as e:
        raise UsageError(f"{name}: cannot read: {e.strerror or e}") from None


def own_descriptor(path: str) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout`` is 1), following
    the symlinks of its last component; None for any other path."""
    p = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        m = re.fullmatch(_OWN_FD, p) if p.startswith(("/dev/", "/proc/")) else None
        if m:
            stdin, stdout, stderr, dev_fd, pid, proc_fd = m.groups()
            if pid is not None and int(pid) != os.getpid():
                return None
            if stdin or stdout or stderr:
                return 0 if stdin else 1 if stdout else 2
            return int(dev_fd if dev_fd is not None else proc_fd)
        try:
            target = os.readlink(p)
        except OSError:
            return None
        p = os.path.normpath(os.path.join(os.path.dirname(p), target))
    return None


def _goes_to_stdout(path: str) -> bool:
    return path == STDIO or own_descriptor(path) == 1


def _regular_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the regular file ``path`` names (``-``: standard input), or None."""
    try:
        st = os.fstat(0) if path == STDIO else os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def check_paths(inputs: list[str], outputs: dict[str, str | None]) -> None:
    """Refuse outputs that would destroy an input or each other. ``outputs`` maps an option
    (``-o``, ``--json``) to its path, None when not given; call it before any work is done."""
    given = {opt: p for opt, p in outputs.items() if p is not None}
    for opt, p in given.items():
        if not p:
            raise UsageError(f"{opt} names no file (an empty path); '-' is standard output")
    to_stdout = [opt for opt, p in given.items() if _goes_to_stdout(p)]
    if len(to_stdout) > 1:
        raise UsageError(f"{' and '.join(to_stdout)} both write to standard output; "
                         f"send one of them to a file")
    ins = {}
    for path in inputs:
        ident = _regular_identity(path)
        if ident is not None:
            ins[ident] = input_name(path)
    seen: dict[tuple[int, int], str] = {}
    for opt, path in given.items():
        if path == STDIO:
            continue
        ident = _regular_identity(path)
        if ident is None:
            continue
        if ident in ins:
            raise UsageError(f"{opt} {path} is the input file {ins[ident]}; writing it would "
                             f"destroy the input")
        if ident in seen:
            raise UsageError(f"{seen[ident]} and {opt} name the same file {path}")
        seen[ident] = opt


def write_output(path: str, text: str | bytes) -> None:
    """Write ``text`` (or bytes: a PNG) to ``path`` (``-``: standard output) as the module
    docstring says; raises UsageError (``path: cannot write: why``) when it cannot."""
    name = STDOUT_NAME if path == STDIO else path
    try:
        fd = 1 if path == STDIO else own_descriptor(path)
        if fd is not None:
            _write_descriptor(fd, text)
            return
        target = os.path.realpath(path)
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{name}: cannot write: it is a directory")
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(target, "wb") as f:      # a device, FIFO or socket
                f.write(_encoded(text))
            return
        _replace(target, text, st)
    except BrokenPipeError:
        raise
    except OSError as e:
        raise UsageError(f"{name}: cannot write: {e.strerror or e}") from None


def write_outputs(outputs: list[tuple[str, str]]) -> None:
    """Write several outputs in turn, files first and standard output last (a reader that goes
    away early, ``| head``, then costs no file); when one fails after others were written, the
    error says which were written."""
    done: list[str] = []
    for path, text in sorted(outputs, key=lambda o: _goes_to_stdout(o[0])):
        try:
            write_output(path, text)
        except UsageError as e:
            if not done:
                raise
            names = ", ".join(STDOUT_NAME if p == STDIO else p for p in done)
            raise UsageError(f"{e} (already written: {names})") from None
        done.append(path)


def _encoded(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def _write_descriptor(fd: int, text: str | bytes) -> None:
    """Write to a descriptor this process holds; 1 and 2 through Python's streams, so that the
    output stays in order with what else is printed there."""
    if fd in (1, 2):
        stream = sys.stdout if fd == 1 else sys.stderr
        if isinstance(text, bytes):
            stream.flush()
            stream.buffer.write(text)
            stream.buffer.flush()
        else:
            stream.write(text)
        stream.flush()
        return
    data = _encoded(text)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _replace(target: str, text: str | bytes, st: os.stat_result | None) -> None:
    """Write a regular file whole or not at all: a temporary beside it, renamed over it."""
    directory, base = os.path.split(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = os.path.join(directory, f".{base}.{os.urandom(4).hex()}.ptxalloc-tmp")
        try:
            # a new file: 0666 less the umask (the kernel applies it); an existing one: its mode
            fd = os.open(tmp, flags, 0o666 if st is None else 0o600)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            if st is not None:
                if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                    try:
                        os.fchown(fd, st.st_uid, st.st_gid)
                    except OSError:
                        pass
                os.fchmod(fd, stat.S_IMODE(st.st_mode))     # after fchown, which clears setuid
            f.write(_encoded(text))
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
