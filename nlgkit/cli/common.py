"""What every subcommand shares: one-line errors, never a traceback."""

from __future__ import annotations

import functools
import io
import os
import re
import signal
import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from nlgkit.core.errors import DataError, NlgkitError

if TYPE_CHECKING:
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])

# Commands whose work is done once their output is written (an atomic file, or stdout): see end_at_once.
ENDS_AT_ONCE = frozenset({"translate", "caption"})

ReportTime = Annotated[bool, typer.Option(help="End with a line on stderr: how many inputs were done in how many "
                                               "seconds (from the loaded model to the last output written), their "
                                               "rate, and the model's loading time")]


@contextmanager
def progress_bar(description: str, show: bool = True,
                 console: Console | None = None) -> Iterator[Callable[[int, int], None]]:
    """A transient rich progress bar on stderr, shown on a terminal only (a log or a pipe gets no bar), and the
    ``(done, total)`` callback that moves it; what is printed to stderr meanwhile appears above it. Standard output
    is left alone (rich would move its lines to stderr, a pipe's too): a command that writes to a terminal's stdout
    while the bar is drawn asks for none."""
    # lazy: CLI start-up
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = console or Console(stderr=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TimeRemainingColumn(), console=console, disable=not (show and console.is_terminal),
                        transient=True, redirect_stdout=False)
    with progress:
        task = progress.add_task(description, total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


def writes_to_terminal(output: Path | None) -> bool:
    """Whether ``output`` (stdout when None) is a terminal: a progress bar drawn beside what it writes would garble
    both. ``/dev/stdout`` is asked through the process's own descriptor; a named terminal, by opening it."""
    # lazy: CLI start-up
    from nlgkit.core.io import own_descriptor

    if output is None:
        return sys.stdout is not None and sys.stdout.isatty()  # (None: started with stdout closed, no terminal)
    if (descriptor := own_descriptor(output)) is not None:
        return os.isatty(descriptor)
    if not output.is_char_device():  # (a file or a pipe; /dev/null is a character device, not a terminal)
        return False
    descriptor = os.open(output, os.O_WRONLY | os.O_NOCTTY)
    try:
        return os.isatty(descriptor)
    finally:
        os.close(descriptor)


def writable_output(value: Any) -> Any:
    """The callback of an ``--output FILE`` option: a file that cannot be written is a usage error as the option is
    parsed, before a command of minutes or hours whose write comes last. An empty path is refused as one (a
    ``str`` option's; a ``Path`` option has made ``""`` into ``.`` before its callback: see :func:`output_path`)."""
    # lazy: CLI start-up
    from nlgkit.core.io import check_output

    if isinstance(value, str) and not value.strip():
        raise typer.BadParameter(f"empty path {value!r}")
    try:
        check_output(value)
    except DataError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def output_path(value: str) -> Path:
    """The ``parser`` of a ``Path`` option naming an output file (``typer.Option(parser=output_path)``): the text
    as typed, so that ``--output ""`` is refused as an empty path, where pathlib would make it ``.`` and the
    message would call the current folder a directory that cannot be written."""
    if not value.strip():
        raise typer.BadParameter(f"empty path {value!r}")
    return Path(value)


def time_report(verb: str, count: int, unit: str, seconds: float, loading_seconds: float) -> str:
    """``--report-time``'s line, e.g. "translated 1000 lines in 8.21 s (121.8 lines/s); model loaded in 1.52 s"."""
    rate = f"{count / seconds:.1f}" if seconds > 0 else "–"
    return (f"{verb} {count} {unit} in {seconds:.2f} s ({rate} {unit}/s); model loaded in {loading_seconds:.2f} s")


def end_at_once(code: int, argv: Sequence[str]) -> None:
    """After ``translate`` or ``caption`` ran as a command (``argv`` as typed), end the process now, output
    flushed, instead of returning: the interpreter's teardown of torch and spaCy (module finalisation, garbage
    collection) takes about half a second, a fifth of a one-line translation. Those commands have closed every
    file they write by then. Any other command returns, and so does an in-process call (tests)."""
    words = [word for word in argv if not word.startswith("-")]
    if not words or words[0] not in ENDS_AT_ONCE:
        return
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with it closed (>&-, 2>&-): nothing to flush
            continue
        try:
            stream.flush()
        except (BrokenPipeError, OSError, ValueError):  # a closed pipe has nothing left to receive
            code = code or 1
    os._exit(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a cluster scheduler's time limit), raised where the command is, as Ctrl-C is: each
    ``with`` block that stages an output (a prepared directory, an atomic file) then removes its temporary sibling,
    instead of the default action ending the process at once and leaving it behind. A KeyboardInterrupt, so that
    what treats Ctrl-C as "stop now" (click, a data loader's workers) treats it alike."""


def terminate_as_interrupt() -> None:
    """Make SIGTERM raise :class:`Terminated` in the console command. Training replaces it while its loop runs
    (it stops between updates and saves); a SIGTERM the process was started ignoring stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_terminated)


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


def warn(message: str) -> None:
    """``warning: message`` on stderr: something the user should know while the command goes on."""
    typer.echo(f"warning: {message}", err=True)


def report_error(message: str) -> None:
    """``error: message`` on stderr for one input that failed while the others go on (the exit code says so at the
    end); :func:`fail` is for an error that ends the command."""
    typer.echo(f"error: {message}", err=True)


def log_line(line: str) -> None:
    """A progress line on stderr, so that stdout keeps only the command's output."""
    typer.echo(line, err=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on one line to stderr and return the Exit to raise."""
    report_error(" ".join(str(message).split()))
    return typer.Exit(code)


def handle_errors(command: F) -> F:
    """Turn user errors (NlgkitError, files that cannot be read or written, Ctrl-C) into a one-line message and exit
    code. While the command runs, standard input and output are :func:`standard_streams`: a closed one, or a write
    that standard output refuses, is such an error too."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with standard_streams():
                return command(*args, **kwargs)
        except NlgkitError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except Terminated:
            raise fail("terminated", 128 + signal.SIGTERM) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except BrokenPipeError:
            sys.stderr.close()
            raise typer.Exit(1) from None
        except OSError as exc:  # a missing or unreadable file, a full disk, a read-only file system, …
            raise fail(_os_error_message(exc)) from None
        # a compressed stream cut short (an EOFError) or corrupt, read where no reader named the file: one line, never
        # click's "interrupted" (exit 130), its word for an EOFError that reaches it
        except EOFError as exc:
            raise fail(f"unexpected end of input ({_reason(exc)})") from None
        except zlib.error as exc:
            raise fail(f"corrupt compressed input ({_reason(exc)})") from None
        except (MemoryError, RuntimeError) as exc:  # torch's allocators raise RuntimeErrors (OutOfMemoryError on a GPU)
            if not _out_of_memory(exc):
                raise
            raise fail(f"out of memory{_allocation(exc)}: a smaller model, batch or beam needs less", 1) from None

    return wrapper  # type: ignore[return-value]


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says that memory ran out: Python's MemoryError, torch's CPU allocator ("can't allocate
    memory") or its GPU OutOfMemoryError (told by name: the CLI does not import torch to catch it)."""
    return (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in str(exc))


def _allocation(exc: BaseException) -> str:
    """What the failed allocation asked for, as torch's message says it (" (2,925,481.3 GiB asked for)"), or ""."""
    found = re.search(r"allocate ([\d.]+) ?(bytes|[KMGT]iB)", str(exc), re.IGNORECASE)
    if found is None:
        return ""
    amount, unit = float(found.group(1)), found.group(2)
    if unit.lower() == "bytes":
        amount, unit = amount / 2**30, "GiB"
    return f" ({amount:,.1f} {unit} asked for)"


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class ClosedStream:
    """What ``sys.stdin`` or ``sys.stdout`` is while a command runs where the process started with that descriptor
    closed (``<&-``, ``>&-``; Python sets the stream to None): no terminal (``isatty()`` is False, as for any
    descriptor that is not one), and reading or writing it is a DataError "standard input: closed", not an
    AttributeError about None. Nothing can have been written to it, so ``flush()`` has nothing to do."""

    closed = True
    encoding = "utf-8"
    errors = "strict"

    def __init__(self, which: str) -> None:
        # lazy: CLI start-up
        from nlgkit.core.io import STREAM_NAMES

        self.which = which  # "stdin" or "stdout"
        self.label = STREAM_NAMES[which]
        self.name = f"<{self.label}>"

    @property
    def buffer(self) -> ClosedStream:  # (sys.stdin.buffer.read(): the binary side is closed too)
        return self

    def isatty(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise io.UnsupportedOperation(f"{self.label}: closed")  # (as io does for a stream without a descriptor)

    def _closed(self, *_: Any, **__: Any) -> Any:
        # lazy: CLI start-up
        from nlgkit.core.io import closed_stream

        raise closed_stream(self.which)

    read = readline = readlines = read1 = readinto = write = writelines = _closed

    def __iter__(self) -> Iterator[str]:
        return self._closed()


class NamedOutput:
    """``sys.stdout`` as a command writes to it: a write or flush that the stream refuses (a full disk, an I/O error,
    ``> /dev/full``) is a DataError "standard output: cannot be written (No space left on device)", not an errno
    without a name; what it could not take is dropped, so that the interpreter's last flush at exit does not fail
    again ("Exception ignored", exit 120). A closed pipe stays a BrokenPipeError (see :func:`handle_errors`).
    Everything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        if name == "_stream":  # (not set yet: a copy being made)
            raise AttributeError(name)
        return getattr(self._stream, name)

    @property
    def buffer(self) -> Any:  # (binary writes, e.g. sys.stdout.buffer.write(…), are named too)
        buffer = getattr(self._stream, "buffer", None)
        return NamedOutput(buffer) if buffer is not None else self._stream.buffer

    def write(self, data: Any) -> Any:
        return self._guarded(self._stream.write, data)

    def writelines(self, lines: Any) -> None:
        self._guarded(self._stream.writelines, lines)

    def flush(self) -> None:
        self._guarded(self._stream.flush)

    def _guarded(self, call: Callable[..., Any], *args: Any) -> Any:
        # lazy: CLI start-up
        from nlgkit.core.io import STREAM_NAMES, naming_write_errors

        try:
            with naming_write_errors(STREAM_NAMES["stdout"]):
                return call(*args)
        except DataError:
            self._drop_unwritten()
            raise

    def _drop_unwritten(self) -> None:
        """Send what is still buffered, and anything written after, to the null device: the descriptor took none
        of it, and the command ends with its error."""
        try:
            descriptor = self._stream.fileno()
        except (OSError, ValueError, AttributeError):  # (not a descriptor: a test's buffer)
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, descriptor)
        finally:
            os.close(null)


@contextmanager
def standard_streams() -> Iterator[None]:
    """Within: ``sys.stdin`` and ``sys.stdout`` a :class:`ClosedStream` where the process started with them closed,
    and ``sys.stdout`` a :class:`NamedOutput` otherwise; as they were after. (Within a command that another runs:
    as they are already.)"""
    saved_input, saved_output = sys.stdin, sys.stdout
    installed_input: Any = ClosedStream("stdin") if saved_input is None else None
    installed_output: Any = None
    if saved_output is None:
        installed_output = ClosedStream("stdout")
    elif not isinstance(saved_output, (NamedOutput, ClosedStream)):
        installed_output = NamedOutput(saved_output)
    if installed_input is not None:
        sys.stdin = installed_input
    if installed_output is not None:
        sys.stdout = installed_output
    try:
        yield
    finally:
        if installed_input is not None and sys.stdin is installed_input:
            sys.stdin = saved_input
        if installed_output is not None and sys.stdout is installed_output:
            sys.stdout = saved_output


def _os_error_message(exc: OSError) -> str:
    """``FILE: reason``; a folder that could not be made or entered because a file is in the way names that file
    (mkdir's and open's own words are "File exists" or "Not a directory", about the path asked for)."""
    if not (exc.filename and exc.strerror):
        return str(exc)
    named = Path(exc.filename)
    blocked: list[Path] = []  # where a file may stand in the folder's way
    if isinstance(exc, FileExistsError):
        blocked = [named]
    elif isinstance(exc, NotADirectoryError):
        blocked = [named, *named.parents]
    if (blocker := next((path for path in blocked if path.is_file()), None)) is not None:
        return f"{blocker}: a file, where a folder is needed"
    return f"{exc.filename}: {exc.strerror}"
