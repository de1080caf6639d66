"""A task that nlgkit has never heard of (tests/plugins/reverse_task.py: write the source reversed) trains,
decodes, evaluates, reports, is benchmarked and analysed through the public commands, with no file under
nlgkit/ edited for it: the proof that every path through the toolkit goes through the task protocol."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import nlgkit_command
from plugins import reverse_task  # noqa: F401  (registers the "reverse" task)

from nlgkit.core.registry import TASKS

PACKAGE = Path(__file__).resolve().parents[1] / "nlgkit"


def test_nothing_under_nlgkit_names_the_test_task() -> None:
    assert "reverse" in TASKS.names()
    assert [p for p in PACKAGE.rglob("*.py") if "reverse_task" in p.read_text(encoding="utf-8")] == []


@pytest.fixture(scope="module")
def corpus(multi30k_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real German captions reduced to their 40 most frequent words: 3–6 such words a line."""
    with gzip.open(multi30k_source / "task1" / "raw" / "train.de.gz", "rt", encoding="utf-8") as handle:
        lines = [line.lower().replace(".", " ").split() for line in handle][:6000]
    frequent = {word for word, _ in Counter(w for line in lines for w in line).most_common(40)}
    kept = [[w for w in line if w in frequent] for line in lines]
    kept = [line for line in kept if 3 <= len(line) <= 6]
    path = tmp_path_factory.mktemp("reverse") / "sentences.txt"
    path.write_text("".join(" ".join(line) + "\n" for line in kept[:1300]), encoding="utf-8")
    return path


def recipe(tmp: Path, corpus: Path, run_dir: Path, updates: int) -> Path:
    path = tmp / f"{run_dir.name}.toml"
    path.write_text(f"""
[run]
dir = "{run_dir}"
[task]
type = "reverse"
[data]
dir = "{tmp / 'data'}"
[data.prepare]
source = "{corpus}"
valid_size = 60
test_size = 60
[model]
type = "rnn"
embedding_dim = 32
encoder_dim = 64
decoder_dim = 64
attention_dim = 32
dropout = 0.0
[head]
type = "tied"
[train]
lr = 0.01
batch_size = 32
max_epochs = 40
max_updates = {updates}
log_every = 20
seed = 5
[search]
beam = 2
""")
    return path


@pytest.fixture(scope="module")
def runs(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The same recipe trained for 1 and for 500 updates (the data prepared by `train` itself)."""
    tmp = tmp_path_factory.mktemp("reverse_runs")
    untrained, trained = tmp / "untrained", tmp / "trained"
    nlgkit_command(["train", str(recipe(tmp, corpus, untrained, 1)), "--device", "cpu"])
    nlgkit_command(["train", str(recipe(tmp, corpus, trained, 500)), "--device", "cpu"])
    return tmp / "data", untrained, trained


def test_the_plugin_task_trains_decodes_and_evaluates(runs: tuple[Path, Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    data_dir, untrained, trained = runs
    assert sorted(p.name for p in (trained / "data").iterdir()) == ["manifest.json", "vocab.xx.txt"]
    # decode: `nlgkit translate` reads text through the task, one line out per line in (an empty one too)
    sources = (data_dir / "test.txt").read_text(encoding="utf-8").splitlines()
    (tmp_path / "in.txt").write_text("\n".join(sources[:5] + [""] + sources[5:]) + "\n", encoding="utf-8")
    for run in (untrained, trained):
        nlgkit_command(["translate", "--model", str(run), "--input", str(tmp_path / "in.txt"), "--output",
                        str(tmp_path / f"{run.name}.out"), "--device", "cpu", "--beam", "2"])
    outputs = (tmp_path / "trained.out").read_text(encoding="utf-8").splitlines()
    assert len(outputs) == len(sources) + 1 and outputs[5] == ""
    refs = [" ".join(s.split()[::-1]) for s in sources]
    (tmp_path / "ref.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    # evaluate: the same scorer any translation goes through
    scores = {}
    for run in (untrained, trained):
        hyps = (tmp_path / f"{run.name}.out").read_text(encoding="utf-8").splitlines()
        (tmp_path / f"{run.name}.hyp").write_text("\n".join(hyps[:5] + hyps[6:]) + "\n", encoding="utf-8")
        capsys.readouterr()
        nlgkit_command(["evaluate", "--hyp", str(tmp_path / f"{run.name}.hyp"), "--ref", str(tmp_path / "ref.txt"),
                        "--json"])
        scores[run.name] = json.loads(capsys.readouterr().out)["bleu"]["score"]
    assert scores["trained"] > scores["untrained"] + 30, scores  # it learned to reverse, far beyond chance
    exact = sum(o == r for o, r in zip(outputs[:5] + outputs[6:], refs))
    assert exact >= len(refs) // 2


def test_the_plugin_task_is_reported_and_analysed(runs: tuple[Path, Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, untrained, trained = runs
    # report: test outputs generated through the task's own split reading, kept, scored, compared
    nlgkit_command(["evaluate", "report", str(trained), str(untrained), "--baseline", str(untrained),
                    "--output", str(tmp_path / "report.md"), "--samples", "100", "--device", "cpu"])
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "trained" in markdown and "untrained" in markdown
    kept = trained / "test.hyp.xx"
    assert kept.is_file() and len(kept.read_text(encoding="utf-8").splitlines()) == 60
    assert (trained / "test.hyp.xx.json").is_file()  # the stamp: which checkpoint and search made them
    # a run record of it (weights left behind) gives the same report
    nlgkit_command(["reproduce", "archive", str(trained), "--into", str(tmp_path / "records")])
    record = tmp_path / "records" / "trained"
    assert (record / "data" / "test.txt").is_file() and not list(record.rglob("*.safetensors"))
    nlgkit_command(["evaluate", "report", str(record), "--output", str(tmp_path / "record.md"), "--samples", "100"])
    row = [line for line in markdown.splitlines() if line.startswith("| trained")]
    assert row and row[0].split("|")[2] in (tmp_path / "record.md").read_text(encoding="utf-8")
    # the run-log summary and the word-vector analyses read any task's run
    nlgkit_command(["reproduce", "log-summary", str(trained), "--output", str(tmp_path / "log.md")])
    assert "trained" in (tmp_path / "log.md").read_text(encoding="utf-8")
    capsys.readouterr()
    nlgkit_command(["evaluate", "norms", str(trained), "--json"])
    norms = json.loads(capsys.readouterr().out)
    assert set(norms["sets"]) == {"src_input", "tgt_input", "tgt_output"}
    # bench: the beam-search benchmark reads the split through the task and names its items as the task does
    nlgkit_command(["bench", "--generate", str(trained), "--beam", "2", "--limit", "20", "--device", "cpu"])
    figures = json.loads(capsys.readouterr().out)
    assert (figures["task"], figures["sentences"]) == ("reverse", 20) and figures["sentences_per_s"] > 0
    assert figures["compute_type"] == "float32"
    nlgkit_command(["bench", "--generate", str(trained), "--limit", "20", "--device", "cpu", "--compute-type", "bfloat16"])
    assert json.loads(capsys.readouterr().out)["compute_type"] == "bfloat16"
