"""End to end through the CLI on real Multi30K slices: train, resume, translate, evaluate, bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from helpers import tiny_recipe, trained_and_untrained_bleu
from safetensors.torch import load_file
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import ConfigError
from nlgkit.core.io import read_lines
from nlgkit.core.recipes import load_recipe
from nlgkit.metrics.corpus import bleu
from nlgkit.runs.loading import load_trained

RECIPES = Path(__file__).resolve().parents[1] / "recipes"


def cli(*args: str, input: bytes | str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), input=input)


@pytest.fixture(scope="module")
def trained(paper: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("trained")
    run_dir = tmp / "run"
    recipe = tiny_recipe(tmp, paper[0], run_dir)
    result = cli("train", str(recipe))
    assert result.exit_code == 0, result.output
    return recipe, run_dir


def test_training_beats_an_untrained_model_by_a_clear_margin(trained: tuple[Path, Path], paper) -> None:  # type: ignore[no-untyped-def]
    recipe, run_dir = trained
    trained_bleu, untrained_bleu = trained_and_untrained_bleu(recipe, run_dir, paper[0])
    assert trained_bleu > untrained_bleu + 10, (trained_bleu, untrained_bleu)

    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [e["loss"] for e in events if e["event"] == "train"]
    valid = [e for e in events if e["event"] == "valid"]
    assert losses[-1] < 0.6 * losses[0]
    assert valid[-1]["loss"] < valid[0]["loss"]
    assert {"start", "train", "valid", "end"} <= {e["event"] for e in events}


def test_run_directory_records_everything(trained: tuple[Path, Path]) -> None:
    _, run_dir = trained
    config = json.loads((run_dir / "config.json").read_text())
    assert config["head"] == {"type": "fixed", "init": "l2", "scale": 10.0, "row_norm": 1.0, "bias": "fixed",
                              "seed_offset": 0, "sampling": {"share": 1.0}}
    assert json.loads((run_dir / "manifest.json").read_text())["vocab_size"]
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert "commit" in provenance["git"] and provenance["env"]["torch"] == torch.__version__
    meta = json.loads((run_dir / "checkpoints" / "best" / "meta.json").read_text())
    assert set(meta["vocab_checksums"]) == {"de", "en"} and meta["config"] == config
    assert meta["git"] == provenance["git"]  # the revision of the code the process runs, read once at its start
    assert (run_dir / "checkpoints" / "last" / "train_state.pt").is_file()
    # the fixed head's matrix is saved with the model, so a reload reproduces it exactly
    weights = load_file(str(run_dir / "checkpoints" / "last" / "model.safetensors"))
    run = load_trained(run_dir, "last", "cpu")
    head_keys = [k for k in weights if k.startswith("head.")]
    assert head_keys and all(torch.equal(weights[k], run.model.state_dict()[k]) for k in head_keys)


def test_translate_keeps_one_line_per_input_whatever_the_input(trained: tuple[Path, Path], tmp_path: Path) -> None:
    _, run_dir = trained
    long_line = " ".join(["ein"] * 10_000)
    raw = ("ein mann fährt fahrrad .\n\n   \n" + long_line + "\nzwei hunde \xff spielen\n").encode("utf-8")
    raw = raw.replace("\xff".encode(), b"\xff")  # a byte that is not UTF-8
    source = tmp_path / "in.de"
    source.write_bytes(raw)
    out = tmp_path / "out.en"
    result = cli("translate", "--model", str(run_dir), "--input", str(source), "--output", str(out),
                 "--max-input-tokens", "50")
    assert result.exit_code == 0, result.output
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 5
    assert lines[0].strip() and lines[1] == "" and lines[2] == "" and lines[4].strip()
    assert "line 4: 10000 tokens, cut to 50" in result.stderr
    assert "line 5: invalid UTF-8" in result.stderr
    # stdin → stdout, n-best format
    result = cli("translate", "--model", str(run_dir), "--beam", "3", "--nbest", "2", input="ein hund .\n\n")
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()
    assert [r.split(" ||| ")[0] for r in rows] == ["0", "0", "1", "1"]
    assert float(rows[0].split(" ||| ")[2]) >= float(rows[1].split(" ||| ")[2])
    # empty input → empty output
    result = cli("translate", "--model", str(run_dir), input="")
    assert result.exit_code == 0 and result.stdout == ""
    # as a stream, in groups of 2: the same lines, n-best indices counted over the whole input
    whole = cli("translate", "--model", str(run_dir), "--input", str(source), "--max-input-tokens", "50")
    streamed = cli("translate", "--model", str(run_dir), "--input", str(source), "--max-input-tokens", "50",
                   "--buffer-size", "2")
    assert streamed.exit_code == 0 and streamed.stdout == whole.stdout and len(whole.stdout.splitlines()) == 5
    assert "line 4: 10000 tokens" in streamed.stderr and "line 5: invalid UTF-8" in streamed.stderr
    # --report-time: the same output, and a last stderr line counting the input's lines
    timed = cli("translate", "--model", str(run_dir), "--input", str(source), "--max-input-tokens", "50",
                "--buffer-size", "2", "--report-time")
    assert timed.exit_code == 0 and timed.stdout == whole.stdout
    assert re.fullmatch(r"translated 5 lines in \d+\.\d\d s \(\d+\.\d lines/s\); model loaded in \d+\.\d\d s",
                        timed.stderr.splitlines()[-1]), timed.stderr
    assert "lines/s" not in whole.stderr
    result = cli("translate", "--model", str(run_dir), "--nbest", "2", "--beam", "2", "--buffer-size", "1",
                 input="ein hund .\nzwei katzen .\n")
    assert [r.split(" ||| ")[0] for r in result.stdout.splitlines()] == ["0", "0", "1", "1"]
    # sampling: --nbest draws per line (more than the beam), the same ones again with the same seed in batches
    # of one sentence and groups of one line (the draws are keyed by line, not by batch), others with another seed
    draw = ("translate", "--model", str(run_dir), "--sampling", "--nbest", "6", "--beam", "2", "--temperature", "1.5",
            "--max-len", "12")
    lines = "ein mann fährt fahrrad .\n\nzwei hunde spielen im schnee .\n"
    first = cli(*draw, "--seed", "4", input=lines)
    assert first.exit_code == 0, first.output
    rows = [r.split(" ||| ") for r in first.stdout.splitlines()]
    assert [int(r[0]) for r in rows] == [i for i in range(3) for _ in range(6)]
    assert len({r[1] for r in rows if r[0] == "0"}) > 1  # samples, not six copies of the best
    assert cli(*draw, "--seed", "4", "--batch-size", "1", "--buffer-size", "1", input=lines).stdout == first.stdout
    assert cli(*draw, "--seed", "5", input=lines).stdout != first.stdout


def test_translation_reports_its_progress_after_each_batch(trained: tuple[Path, Path]) -> None:
    """``Translator(on_batch=…)`` hears (lines searched, lines to search) after each batch, empty lines not counted,
    and translates as without it; ``translate`` shows it as a bar on a terminal only."""
    from nlgkit.generation.output import SearchOptions
    from nlgkit.generation.translate import Translator

    _, run_dir = trained
    run = load_trained(run_dir, "best", "cpu")
    lines = ["ein mann fährt fahrrad .", "", "zwei hunde spielen .", "eine frau liest .", "ein kind lacht .",
             "ein hund läuft ."]
    calls: list[tuple[int, int]] = []
    options = SearchOptions.resolve(run.config.search, beam=2, batch_size=2)
    heard = Translator(run, options, on_batch=lambda done, total: calls.append((done, total))).lines(lines)
    assert calls == [(2, 5), (4, 5), (5, 5)]
    assert heard == Translator(run, options).lines(lines)


def test_progress_bar_is_drawn_on_a_terminal_only(capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from rich.console import Console

    from nlgkit.cli.common import progress_bar

    for terminal, show in ((True, True), (False, True), (True, False)):
        screen = io.StringIO()
        with progress_bar("translating", show, Console(file=screen, force_terminal=terminal, width=100)) as advance:
            advance(3, 4)
            print("an output line")  # written to stdout, a pipe here, during the bar
        assert ("3/4" in screen.getvalue()) == (terminal and show)
        assert bool(screen.getvalue()) == (terminal and show)
        assert capsys.readouterr().out == "an output line\n"  # still in stdout, not moved to the bar's stderr


def test_the_word_vector_bar_leaves_stdout_alone_too(capsys: pytest.CaptureFixture[str]) -> None:
    """``embed debias`` / ``embed report``'s bar (wordvectors.knn) draws on a terminal and keeps stdout as it is."""
    import io

    from rich.console import Console

    from nlgkit.wordvectors.knn import progress_bar, row_blocks

    screen = io.StringIO()
    with progress_bar(True, Console(file=screen, force_terminal=True, width=100)) as bar:
        blocks = list(row_blocks(10, 4, "neighbours", bar))
        print("an output line")
    assert blocks == [slice(0, 4), slice(4, 8), slice(8, 10)]
    assert "neighbours" in screen.getvalue()
    assert capsys.readouterr().out == "an output line\n"


