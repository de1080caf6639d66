"""What a search request can ask that the search could never do: a constraint phrase it can never output, a minimum
length above the length limit. Known up front, it is a one-line error naming the values; known only from a source's
length, a warning said once (the old code cut such outputs, or returned nothing, without a word)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch
from helpers import tiny_recipe
from test_search import BOS, EOS, PAD, A, C, Script, ScriptedModel
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.config import SearchConfig
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import read_lines
from nlgkit.data.vocab import Vocabulary
from nlgkit.generation.decode import generate
from nlgkit.generation.output import SearchOptions
from nlgkit.models.base import Inputs, State
from nlgkit.tasks.base import Task


@pytest.mark.parametrize(("overrides", "message"), [
    ({"min_len": 30, "max_len": 20},
     "--min-len 30 is above --max-len 20: no output can have at least 30 tokens and at most 20 tokens$"),
    ({"min_len": 17, "max_len_a": 0.0, "max_len_b": 16},
     ("--min-len 17 is above the length limit --max-len-b 16 (with --max-len-a 0): no output can have at least 17 "
      "tokens and at most 16 tokens$")),
    ({"min_len": 2, "max_len_a": 0.0, "max_len_b": 0},  # (the limit is never under 1)
     "--max-len-b 0 (with --max-len-a 0): no output can have at least 2 tokens and at most 1 token$"),
])
def test_a_min_len_no_output_can_reach_is_refused(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SearchOptions.resolve(SearchConfig(), **overrides)


@pytest.mark.parametrize("overrides", [
    {"min_len": 20, "max_len": 20},  # outputs of exactly 20 tokens
    {"min_len": 16, "max_len_a": 0.0, "max_len_b": 16},
    {"min_len": 40},  # a · length + b: long sources allow it (generate warns about the short ones)
])
def test_a_min_len_some_output_can_reach_is_kept(overrides: dict[str, Any]) -> None:
    assert SearchOptions.resolve(SearchConfig(), **overrides).min_len == overrides["min_len"]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"max_len": 10**20}, r"--max-len 100000000000000000000: too large \(at most 2,147,483,647\)$"),
    ({"max_len_b": 2**31}, "--max-len-b 2147483648: too large"),
    ({"max_len_a": 1e300}, r"--max-len-a 1e\+300: too large"),
    ({"beam": 10**20}, "--beam 100000000000000000000: too large"),
    ({"length_penalty": 1e308}, r"--length-penalty 1e\+308: must be within ±10.0"),
    ({"length_penalty": -11.0}, "--length-penalty -11.0: must be within ±10.0"),
])
def test_a_number_past_what_any_search_could_hold_is_a_flag_error(overrides: dict[str, Any], message: str) -> None:
    """Lengths and beams past 32 bits and a length penalty whose power overflows a float were tracebacks from inside
    the search (an int too big to convert, a numerical result out of range): now the flag's error."""
    with pytest.raises(DataError, match=message):
        SearchOptions.resolve(SearchConfig(), **overrides)
    edge = {key: (2**31 - 1 if isinstance(value, int) else 10.0 if key == "length_penalty" else 2.0**31 - 1)
            for key, value in overrides.items()}
    assert SearchOptions.resolve(SearchConfig(), **edge)


class Lengths(ScriptedModel):
    """The scripted model behind ``generate``: its inputs are the script numbers."""

    def encode(self, inputs: Inputs) -> State:  # type: ignore[override]
        return super().encode(inputs["script"])


class LengthTask:
    """A source is (script number, length): ``generate``'s length limit is a · length + b."""

    def source_length(self, source: tuple[int, int]) -> int:
        return source[1]

    def source_inputs(self, sources: Sequence[tuple[int, int]], vocab: Vocabulary) -> tuple[Inputs, torch.Tensor]:
        return {"script": torch.tensor([s[0] for s in sources])}, torch.tensor([s[1] for s in sources])


# A word at a time, ending with probability one half after each one: as long as its limit lets it.
RAMBLE: Script = {tuple([A] * n): {A: 0.5, EOS: 0.5} if n else {A: 1.0} for n in range(12)}


