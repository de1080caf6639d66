"""What a new user meets first: ``--version``, help texts that show their brackets, one-line errors only, and a
run stopped before its first validation saying so (issue 33)."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers import tiny_recipe
from typer.testing import CliRunner

import nlgkit
from nlgkit.cli.main import app
from nlgkit.core.version import git_revision, version_line
from nlgkit.runs.checkpoint import STATE_FILE

ROOT = Path(__file__).resolve().parents[1]
WIDE = {"COLUMNS": "400", "TERMINAL_WIDTH": "400", "TERM": "dumb", "NO_COLOR": "1"}  # one help entry per line, no wrapping


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env=WIDE)


def test_version_names_the_package_version_and_the_checkouts_revision() -> None:
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    line = result.output.strip()
    assert line.startswith(f"nlgkit {nlgkit.__version__}")
    if (ROOT / ".git").exists():  # run from a checkout, as the tests are
        assert re.fullmatch(rf"nlgkit {re.escape(nlgkit.__version__)} \(git [0-9a-f]{{10}}(, uncommitted changes)?\)",
                            line), line


def test_an_installed_copy_reports_no_revision(tmp_path: Path) -> None:
    """Outside a checkout (no .git beside the package) there is no revision to report, even inside another
    repository."""
    assert version_line(tmp_path) == f"nlgkit {nlgkit.__version__}"



def test_a_copy_whose_git_lags_its_files_still_names_the_code_that_ran(tmp_path: Path) -> None:
    """A working tree sent elsewhere with an older .git records that commit as dirty; its tree hash equals the tree
    of the commit that holds those files, and recording it leaves the checkout's index and files as they were."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, text=True,
                              capture_output=True, check=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "code.py").write_text("a = 1\n")
    (tmp_path / "other.py").write_text("b = 1\n")
    git("add", "."); git("commit", "-q", "-m", "old")
    old = git("rev-parse", "HEAD")
    assert git_revision(tmp_path) == {"commit": old, "dirty": False, "tree": git("rev-parse", "HEAD^{tree}")}
    (tmp_path / "code.py").write_text("a = 2\n")
    (tmp_path / "untracked.txt").write_text("not code\n")
    recorded = git_revision(tmp_path)
    assert recorded["commit"] == old and recorded["dirty"] is True and recorded["tree"] != git("rev-parse", "HEAD^{tree}")
    assert git("diff", "--cached", "--name-only") == "" and (tmp_path / "code.py").read_text() == "a = 2\n"
    git("commit", "-q", "-am", "new")  # the commit that holds the files that ran
    assert recorded["tree"] == git("rev-parse", "HEAD^{tree}")
    assert git_revision(tmp_path / "nowhere") == {"commit": None, "dirty": None, "tree": None}

def commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command and group of the CLI with the words that reach it."""
    found = [(path, command)]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        found += commands(sub, (*path, name))
    return found


def literal_brackets(text: str) -> list[str]:
    r"""The bracketed parts a help text means to show (written ``\[…]`` so that rich prints them as they are)."""
    return [" ".join(part.split()) for part in re.findall(r"\\?(\[[^\]]*\])", text)]


def test_every_help_text_shows_its_square_brackets() -> None:
    """rich reads ``[search]`` as a style tag and drops it: every bracket a help text holds must come out."""
    checked = 0
    for path, command in commands(typer.main.get_command(app)):
        texts = [command.help or ""] + [getattr(param, "help", None) or "" for param in command.params]
        wanted = [part for text in texts for part in literal_brackets(text)]
        if not wanted:
            continue
        result = invoke(*path, "--help")
        assert result.exit_code == 0, result.output
        shown = " ".join(result.output.split())
        assert [part for part in wanted if part not in shown] == [], " ".join(path)
        checked += 1
    assert checked >= 3  # translate, caption and embed train have some


@pytest.mark.parametrize("command", ["translate", "caption"])
def test_the_beam_option_says_where_its_default_comes_from(command: str) -> None:
    shown = " ".join(invoke(command, "--help").output.split())
    assert "default from the run's [search]" in shown


@pytest.fixture(scope="module")
def stopped_early(paper: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A run stopped by max_updates after 3 of its 12 updates an epoch: before its first validation."""
    tmp = tmp_path_factory.mktemp("early")
    run_dir = tmp / "run"
    recipe = tiny_recipe(tmp, paper[0], run_dir, max_updates=3, valid_limit=20)
    result = invoke("train", str(recipe))
    assert result.exit_code == 0, result.output
    return recipe, run_dir, result.output


def test_a_run_stopped_before_its_first_validation_says_none_ran(stopped_early: tuple[Path, Path, str]) -> None:
    output = " ".join(stopped_early[2].split())
    assert "stopped: train.max_updates = 3 reached; no validation ran yet (the first comes at the end of epoch 1)" \
        in output
    assert "-1.00" not in output and "epoch 0" not in output


def test_a_longer_run_still_reports_its_best_validation(paper: tuple[Path, dict], tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "run", max_updates=13, valid_limit=20)  # epoch 1 is 12
    result = invoke("train", str(recipe))
    assert result.exit_code == 0, result.output
    assert re.search(r"stopped: train\.max_updates = 13 reached; best validation bleu \d+\.\d\d \(epoch 1\)",
                     " ".join(result.output.split())), result.output