def test_score_reference_gives_the_searchs_own_log_probabilities(trained: tuple[Path, Path], paper,  # type: ignore[no-untyped-def]
                                                                 tmp_path: Path) -> None:
    """``--score-reference`` forces the given outputs through the search's steps: a beam output scored again
    gets the log-probability the beam gave it (length penalty 0, so the n-best score is that log-probability);
    a sentence's own reference scores far better than another sentence's; raw references are tokenised as the
    training targets were."""
    _, run_dir = trained
    data = paper[0]
    sources = read_lines(data / "test.de")[:12]
    (tmp_path / "src.de").write_text("\n".join(sources) + "\n")
    base = ("translate", "-m", str(run_dir), "--pretokenized", "-i", str(tmp_path / "src.de"))
    nbest = cli(*base, "--beam", "2", "--nbest", "2", "--length-penalty", "0", "--no-detokenize")
    assert nbest.exit_code == 0, nbest.output
    best = [row.split(" ||| ") for row in nbest.stdout.splitlines()[::2]]
    (tmp_path / "best.en").write_text("".join(text + "\n" for _, text, _ in best))
    scored = cli(*base, "--score-reference", str(tmp_path / "best.en"))
    assert scored.exit_code == 0, scored.output
    rows = [row.split("\t") for row in scored.stdout.splitlines()]
    assert len(rows) == 12
    for (_, text, beam_score), (log_prob, tokens) in zip(best, rows, strict=True):
        assert abs(float(log_prob) - float(beam_score)) < 2e-4 and int(tokens) == len(text.split()) + 1
    assert "scored 12 of 12 lines" in scored.stderr and "perplexity" in scored.stderr

    references = read_lines(data / "test.en")[:12]
    (tmp_path / "pairs.de").write_text("\n".join(sources * 2) + "\n")  # each source with its own reference, then
    (tmp_path / "pairs.en").write_text("\n".join(references + references[1:] + references[:1]) + "\n")  # another's
    pairs = cli("translate", "-m", str(run_dir), "--pretokenized", "-i", str(tmp_path / "pairs.de"),
                "--score-reference", str(tmp_path / "pairs.en"))
    assert pairs.exit_code == 0, pairs.output
    per_token = [sum(float(lp) for lp, _ in part) / sum(int(n) for _, n in part)
                 for part in ([row.split("\t") for row in pairs.stdout.splitlines()][k * 12 : k * 12 + 12]
                              for k in range(2))]
    assert per_token[0] > per_token[1] + 1.0, per_token  # nats per token
    raw = cli("translate", "-m", str(run_dir), "-i", str(tmp_path / "src.de"), "--score-reference",
              str(data / "test.ref.en"))  # 12 input lines, 1,000 references
    assert raw.exit_code != 0 and "test.ref.en" in raw.stderr and "\n" not in raw.stderr.strip()
    for lang in ("de", "en"):
        (tmp_path / f"raw.{lang}").write_text("".join(line + "\n" for line in read_lines(data / f"test.ref.{lang}")[:12]))
    tokenised = cli("translate", "-m", str(run_dir), "-i", str(tmp_path / "raw.de"), "--score-reference",
                    str(tmp_path / "raw.en"))
    assert tokenised.exit_code == 0, tokenised.output
    for raw_row, row in zip(tokenised.stdout.splitlines(), pairs.stdout.splitlines()[:12], strict=True):
        (raw_lp, raw_n), (lp, n) = raw_row.split("\t"), row.split("\t")  # raw text tokenised as the targets were
        assert raw_n == n and abs(float(raw_lp) - float(lp)) < 1e-3
    # an empty input line keeps its place; --nbest, --sampling, ct2 and a stream are refused in one line
    lines = cli("translate", "-m", str(run_dir), "--pretokenized", "--score-reference", str(tmp_path / "best.en"),
                input="\n".join(["", *sources[1:]]) + "\n")
    assert lines.exit_code == 0 and lines.stdout.split("\n")[0] == "" and lines.stdout.splitlines()[1:] == [
        "\t".join(row) for row in rows[1:]]
    for flags in (("--nbest", "2", "--beam", "2"), ("--sampling",), ("--buffer-size", "2")):
        refused = cli(*base, "--score-reference", str(tmp_path / "best.en"), *flags)
        assert refused.exit_code != 0 and refused.stdout == "" and "--score-reference" in refused.stderr