def test_generate_warns_once_when_a_source_is_too_short_for_min_len() -> None:
    """Limit 1 · length + 1: the two sources of length 2 stop at 3 tokens under min_len 5 (one warning for both,
    though each is its own batch); the source of length 6 reaches 5 tokens and ends."""
    said: list[str] = []
    vocab = cast(Vocabulary, SimpleNamespace(pad_index=PAD, bos_index=BOS, eos_index=EOS, unk_index=C))
    found = generate(Lengths([RAMBLE]), cast(Task, LengthTask()), [(0, 2), (0, 6), (0, 2)], vocab, beam=2,
                     max_len_a=1.0, max_len_b=1, min_len=5, batch_size=1, device=torch.device("cpu"),
                     warn=said.append)
    assert [len(hyps[0].tokens) for hyps in found] == [3, 5, 3]
    assert said == [("--min-len 5 is above the length limit of some inputs (3 tokens for a source of length 2: "
                     "--max-len-a 1.0 × length + --max-len-b 1): their outputs stop there, shorter than --min-len")]
    said.clear()
    generate(Lengths([RAMBLE]), cast(Task, LengthTask()), [(0, 6)], vocab, beam=2, max_len_a=1.0, max_len_b=1,
             min_len=5, device=torch.device("cpu"), warn=said.append)
    assert said == []


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def one_line_error(result: Any, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def run_dir(paper: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of two updates: its outputs are nonsense, but its vocabulary and search are the real ones."""
    tmp = tmp_path_factory.mktemp("refusals")
    result = cli("train", str(tiny_recipe(tmp, paper[0], tmp / "run", max_updates=2, valid_limit=10)))
    assert result.exit_code == 0, result.output
    return tmp / "run"


def test_translate_refuses_a_constraint_the_ngram_ban_forbids(run_dir: Path, paper: tuple[Path, dict],
                                                             tmp_path: Path) -> None:
    """``a man a man`` repeats ``a man``: under --no-repeat-ngram-size 2 no output can hold it. Refused before
    anything is written, naming the file's line, the phrase and why (the old search returned an empty line)."""
    source, wanted, written = tmp_path / "test.de", tmp_path / "constraints.en", tmp_path / "out.en"
    source.write_text("".join(line + "\n" for line in read_lines(paper[0] / "test.de")[:3]), encoding="utf-8")
    wanted.write_text("man\na man a man\tdog\n\n", encoding="utf-8")
    common = ("translate", "-m", str(run_dir), "--pretokenized", "--input", str(source), "--beam", "2",
              "--constraints", str(wanted), "--output", str(written))
    one_line_error(cli(*common, "--no-repeat-ngram-size", "2"), "constraints.en: line 2: constraint 'a man a man' "
                   "can never be met: it repeats the 2-gram 'a man', and no_repeat_ngram_size = 2 forbids that")
    assert not written.exists()
    allowed = cli(*common, "--no-repeat-ngram-size", "3")
    assert allowed.exit_code == 0, allowed.output
    assert "a man a man" in read_lines(written)[1]


def test_translate_names_each_line_whose_output_lacks_a_constraint(run_dir: Path, paper: tuple[Path, dict],
                                                                  tmp_path: Path) -> None:
    """``a dog`` and ``the dog`` can each be placed, but not both under --no-repeat-ngram-size 1 (``dog`` twice):
    the line's output, returned at its limit, is written, with a warning naming the file's line and the phrase it
    lacks (it was written without a word); a line whose phrases fit gets none."""
    source, wanted = tmp_path / "test.de", tmp_path / "constraints.en"
    source.write_text("".join(line + "\n" for line in read_lines(paper[0] / "test.de")[:3]), encoding="utf-8")
    wanted.write_text("man\na dog\tthe dog\n\n", encoding="utf-8")
    result = cli("translate", "-m", str(run_dir), "--pretokenized", "--input", str(source), "--beam", "3",
                 "--constraints", str(wanted), "--no-repeat-ngram-size", "1")
    assert result.exit_code == 0, result.output
    outputs = result.stdout.splitlines()
    assert len(outputs) == 3 and "man" in outputs[0].split()
    assert outputs[1].split().count("dog") == 1  # one of the two phrases, the other lost to the ban
    said = [line for line in result.stderr.splitlines() if "lacks" in line]
    assert len(said) == 1 and said[0].startswith(f"warning: --constraints {wanted}: line 2: its output lacks "
                                                 "constraint '"), result.stderr
    lacking = "the dog" if "a dog" in outputs[1] else "a dog"
    assert f"lacks constraint {lacking!r} (" in said[0]


def test_translate_refuses_or_warns_about_a_min_len_above_the_limit(run_dir: Path, paper: tuple[Path, dict],
                                                                    tmp_path: Path) -> None:
    source = tmp_path / "test.de"
    lines = read_lines(paper[0] / "test.de")[:6]
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    common = ("translate", "-m", str(run_dir), "--pretokenized", "--no-detokenize", "--input", str(source),
              "--beam", "2")
    one_line_error(cli(*common, "--min-len", "30", "--max-len", "20"), "--min-len 30 is above --max-len 20")
    one_line_error(cli(*common, "--min-len", "9", "--max-len-a", "0", "--max-len-b", "5"),
                   "--min-len 9 is above the length limit --max-len-b 5")
    streamed = cli(*common, "--min-len", "40", "--max-len-a", "1", "--max-len-b", "2", "--buffer-size", "2")
    assert streamed.exit_code == 0, streamed.output
    warnings = [line for line in streamed.stderr.splitlines() if "--min-len 40" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: --min-len 40 is above the length limit of some "
                                                         "inputs"), streamed.stderr
    outputs = streamed.stdout.splitlines()
    limits = [len(line.split()) + 1 + 2 for line in lines]  # a source's length counts its </s>
    assert [len(out.split()) for out in outputs] == [min(limit, 40) for limit in limits]  # cut at the limit