class Payload:
    """What a tampered training state asks the unpickler to build (never built: the file is refused)."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (print, ("the tampered state ran code",))


def test_resuming_a_tampered_state_prints_only_nlgkits_line(stopped_early: tuple[Path, Path, str]) -> None:
    """torch's weights-only loader warns about a plain pickle's protocol before refusing it; the user sees one
    ``error:`` line (a fresh process, as a user runs it: warnings are printed, not collected by pytest)."""
    recipe, run_dir, _ = stopped_early
    state = run_dir / "checkpoints" / "last" / STATE_FILE
    state.write_bytes(pickle.dumps({"loop": Payload()}, protocol=4))
    result = subprocess.run([sys.executable, "-m", "nlgkit", "train", str(recipe), "--resume"], capture_output=True,
                            text=True, cwd=ROOT, check=False)
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == f"error: {state}: not a valid nlgkit training state; it was not loaded (UnpicklingError)"
    assert "ran code" not in result.stdout + result.stderr


def test_resuming_a_state_torch_loads_but_nlgkit_did_not_write_is_one_line(paper: tuple[Path, dict],
                                                                           tmp_path: Path) -> None:
    """A training state of plain tensors and lists that is not the one nlgkit saved (edited, cut down, another
    program's) was a KeyError or TypeError traceback from deep inside the restore."""
    import torch

    run_dir = tmp_path / "run"
    recipe = tiny_recipe(tmp_path, paper[0], run_dir, max_updates=2, valid_limit=10)
    assert invoke("train", str(recipe)).exit_code == 0
    state_path = run_dir / "checkpoints" / "last" / STATE_FILE
    saved = torch.load(state_path, weights_only=True)
    for state, reason in (({}, "(no 'optimizer')"), ([1, 2], "(no 'optimizer')"),
                          ({**saved, "loop": {**saved["loop"], "epochs_left": 3}}, "(TypeError: "),
                          ({**saved, "optimizer": {}}, "(KeyError: 'param_groups')"),
                          ({**saved, "rng": 5}, "(TypeError: ")):
        torch.save(state, state_path)
        result = invoke("train", str(recipe), "--resume")
        lines = result.stderr.splitlines()
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith(f"error: {state_path}: not a valid nlgkit training state; it was not loaded "
                                   f"{reason}"), lines[0]


def test_show_prints_the_first_lines_side_by_side_and_refuses_files_of_other_lengths(tmp_path: Path) -> None:
    """`reproduce show` (the last step of `make demo`) pairs lines by number: files of other lengths would pair a
    hypothesis with another sentence's reference, so they are an error, as in `evaluate`."""
    files = {"hyp": ["a dog runs", "two cats", "three birds"], "ref": ["a dog is running", "two cats sleep",
             "three birds fly"], "src": ["ein Hund", "zwei Katzen", "drei Vögel"], "short": ["one"]}
    for name, lines in files.items():
        (tmp_path / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    shown = invoke("reproduce", "show", str(tmp_path / "hyp"), str(tmp_path / "ref"), "--source",
                   str(tmp_path / "src"), "-n", "2")
    assert shown.exit_code == 0, shown.output
    assert "ein Hund" in shown.output and "two cats sleep" in shown.output and "three birds" not in shown.output
    for args, message in (([str(tmp_path / "short")], f"{tmp_path / 'short'}: 1 lines but {tmp_path / 'hyp'} has 3"),
                          ([str(tmp_path / "ref"), "--source", str(tmp_path / "short")],
                           f"{tmp_path / 'short'}: 1 lines but {tmp_path / 'hyp'} has 3"),
                          ([str(tmp_path / "ref"), "-n", "0"], "-n 0: must be at least 1")):
        result = invoke("reproduce", "show", str(tmp_path / "hyp"), *args)
        assert result.exit_code == 2 and result.stderr.strip() == f"error: {message}", result.output


@pytest.mark.parametrize(("error", "line"), [
    (RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                  "tried to allocate 3221225472 bytes. Error code 12 (Cannot allocate memory)"),
     "error: out of memory (3.0 GiB asked for): a smaller model, batch or beam needs less"),
    (type("OutOfMemoryError", (RuntimeError,), {})("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; ...)"),
     "error: out of memory (20.0 GiB asked for): a smaller model, batch or beam needs less"),
    (MemoryError(), "error: out of memory: a smaller model, batch or beam needs less"),
])
def test_running_out_of_memory_is_one_line_and_other_runtime_errors_are_not_hidden(
        error: BaseException, line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A model, batch or beam too large for the machine (``--set model.embedding_dim=100000000000``) was torch's
    allocator traceback; any other RuntimeError is a bug and keeps its traceback."""
    from nlgkit.cli.common import handle_errors

    def raising() -> None:
        raise error

    with pytest.raises(typer.Exit) as stopped:
        handle_errors(raising)()
    assert stopped.value.exit_code == 1 and capsys.readouterr().err == line + "\n"

    def failing() -> None:
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        handle_errors(failing)()