def test_translate_answers_a_pipe_line_by_line_before_its_end(trained: tuple[Path, Path]) -> None:
    """`--buffer-size 1` serves as an interactive pipe: each answer arrives while stdin is still open."""
    import subprocess
    import sys
    import threading

    _, run_dir = trained
    process = subprocess.Popen([sys.executable, "-m", "nlgkit", "translate", "--model", str(run_dir),
                                "--buffer-size", "1", "--device", "cpu"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None

    def answer() -> str:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(process.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=120)
        assert got, "no answer while the pipe is open"
        return got[0]

    try:
        answers = []
        for line in ("ein mann fährt fahrrad .", "", "zwei hunde spielen ."):
            process.stdin.write(line + "\n")
            process.stdin.flush()
            answers.append(answer())  # read before the next line is written
        process.stdin.close()
        assert process.wait(timeout=60) == 0
        assert process.stdout.read() == ""  # nothing more than one line per input
    finally:
        process.kill()
    assert [a.endswith("\n") for a in answers] == [True] * 3
    assert answers[0].strip() and answers[1] == "\n" and answers[2].strip()


def test_translate_then_evaluate(trained: tuple[Path, Path], paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, run_dir = trained
    data_dir = paper[0]
    refs = read_lines(data_dir / "valid.ref.en")[:20]
    src = tmp_path / "valid.de"
    src.write_text("\n".join(read_lines(data_dir / "valid.ref.de")[:20]) + "\n")
    ref = tmp_path / "valid.en"
    ref.write_text("\n".join(refs) + "\n")
    hyp = tmp_path / "hyp.en"
    assert cli("translate", "-m", str(run_dir), "-i", str(src), "-o", str(hyp)).exit_code == 0
    result = cli("evaluate", "--hyp", str(hyp), "--ref", str(ref), "--json")
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert scores["bleu"]["score"] == pytest.approx(bleu(read_lines(hyp), refs))


def assert_same_weights(run_a: Path, run_b: Path, checkpoint: str) -> None:
    a = load_file(str(run_a / "checkpoints" / checkpoint / "model.safetensors"))
    b = load_file(str(run_b / "checkpoints" / checkpoint / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"{checkpoint} weights differ"


@pytest.fixture(scope="module")
def uninterrupted(paper: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """18 updates of the tiny recipe in one go: 300 pairs / 25 per batch = 12 updates per epoch, so they cross an
    epoch end (validation, schedule)."""
    tmp = tmp_path_factory.mktemp("uninterrupted")
    assert cli("train", str(tiny_recipe(tmp, paper[0], tmp / "whole", max_updates=18))).exit_code == 0
    return tmp / "whole"


def test_resume_gives_the_same_weights_as_an_uninterrupted_run(paper, uninterrupted: Path,  # type: ignore[no-untyped-def]
                                                                tmp_path: Path) -> None:
    parts = tiny_recipe(tmp_path, paper[0], tmp_path / "parts", max_updates=5)
    assert cli("train", str(parts)).exit_code == 0
    assert cli("train", str(parts), "--resume", "--set", "train.max_updates=14").exit_code == 0
    result = cli("train", str(parts), "--resume", "--set", "train.max_updates=18")
    assert result.exit_code == 0, result.output
    assert_same_weights(uninterrupted, tmp_path / "parts", "last")
    summary = json.loads((tmp_path / "parts" / "summary.json").read_text())
    assert summary["update"] == 18 and summary["epoch"] == 2


def test_a_run_killed_without_warning_resumes_from_its_last_save_inside_the_epoch(  # type: ignore[no-untyped-def]
        paper, uninterrupted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """train.save_every_updates: a crash no handler sees (here an error in update 8 of a 12-update epoch) leaves
    checkpoints/last at update 6, mid-epoch; resumed, the run ends with the weights of a run never interrupted and
    never saved inside an epoch (saving takes nothing from the random streams)."""
    killed = tiny_recipe(tmp_path, paper[0], tmp_path / "killed", max_updates=18, save_every_updates=3)
    from nlgkit.train.trainer import Trainer

    original, calls = Trainer.train_step, []

    def crash_in_update_8(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 8:
            raise RuntimeError("the machine went away")
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", crash_in_update_8)
        assert cli("train", str(killed)).exit_code != 0
    meta = json.loads((tmp_path / "killed" / "checkpoints" / "last" / "meta.json").read_text())
    assert (meta["loop"]["update"], meta["loop"]["epoch"], meta["loop"]["batch_in_epoch"]) == (6, 1, 6)
    result = cli("train", str(killed), "--resume")
    assert result.exit_code == 0, result.output
    assert_same_weights(uninterrupted, tmp_path / "killed", "last")
    with pytest.raises(ConfigError, match="train.save_every_updates = -1: must be 0 or positive"):
        load_recipe(killed, ["train.save_every_updates=-1"])


def test_a_run_killed_at_an_epochs_end_resumes_with_every_epoch_checkpoint(  # type: ignore[no-untyped-def]
        paper, uninterrupted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash while epoch 1's checkpoints are written, as ``epoch_001`` is saved: ``last`` is written after the
    others, so the run resumes from its save at update 9 and writes ``epoch_001`` again (it was lost when ``last``
    had already moved on to epoch 2, and ``nlgkit average --last N`` then averaged other epochs)."""
    killed = tiny_recipe(tmp_path, paper[0], tmp_path / "killed", max_updates=18, save_every_updates=3)
    from nlgkit.train.trainer import Trainer

    original = Trainer._save

    def crash_at_the_epoch_checkpoint(self, session, loop, directory, *args, **kwargs):  # type: ignore[no-untyped-def]
        if directory.name == "epoch_001":
            raise RuntimeError("the machine went away")
        return original(self, session, loop, directory, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_save", crash_at_the_epoch_checkpoint)
        assert cli("train", str(killed)).exit_code != 0
    meta = json.loads((tmp_path / "killed" / "checkpoints" / "last" / "meta.json").read_text())
    assert (meta["loop"]["update"], meta["loop"]["epoch"]) == (9, 1)
    result = cli("train", str(killed), "--resume")
    assert result.exit_code == 0, result.output
    for name in ("epoch_001", "best", "last"):
        assert_same_weights(uninterrupted, tmp_path / "killed", name)


def test_a_new_run_does_not_inherit_what_a_run_stopped_before_its_first_checkpoint_left(  # type: ignore[no-untyped-def]
        paper, uninterrupted: Path, tmp_path: Path) -> None:
    """A run stopped before it wrote a checkpoint cannot be resumed, so a new run may start there: it starts its
    own metrics log (the old one's events were appended to it). One that left a ``best`` but no ``last`` (it passed
    for the new run's own) is refused, its weights kept. A run record is no run directory."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints" / ".last.tmp").mkdir(parents=True)  # (a save the kill cut short)
    shutil.copy(uninterrupted / "metrics.jsonl", run_dir / "metrics.jsonl")
    recipe = tiny_recipe(tmp_path, paper[0], run_dir, max_updates=3)
    result = cli("train", str(recipe))
    assert result.exit_code == 0, result.output
    events = [json.loads(line)["event"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert events.count("start") == 1 and events[0] == "start" and "resume" not in events, events
    assert not (run_dir / "checkpoints" / ".last.tmp").exists()

    stopped = tmp_path / "stopped"
    shutil.copytree(uninterrupted / "checkpoints" / "best", stopped / "checkpoints" / "best")
    one_line_error(cli("train", str(recipe), "--run-dir", str(stopped)),
                   f"{stopped}: holds checkpoints of an earlier run (best) but no last to resume from")
    assert sorted(path.name for path in (stopped / "checkpoints").iterdir()) == ["best"]
    record = tmp_path / "record"
    shutil.copytree(uninterrupted, record, ignore=shutil.ignore_patterns("*.safetensors", "*.pt"))
    (record / "record.json").write_text("{}")
    one_line_error(cli("train", str(recipe), "--run-dir", str(record)), f"{record}: a run record")
    assert (record / "checkpoints" / "best" / "meta.json").is_file()


def test_a_run_does_not_resume_on_data_changed_since_it_started(paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The same vocabularies over an edited corpus (here its training targets reordered) went on silently, the
    run's manifest.json still describing the old data."""
    data = tmp_path / "data"
    shutil.copytree(paper[0], data, ignore=shutil.ignore_patterns("ids"))
    recipe = tiny_recipe(tmp_path, data, tmp_path / "run", max_updates=2, valid_limit=10)
    assert cli("train", str(recipe)).exit_code == 0
    assert cli("train", str(recipe), "--resume", "--set", "train.max_updates=3").exit_code == 0  # unchanged: goes on
    train = data / "train.en"
    train.write_text("".join(reversed(train.read_text(encoding="utf-8").splitlines(keepends=True))), encoding="utf-8")
    one_line_error(cli("train", str(recipe), "--resume", "--set", "train.max_updates=4"),
                   f"{train}: changed since this run started")


def test_a_second_training_process_in_one_run_directory_is_refused(paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two ``nlgkit train`` in one run directory (a resume started while the run trains) both trained, into one
    metrics log and through one temporary checkpoint directory; the one that writes the run holds a lock on it,
    which the kernel drops however the process ends."""
    import fcntl

    run_dir = tmp_path / "run"
    recipe = tiny_recipe(tmp_path, paper[0], run_dir, max_updates=2, valid_limit=10)
    run_dir.mkdir()
    with open(run_dir / ".train.lock", "a+") as held:  # as a training process holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242\n")
        held.flush()
        one_line_error(cli("train", str(recipe)), f"{run_dir}: another nlgkit train (process 4242) is training this run")
    assert not (run_dir / "metrics.jsonl").exists()
    assert cli("train", str(recipe)).exit_code == 0  # the lock dropped with its holder


def test_a_run_stops_once_its_learning_rate_decays_below_stop_min_lr(paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """fairseq's --stop-min-lr: the epoch whose rate falls below the floor is the last one, and says why."""
    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "floor", max_epochs=8, schedule="inverse_sqrt",
                         warmup_updates=1, stop_min_lr=0.18 * 0.005)  # 12 updates an epoch: 0.28, 0.20, 0.16 × lr
    result = cli("train", str(recipe))
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "floor" / "metrics.jsonl").read_text().splitlines()]
    rates = [record["lr"] for record in records if record["event"] == "valid"]
    assert len(rates) == 3 and rates[-1] < 0.18 * 0.005 <= min(rates[:-1])
    summary = json.loads((tmp_path / "floor" / "summary.json").read_text())
    assert summary["finished"] and summary["stop_reason"] == f"learning rate {rates[-1]:.2e} below train.stop_min_lr = 0.0009"
    bad = cli("train", str(recipe), "--set", "train.stop_min_lr=0.001", "--set", "train.min_lr=0.001")
    assert bad.exit_code != 0 and "train.stop_min_lr = 0.001 can never be passed" in " ".join(bad.output.split())


def test_a_finished_run_goes_on_when_resumed_with_more_epochs(paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Extending a run that stopped at max_epochs ends where a run started with the larger limit ends."""
    data_dir = paper[0]
    whole = tiny_recipe(tmp_path, data_dir, tmp_path / "whole", max_epochs=3)
    assert cli("train", str(whole)).exit_code == 0
    short = tiny_recipe(tmp_path, data_dir, tmp_path / "short", max_epochs=2)
    assert cli("train", str(short)).exit_code == 0
    again = cli("train", str(short), "--resume")
    assert again.exit_code == 0 and "already finished (train.max_epochs = 2 reached)" in " ".join(again.output.split())
    result = cli("train", str(short), "--resume", "--set", "train.max_epochs=3")
    assert result.exit_code == 0 and "let it go on from epoch 3" in " ".join(result.output.split()), result.output
    for name in ("last", "best"):
        assert_same_weights(tmp_path / "whole", tmp_path / "short", name)
    summary = json.loads((tmp_path / "short" / "summary.json").read_text())
    assert summary["finished"] and summary["epoch"] == 3 and summary["stop_reason"] == "train.max_epochs = 3 reached"
    records = [json.loads(line) for line in (tmp_path / "short" / "metrics.jsonl").read_text().splitlines()]
    events = [record["event"] for record in records]
    assert events.count("extend") == 1 and events.count("valid") == 3
    # the run directory records the limits it went on with, and the resume event the ones it had
    assert json.loads((tmp_path / "short" / "config.json").read_text())["train"]["max_epochs"] == 3
    assert [r["changed"] for r in records if r["event"] == "resume"] == [{}, {"train.max_epochs": [2, 3]}]


def test_dry_run_prints_the_papers_parameter_counts(paper) -> None:  # type: ignore[no-untyped-def]
    data_dir = str(paper[0])
    expected = {"multi30k_learned": 13_893_381, "multi30k_fixed": 10_870_272,
                "multi30k_en_de_learned": 14_898_861, "multi30k_en_de_fixed": 10_870_272}
    for recipe, count in expected.items():
        result = cli("train", str(RECIPES / f"{recipe}.toml"), "--dry-run", "--set", f"data.dir='{data_dir}'")
        assert result.exit_code == 0, result.output
        assert f"trainable parameters: {count}" in result.stdout


def one_line_error(result, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_bad_input_gives_one_line_errors(trained: tuple[Path, Path], paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    recipe, run_dir = trained
    one_line_error(cli("train", str(recipe), "--set", "train.lrr=1"), "unknown key 'train.lrr'", str(recipe))
    one_line_error(cli("train", str(recipe), "--set", "train.batch_size='x'"), "train.batch_size")
    one_line_error(cli("train", str(tmp_path / "missing.toml")), "missing.toml")
    one_line_error(cli("train", str(recipe), "--set", f"data.dir='{tmp_path / 'nodata'}'", "--run-dir",
                       str(tmp_path / "r")), "nodata")
    one_line_error(cli("train", str(recipe)), "already holds a trained run")
    one_line_error(cli("train", str(recipe), "--resume", "--set", "model.decoder_dim=32"), "model.decoder_dim")
    # what the saved optimizer, schedule and batch order would override or mix with (a new train.lr was ignored
    # while config.json named it)
    for setting, was in (("train.lr=0.1", "0.005"), ("train.seed=4", "3"), ("train.batch_size=10", "25")):
        key = setting.split("=")[0]
        one_line_error(cli("train", str(recipe), "--resume", "--set", setting), f"{key} was {was} when this run "
                       "started", "--init-from")
    assert json.loads((run_dir / "config.json").read_text())["train"]["lr"] == 0.005
    one_line_error(cli("translate", "--model", str(tmp_path / "norun")), "norun")
    one_line_error(cli("translate", "--model", str(run_dir), "--input", str(tmp_path / "none.de")), "none.de")
    one_line_error(cli("translate", "--model", str(run_dir), "--sampling-topk", "5", input="ein hund\n"),
                   "--sampling-topk: only with --sampling")
    one_line_error(cli("translate", "--model", str(run_dir), "--device", "gpu7", input="ein hund\n"),
                   "--device 'gpu7': not a device")  # (the option, not the recipe's train.device)
    one_line_error(cli("translate", "--model", str(run_dir), "--checkpoint", "", input="ein hund\n"),
                   "--checkpoint: empty")
    # a vocabulary that does not match the checkpoint
    other = tmp_path / "other_run"
    import shutil

    shutil.copytree(run_dir, other)
    with open(other / "data" / "vocab.en.txt", "a", encoding="utf-8") as handle:
        handle.write("extra\t1\n")
    out = tmp_path / "never.en"
    one_line_error(cli("translate", "--model", str(other), "--output", str(out), input="ein hund\n"), "vocab.en.txt")
    assert not out.exists()
    # evaluate: lengths differ
    h, r = tmp_path / "h.txt", tmp_path / "r.txt"
    h.write_text("a\nb\n")
    r.write_text("a\n")
    result = cli("evaluate", "--hyp", str(h), "--ref", str(r))
    assert result.exit_code != 0 and "Traceback" not in result.output


def test_a_signal_stops_cleanly_between_updates_and_resume_continues(paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import os
    import signal

    from nlgkit.train.trainer import Trainer

    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "sig", max_updates=8)
    config = load_recipe(recipe)
    trainer = Trainer(config, show_progress=False)
    original = trainer.train_step
    calls = []

    def step_then_signal(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or a cluster scheduler would
        return original(*args, **kwargs)

    trainer.train_step = step_then_signal  # type: ignore[method-assign]
    summary = trainer.run()
    assert summary["update"] == 3 and "signal" in summary["stop_reason"]
    assert trainer.stopped_by_signal == signal.SIGTERM  # `nlgkit train` exits 143: stopped, not done
    assert cli("train", str(recipe), "--resume").exit_code == 0
    assert json.loads((tmp_path / "sig" / "summary.json").read_text())["update"] == 8


def test_a_run_a_signal_stopped_exits_with_its_status(paper, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Was exit 0, so that `nlgkit train … && nlgkit translate …` went on after a Ctrl-C: 128 + the signal, as the
    shell reports a process a signal ended; the run resumes to its end and then exits 0."""
    import os
    import signal

    from nlgkit.train.trainer import Trainer

    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "sig", max_updates=4)
    original, calls = Trainer.train_step, []

    def step_then_signal(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", step_then_signal)
        result = cli("train", str(recipe))
    assert result.exit_code == 128 + signal.SIGINT, result.output
    assert "stopped by a signal" in result.output and "Traceback" not in result.output
    assert cli("train", str(recipe), "--resume").exit_code == 0


def test_table4_reports_word_similarity_for_each_benchmark(trained: tuple[Path, Path], tmp_path: Path) -> None:
    from nlgkit.experiments.shalev import table4

    _, run_dir = trained
    out = tmp_path / "table4.md"
    text = table4([str(run_dir)], str(out))
    table4_part = text.split("## Fig. 2")[0]  # Fig. 2's norm table follows, one row per run
    rows = [line for line in table4_part.splitlines() if line.startswith(f"| `{run_dir.name}` |")]
    assert [row.split(" | ")[2] for row in rows] == ["simlex999", "men", "mturk771"]
    # a fixed head is not a paper row: the paper columns stay empty
    assert all(row.split(" | ")[4] == "–" for row in rows)
    assert out.read_text() == text


def test_max_len_caps_every_output(trained: tuple[Path, Path]) -> None:
    _, run_dir = trained
    result = cli("translate", "-m", str(run_dir), "--max-len", "3", "--no-detokenize",
                 input="ein mann mit einem hut fährt ein rotes fahrrad durch die stadt .\nein hund\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == 2 and all(len(line.split()) <= 3 for line in lines)


def test_embed_extracts_a_trained_runs_target_and_input_vectors(trained: tuple[Path, Path], tmp_path: Path) -> None:
    """The "pre-trained" targets of a continuous model come from a discrete one (Tokarchuk & Niculae)."""
    from nlgkit.wordvectors.tables import load_table

    _, run_dir = trained
    run = load_trained(run_dir, "best", "cpu")
    for side, expected in (("target", run.model.head.target_vectors()), ("input", run.model.target_embedding().weight)):
        out = tmp_path / f"{side}.safetensors"
        result = cli("embed", "extract", str(run_dir), "-o", str(out), "--side", side)
        assert result.exit_code == 0, result.output
        vectors, words = load_table(out)
        assert words == run.tgt_vocab.tokens and torch.equal(vectors, expected.detach().float())
    result = cli("embed", "extract", str(tmp_path / "no-run"), "-o", str(tmp_path / "x.safetensors"))
    assert result.exit_code != 0 and "no-run" in result.stderr and "\n" not in result.stderr.strip()


RNN_SECTION = """type = "rnn"
embedding_dim = 48
encoder_dim = 64
decoder_dim = 64
attention_dim = 48
pre_output_dim = 64
dropout = 0.1"""
SECTIONS = {
    "continuous": 'type = "continuous"\ndim = 32', "joint": 'type = "joint"\njoint_dim = 64',
    "sampled": 'type = "learned"\n[head.sampling]\nshare = 0.5',
    "luong": 'type = "lstm_luong"\nembedding_dim = 64\nhidden_dim = 96\nlayers = 1\ndropout = 0.1',
    "transformer": 'type = "transformer"\npreset = "small"\ndim = 64\nffn_dim = 128\nencoder_layers = 2\n'
                   'decoder_layers = 2\ndropout = 0.1',
}


@pytest.mark.parametrize("name", ["continuous", "joint", "sampled", "luong", "transformer"])
def test_a_research_head_or_model_learns_to_translate_through_the_trainer(name: str, tmp_path: Path,
                                                                          request: pytest.FixtureRequest) -> None:
    """The new heads and models train through the unchanged trainer and search: memorised training sentences
    come out clearly better than from the same model untrained (beam 3; the continuous head's vMF scores), on
    the 2,000-pair slice's vocabulary (1,302 target words). The Transformer trains a learned head (15 epochs: BLEU
    14.8 against 0.03 untrained; the fixed one took 40 epochs; every head with it learns a batch in
    test_transformer). The Luong model keeps the fixed head and the whole corpus's vocabulary and trains on the 100
    sentences it is scored on, 10 a batch (60 epochs, 600 updates: BLEU 11.45 against 0.01 untrained; on the
    slice's vocabulary 3.52; 300 sentences, 25 a batch, 50 epochs: 5.57 in half as much time again; a small batch
    costs less per update, its step loop the same; it validates every 300 updates, not each epoch: 77 s against 89 s
    in one run beside other work). Validation reads 10 sentences: the assertion is on the last checkpoint, and in
    10–15 epochs (Luong: two validations) the schedule never acts on validation."""
    data_dir = request.getfixturevalue("paper" if name == "luong" else "paper_slice")[0]
    extra = {"transformer": {"schedule": "inverse_sqrt", "warmup_updates": 30, "lr": 0.003, "max_epochs": 15,
                             "adam_betas": [0.9, 0.98]},
             "luong": {"max_epochs": 60, "lr": 0.01, "batch_size": 10, "train_limit": 100,
                       "validate_every_updates": 300}}.get(name, {"max_epochs": 10})
    recipe = tiny_recipe(tmp_path, data_dir, tmp_path / name, valid_limit=10, **extra)
    text = recipe.read_text()
    if name in ("luong", "transformer"):
        text = text.replace(RNN_SECTION, SECTIONS[name])
        if name == "transformer":
            text = text.replace('type = "fixed"\ninit = "l2"\nbias = "fixed"', 'type = "learned"')
    else:
        text = text.replace('type = "fixed"\ninit = "l2"\nbias = "fixed"', SECTIONS[name])
    assert text != recipe.read_text()
    recipe.write_text(text)
    result = cli("train", str(recipe))
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    train = [e for e in events if e["event"] == "train"]
    assert train and all(("sampling_overflows" in e) == (name == "sampled") for e in train)
    trained_bleu, untrained_bleu = trained_and_untrained_bleu(recipe, tmp_path / name, data_dir)
    assert trained_bleu > untrained_bleu + 5, (trained_bleu, untrained_bleu)


def test_replace_unk_fills_each_unknown_word_from_the_source_word_its_step_attended_to(
        trained: tuple[Path, Path], paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``--replace-unk`` changes nothing but the <unk> tokens of the same outputs, each into a word of its own
    source line (or its entry in ``--phrase-table``); errors name the flag or the table's line."""
    _, run_dir = trained
    lines = read_lines(paper[0] / "test.de")[:150]  # spaCy tokens, lowercased: the source tokens as the model reads them
    source = tmp_path / "test.de"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    table = tmp_path / "table.txt"
    table.write_text("".join(f"{word}|||«{word}»\n" for word in sorted({w for line in lines for w in line.split()})),
                     encoding="utf-8")
    common = ("translate", "-m", str(run_dir), "--pretokenized", "--no-detokenize", "--input", str(source))
    outputs = []
    for extra in ((), ("--replace-unk",), ("--replace-unk", "--phrase-table", str(table))):
        result = cli(*common, *extra)
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout.splitlines())
    assert len(outputs[0]) == len(outputs[1]) == len(outputs[2]) == len(lines)
    unknown = replaced = 0
    for line, plain, copied, looked_up in zip(lines, *outputs):
        plain_words, copied_words, table_words = plain.split(), copied.split(), looked_up.split()
        assert len(plain_words) == len(copied_words) == len(table_words), (plain, copied, looked_up)
        for word, copy, entry in zip(plain_words, copied_words, table_words):
            if word != "<unk>":
                assert word == copy == entry
                continue
            unknown += 1
            if copy != "<unk>":  # (an <unk> whose step looked at the source's end marker stays)
                replaced += 1
                assert copy in line.split() and entry == f"«{copy}»", (line, copy, entry)
    assert unknown >= 5 and replaced >= 0.8 * unknown, (unknown, replaced)

    # --report-align: the same text, then `||| SRC-TGT` pairs over the output's tokens and the line's source tokens
    reported = cli(*common, "--report-align")
    assert reported.exit_code == 0, reported.output
    aligned_lines = reported.stdout.splitlines()
    assert len(aligned_lines) == len(lines)
    pairs_seen = 0
    for line, plain, with_pairs in zip(lines, outputs[0], aligned_lines):
        text, pairs = with_pairs.split(" ||| ")
        assert text == plain
        points = [tuple(map(int, pair.split("-"))) for pair in pairs.split()]
        assert [t for _, t in points] == sorted({t for _, t in points})  # each output token at most once, in order
        assert all(0 <= s < len(line.split()) and 0 <= t < len(text.split()) for s, t in points), (line, with_pairs)
        pairs_seen += len(points)
    assert pairs_seen >= 0.8 * sum(len(text.split()) for text in outputs[0])  # few tokens look at the end marker
    one_line_error(cli("translate", "-m", str(run_dir), "--report-align", input="ein hund\n"), "--no-detokenize")

    one_line_error(cli(*common, "--phrase-table", str(table)), "--phrase-table: only with --replace-unk")
    table.write_text("mann|||man\nhund hund|||dog\n", encoding="utf-8")
    one_line_error(cli(*common, "--replace-unk", "--phrase-table", str(table)), str(table), "line 2")
    one_line_error(cli(*common, "--replace-unk", "--score-reference", str(source)), "--replace-unk")


def test_token_scores_end_each_line_in_its_tokens_log_probabilities(
        trained: tuple[Path, Path], paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``--token-scores`` (fairseq's positional scores): one log-probability per output token and one for the EOS,
    summing to the output's score, after the alignment when both are asked, on every n-best line; with
    ``--score-reference`` a third column that sums to LOG_PROB; the text is unchanged."""
    _, run_dir = trained
    lines = read_lines(paper[0] / "test.de")[:40]
    source = tmp_path / "test.de"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    common = ("translate", "-m", str(run_dir), "--pretokenized", "--no-detokenize", "--input", str(source),
              "--length-penalty", "0")  # scores: the raw log-probabilities
    plain = cli(*common, "--nbest", "2", "--beam", "4")
    scored = cli(*common, "--nbest", "2", "--beam", "4", "--report-align", "--token-scores")
    assert plain.exit_code == 0 and scored.exit_code == 0, scored.output
    assert len(scored.stdout.splitlines()) == 2 * len(lines)
    for before, row in zip(plain.stdout.splitlines(), scored.stdout.splitlines(), strict=True):
        index, text, score, pairs, per_token = row.split(" ||| ")
        assert f"{index} ||| {text} ||| {score}" == before and ("-" in pairs or not text)
        values = [float(v) for v in per_token.split()]
        assert len(values) in (len(text.split()), len(text.split()) + 1)  # + the EOS, unless cut at max_len
        assert all(v <= 0 for v in values) and abs(sum(values) - float(score)) < 2e-3 + 1e-4 * len(values)
    assert sum(len(row.split(" ||| ")[4].split()) == len(row.split(" ||| ")[1].split()) + 1
               for row in scored.stdout.splitlines()) >= len(lines)  # most ended with their EOS

    refs = tmp_path / "test.en"
    refs.write_text("".join(line + "\n" for line in read_lines(paper[0] / "test.en")[:40]), encoding="utf-8")
    references = cli("translate", "-m", str(run_dir), "--pretokenized", "--input", str(source), "--score-reference",
                     str(refs), "--token-scores")
    assert references.exit_code == 0, references.output
    for row in references.stdout.splitlines():
        log_prob, count, per_token = row.split("\t")
        values = [float(v) for v in per_token.split()]
        assert len(values) == int(count) and abs(sum(values) - float(log_prob)) < 2e-3 + 1e-4 * len(values)
    one_line_error(cli("translate", "-m", str(run_dir), "--token-scores", input="ein hund\n"), "--no-detokenize")


def test_evaluate_confidence_pools_the_references_token_scores_by_frequency(
        trained: tuple[Path, Path], paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``evaluate confidence RUN…``: every test reference token and EOS lands in one bin, the bins' log-probabilities
    add up to the references' forced scores (``--score-reference``), and a trained model is surer of words it saw
    a thousand times than of words it saw under ten (it was trained on them far more often)."""
    _, run_dir = trained
    png = tmp_path / "confidence.png"
    result = cli("evaluate", "confidence", str(run_dir), "--data-dir", str(paper[0]), "--json", "--device", "cpu",
                 "--png", str(png))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["png"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (entry,) = json.loads(result.stdout)["runs"].values()
    bins = {b["bin"]: b for b in entry["bins"]}
    references = [line.split() for line in read_lines(paper[0] / "test.en")]
    assert sum(b["tokens"] for b in bins.values()) == sum(len(r) + 1 for r in references)
    assert bins["</s>"]["tokens"] == len(references)
    scored = cli("translate", "-m", str(run_dir), "--pretokenized", "--input", str(paper[0] / "test.de"),
                 "--score-reference", str(paper[0] / "test.en"), "--device", "cpu")
    assert scored.exit_code == 0, scored.output
    total = sum(float(row.split("\t")[0]) for row in scored.stdout.splitlines())
    pooled = sum(b["tokens"] * b["mean_log_prob"] for b in bins.values() if b["tokens"])
    assert abs(pooled - total) < 1e-3 * abs(total), (pooled, total)
    rare = [b for b in bins.values() if b["bin"] in ("1", "2", "3", "4", "[5,10)") and b["tokens"]]
    assert rare and bins[">=1000"]["mean_log_prob"] > max(b["mean_log_prob"] for b in rare) + 1.0, bins
    one_line_error(cli("evaluate", "confidence", str(run_dir), "--data-dir", str(paper[0]), "--split", "nope"),
                   "nope.en")
    one_line_error(cli("evaluate", "confidence", str(run_dir), str(run_dir)), "named twice")


def test_target_prefix_starts_each_output_with_its_line(trained: tuple[Path, Path], paper,  # type: ignore[no-untyped-def]
                                                        tmp_path: Path) -> None:
    """``--target-prefix FILE``: each output begins with its line of FILE (tokenised as the targets; an empty line
    leaves its output free), in one batch and streamed; a FILE of another length is a one-line error."""
    _, run_dir = trained
    lines = read_lines(paper[0] / "test.de")[:30]
    starts = [" ".join(line.split()[:2]) if i % 3 else "" for i, line in enumerate(read_lines(paper[0] / "test.en")[:30])]
    starts[2] += " Zzyzx-not-a-word"  # forced as <unk>, with a warning naming the file and line
    source, prefix = tmp_path / "test.de", tmp_path / "prefix.en"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    prefix.write_text("".join(start + "\n" for start in starts), encoding="utf-8")
    common = ("translate", "-m", str(run_dir), "--pretokenized", "--no-detokenize", "--input", str(source))
    free = cli(*common)
    forced = cli(*common, "--target-prefix", str(prefix))
    streamed = cli(*common, "--target-prefix", str(prefix), "--buffer-size", "7")
    assert free.exit_code == forced.exit_code == streamed.exit_code == 0, forced.output
    assert forced.stdout == streamed.stdout
    for result in (forced, streamed):
        assert (f"warning: --target-prefix {prefix}: line 3: target prefix {starts[2]!r}: 'Zzyzx-not-a-word' not in "
                "the target vocabulary, forced as <unk>") in result.stderr.splitlines()
    changed = 0
    for start, plain, out in zip(starts, free.stdout.splitlines(), forced.stdout.splitlines(), strict=True):
        if not start:
            assert out == plain  # no prefix: the free output
            continue
        head = out.split()[: len(start.split())]
        assert all(word in (wanted, "<unk>") for word, wanted in zip(head, start.split(), strict=True)), (start, out)
        changed += out != plain
    assert changed >= 5  # the references' first words are not all the model's own
    prefix.write_text("a man\n", encoding="utf-8")
    one_line_error(cli(*common, "--target-prefix", str(prefix)), "--target-prefix", "1 lines for the 30 lines")
    starts[2] = starts[2].removesuffix(" Zzyzx-not-a-word")  # (the streamed groups before the error would warn)
    prefix.write_text("".join(start + "\n" for start in starts) + "one line too many\n", encoding="utf-8")
    written = tmp_path / "out.en"  # streamed, a longer FILE shows only at the input's end: still nothing written
    one_line_error(cli(*common, "--target-prefix", str(prefix), "--buffer-size", "7", "--output", str(written)),
                   "--target-prefix", "31 lines for the 30 lines")
    assert not written.exists()


def test_constraints_put_their_phrases_in_each_output(trained: tuple[Path, Path], paper,  # type: ignore[no-untyped-def]
                                                      tmp_path: Path) -> None:
    """``--constraints FILE``: each output holds its line's tab-separated phrases, here two reference words the
    free output lacks (an empty line leaves the output free); a phrase with a word outside the vocabulary is left
    out with a warning naming the line; streamed equals whole; wrong lengths, ct2 and sampling are one-line errors."""
    _, run_dir = trained
    lines = read_lines(paper[0] / "test.de")[:24]
    references = read_lines(paper[0] / "test.en")[:24]
    source, wanted = tmp_path / "test.de", tmp_path / "constraints.en"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    common = ("translate", "-m", str(run_dir), "--pretokenized", "--no-detokenize", "--input", str(source),
              "--beam", "4")
    free = cli(*common)
    assert free.exit_code == 0, free.output
    vocabulary = {word for out in free.stdout.splitlines() for word in out.split()} - {"<unk>"}
    phrases = []
    for i, (reference, out) in enumerate(zip(references, free.stdout.splitlines(), strict=True)):
        missing = [w for w in reference.split() if w in vocabulary and w not in out.split()]
        phrases.append([] if i % 4 == 0 or len(missing) < 2 else [missing[0], missing[-1]])
    phrases[1] = [*phrases[1], "Zzyzx-not-a-word"]
    wanted.write_text("".join("\t".join(p) + "\n" for p in phrases), encoding="utf-8")
    constrained = cli(*common, "--constraints", str(wanted))
    streamed = cli(*common, "--constraints", str(wanted), "--buffer-size", "5")
    assert constrained.exit_code == streamed.exit_code == 0, constrained.output
    assert constrained.stdout == streamed.stdout
    assert "constraints.en: line 2: constraint 'Zzyzx-not-a-word' left out" in constrained.stderr
    outputs = constrained.stdout.splitlines()
    assert len(outputs) == 24 and sum(bool(p) for p in phrases) >= 10
    for out, plain, words in zip(outputs, free.stdout.splitlines(), phrases, strict=True):
        assert all(word in out.split() for word in words if word in vocabulary), (words, out)
        if not [word for word in words if word in vocabulary]:
            assert out == plain
    wanted.write_text("a\n", encoding="utf-8")
    one_line_error(cli(*common, "--constraints", str(wanted)), "--constraints", "1 lines for the 24 lines")
    wanted.write_text("a\n" * 25, encoding="utf-8")
    one_line_error(cli(*common, "--constraints", str(wanted), "--buffer-size", "5"), "--constraints",
                   "25 lines for the 24 lines")
    one_line_error(cli(*common, "--constraints", str(wanted), "--sampling"), "--constraints", "not with --sampling")
    one_line_error(cli(*common, "--constraints", str(wanted), "--engine", "ct2"), "--constraints", "CTranslate2")
