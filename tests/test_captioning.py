"""Captioning end to end on a real Flickr8k slice: prepare → train → caption → score, and bad images."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import typer
from click.testing import Result
from helpers import with_head
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.recipes import load_recipe
from nlgkit.generation.caption import caption_images
from nlgkit.generation.decode import best_texts, generate
from nlgkit.generation.output import SearchOptions
from nlgkit.metrics.captions import caption_scores
from nlgkit.models import MODELS
from nlgkit.runs.loading import load_trained
from nlgkit.tasks.captioning import read_records

SMALL = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k-1k"


def cli(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), input=input)


@pytest.fixture(scope="module")
def caption_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 training and 40 validation images of the real Flickr8k subset, prepared through the CLI."""
    if not (SMALL / "captions.txt").is_file():
        pytest.skip(f"{SMALL} not available")
    root = tmp_path_factory.mktemp("captions")
    splits = root / "splits"
    splits.mkdir()
    for name, count in (("train.txt", 200), ("val.txt", 40), ("test.txt", 20)):
        (splits / name).write_text("\n".join((SMALL / name).read_text().split()[:count]) + "\n")
    result = cli("prepare", "captions", "--csv", str(SMALL / "captions.txt"), "--images", str(SMALL / "images"),
                 "--splits", str(splits), "--out", str(root / "data"), "--min-freq", "3")
    assert result.exit_code == 0, result.output
    return root / "data"


def recipe(tmp: Path, data_dir: Path, run_dir: Path) -> Path:
    path = tmp / "caption.toml"
    path.write_text(f"""
[run]
dir = "{run_dir}"
[task]
type = "captioning"
metric = "cider"
[task.encoder]
image_size = 160  # half the default's pixels; validation CIDEr 12.2 vs 0.4 untrained (15.8 vs 0.3 at 224)
[data]
dir = "{data_dir}"
tgt_lang = "en"
[data.prepare]
corpus = "none"
[model]
type = "show_attend_tell"
embedding_dim = 64
hidden_dim = 96
attention_dim = 48
dropout = 0.1
[head]
type = "fixed"
init = "uniform"
bias = "learned"
[train]
lr = 0.004
batch_size = 32
max_epochs = 8
log_every = 10
seed = 2
[search]
beam = 3
max_len_a = 0.0
max_len_b = 16
""")
    return path


@pytest.fixture(scope="module")
def trained(caption_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("caption_run")
    path = recipe(tmp, caption_data, tmp / "run")
    result = cli("train", str(path), "--device", "cpu")
    assert result.exit_code == 0, result.output
    return path, tmp / "run"


def test_training_beats_an_untrained_captioner_by_a_clear_margin(trained: tuple[Path, Path],
                                                                 caption_data: Path) -> None:
    path, run_dir = trained
    run = load_trained(run_dir, "best", "cpu")
    valid = read_records(caption_data / "valid.jsonl")
    names = [r["image"] for r in valid]
    spatial, pooled = run.task.features(caption_data, json.loads((caption_data / "manifest.json").read_text()),
                                        names)
    sources = [(spatial[i], pooled[i]) for i in range(len(names))]
    refs = [r["refs"] for r in valid]

    def cider(model) -> float:  # type: ignore[no-untyped-def]
        hyps = generate(model, run.task, sources, run.tgt_vocab, beam=3, max_len_a=0.0, max_len_b=16)
        texts = best_texts(hyps, run.tgt_vocab, run.detokenizer())
        return caption_scores(texts, refs, meteor=False)["scores"]["CIDEr"]["score"]

    config = load_recipe(path)
    untrained = MODELS.build(config.model, context=run.task.model_context(run.vocabs))
    untrained = with_head(untrained, "fixed", len(run.tgt_vocab), init="uniform", bias="learned").eval()
    trained_cider, untrained_cider = cider(run.model), cider(untrained)
    assert trained_cider > untrained_cider + 5.0, (trained_cider, untrained_cider)

    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    valid_events = [e for e in events if e["event"] == "valid"]
    assert all(e["metric"] == "cider" and "bleu4" in e for e in valid_events)
    train_events = [e for e in events if e["event"] == "train"]
    assert all("aux_attention" in e for e in train_events)  # the regulariser is logged
    assert json.loads((run_dir / "config.json").read_text())["task"]["type"] == "captioning"
    assert json.loads((run_dir / "manifest.json").read_text())["kind"] == "captions"


def test_caption_keeps_one_line_per_image_and_names_bad_files(trained: tuple[Path, Path], caption_data: Path,
                                                              tmp_path: Path) -> None:
    _, run_dir = trained
    images = sorted((SMALL / "images").iterdir())[:3]
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "text.jpg").write_text("hello")
    (tmp_path / "cut.jpg").write_bytes(images[0].read_bytes()[:400])
    paths = [str(images[0]), str(tmp_path / "empty.jpg"), str(images[1]), str(tmp_path / "missing.jpg"),
             str(tmp_path / "text.jpg"), str(tmp_path / "cut.jpg"), str(images[2])]
    result = cli("caption", "--model", str(run_dir), *paths, "--device", "cpu", "--beam", "3")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == len(paths)
    assert [bool(line) for line in lines] == [True, False, True, False, False, False, True]
    for bad in paths[1:2] + paths[3:6]:
        assert bad in result.stderr
    assert all(line.startswith("error: ") for line in result.stderr.splitlines())

    listing = tmp_path / "list.txt"
    listing.write_text("\n".join(paths[:3]) + "\n")
    result = cli("caption", "--model", str(run_dir), "--list", str(listing), "--json", "--nbest", "2",
                 "--attention", str(tmp_path / "att"), "--device", "cpu", "--beam", "3")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [("error" in r) for r in records] == [False, True, False]
    assert all(len(r["captions"]) == 2 for r in records if "captions" in r)
    pngs = sorted((tmp_path / "att").iterdir())
    assert len(pngs) == 2 and all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    # the captions equal those of the plain command (same search), one per image
    plain = cli("caption", "--model", str(run_dir), paths[0], paths[2], "--device", "cpu", "--beam", "3")
    assert plain.exit_code == 0
    assert plain.stdout.splitlines() == [r["captions"][0]["text"] for r in records if "captions" in r]
    # progress after each batch of images, failed ones counted as done; the same captions as without it
    run = load_trained(run_dir, "best", "cpu")
    calls: list[tuple[int, int]] = []
    options = SearchOptions.resolve(run.config.search, beam=3, batch_size=2)
    watched = caption_images(run, paths, options, warn=lambda _: None, on_batch=lambda *call: calls.append(call))
    assert calls == [(2, 7), (4, 7), (6, 7), (7, 7)]  # batches [0, 1×], [2, 3×], [4×, 5×], [6]
    assert [r.hypotheses for r in watched] == [r.hypotheses for r in caption_images(run, paths, options,
                                                                                      warn=lambda _: None)]
    timed = cli("caption", "--model", str(run_dir), paths[0], paths[2], "--device", "cpu", "--beam", "3",
                "--report-time")
    assert timed.exit_code == 0 and timed.stdout == plain.stdout
    assert re.fullmatch(r"captioned 2 images in \d+\.\d\d s \(\d+\.\d images/s\); model loaded in \d+\.\d\d s",
                        timed.stderr.splitlines()[-1]), timed.stderr


def test_an_images_caption_is_the_same_alone_repeated_or_in_any_batch(trained: tuple[Path, Path]) -> None:
    """One image, one caption: captioned alone, twice in one list, or beside others in a batch of any size, and
    the lines follow the images' order."""
    _, run_dir = trained
    a, b, c = (str(path) for path in sorted((SMALL / "images").iterdir())[3:6])
    alone = {}
    for path in (a, b, c):
        result = cli("caption", "--model", str(run_dir), path, "--device", "cpu", "--batch-size", "1")
        assert result.exit_code == 0, result.output
        alone[path] = result.stdout.splitlines()
    assert all(len(lines) == 1 and lines[0] for lines in alone.values())
    listed = [a, b, a, c, a, b]
    for batch_size in ("1", "4", "6"):
        result = cli("caption", "--model", str(run_dir), *listed, "--device", "cpu", "--batch-size", batch_size)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == [alone[path][0] for path in listed], batch_size


def test_stdout_gets_each_batch_of_captions_before_the_next_is_searched(
        trained: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """Captions stream like ``translate --buffer-size``: stdout (or a pipe) holds each batch's lines, failed images
    included, before the next batch is searched; n-best lines keep their image's number; a file gets the same."""
    from nlgkit.cli.caption import caption
    from nlgkit.generation import caption as captioning

    _, run_dir = trained
    images = [str(path) for path in sorted((SMALL / "images").iterdir())[:3]]
    paths = [images[0], str(tmp_path / "missing.jpg"), images[1], images[2]]
    held = []  # what stdout holds when each batch's search starts

    def watched_generate(*args: object, **kwargs: object) -> object:
        held.append(capsys.readouterr().out)
        return generate(*args, **kwargs)

    monkeypatch.setattr(captioning, "generate", watched_generate)
    with pytest.raises(typer.Exit):  # (the missing image)
        caption(images=[Path(p) for p in paths], model=[run_dir], beam=2, nbest=2, batch_size=2, device="cpu")
    rest = capsys.readouterr().out
    assert held[0] == ""
    assert [line.split(" ||| ")[0] for line in held[1].splitlines()] == ["0", "0", "1", "1"]
    assert held[1].splitlines()[2] == "1 |||  ||| -inf"  # the missing image, answered with the first batch's
    assert [line.split(" ||| ")[0] for line in rest.splitlines()] == ["2", "2", "3", "3"]
    output = tmp_path / "captions.txt"
    with pytest.raises(typer.Exit):
        caption(images=[Path(p) for p in paths], model=[run_dir], beam=2, nbest=2, batch_size=2, device="cpu",
                output=output)
    assert capsys.readouterr().out == ""
    assert output.read_text(encoding="utf-8") == held[1] + rest


def test_score_reference_scores_captions_as_the_search_does(trained: tuple[Path, Path], caption_data: Path,
                                                            tmp_path: Path) -> None:
    """``caption --score-reference``: a beam caption scored again gets its n-best score (length penalty 0); an
    image's own training captions score better than another image's; a bad image keeps its (empty) line."""
    _, run_dir = trained
    train = read_records(caption_data / "train.jsonl")[:6]
    paths = [str(SMALL / "images" / r["image"]) for r in train]
    base = ("caption", "--model", str(run_dir), *paths, "--device", "cpu")
    nbest = cli(*base, "--beam", "2", "--nbest", "2", "--length-penalty", "0")
    assert nbest.exit_code == 0, nbest.output
    best = [row.split(" ||| ") for row in nbest.stdout.splitlines()[::2]]
    (tmp_path / "best.txt").write_text("".join(text + "\n" for _, text, _ in best))
    scored = cli(*base, "--score-reference", str(tmp_path / "best.txt"))
    assert scored.exit_code == 0, scored.output
    rows = [row.split("\t") for row in scored.stdout.splitlines()]
    ended = [abs(float(lp) - float(score)) < 2e-4 for (_, text, score), (lp, _) in zip(best, rows, strict=True)
             if len(text.split()) < 16]  # a caption cut at max_len_b = 16 has no EOS to score
    assert len(ended) >= 4 and all(ended)
    assert "scored 6 of 6 lines" in scored.stderr

    (tmp_path / "refs.txt").write_text("".join(r["refs"][k] + "\n" for k in range(2) for r in train)  # own two,
                                       + "".join(r["refs"][k] + "\n" for k in range(2) for r in train[1:] + train[:1]))
    pairs = cli("caption", "--model", str(run_dir), *paths * 4, "--device", "cpu",  # then the next image's two
                "--score-reference", str(tmp_path / "refs.txt"))
    assert pairs.exit_code == 0, pairs.output
    paired = [row.split("\t") for row in pairs.stdout.splitlines()]
    matched, shifted = (sum(float(lp) for lp, _ in part) / sum(int(n) for _, n in part)
                        for part in (paired[:12], paired[12:]))
    assert matched > shifted + 0.2, (matched, shifted)
    (tmp_path / "text.jpg").write_text("hello")
    bad = cli("caption", "--model", str(run_dir), paths[0], str(tmp_path / "text.jpg"), "--device", "cpu",
              "--score-reference", str(tmp_path / "best.txt"))
    assert bad.exit_code != 0 and bad.stdout == "" and "best.txt" in bad.stderr  # 6 lines for 2 images
    (tmp_path / "two.txt").write_text(best[0][1] + "\n" + best[1][1] + "\n")
    bad = cli("caption", "--model", str(run_dir), paths[0], str(tmp_path / "text.jpg"), "--device", "cpu",
              "--score-reference", str(tmp_path / "two.txt"))
    assert bad.exit_code == 1 and bad.stdout.split("\n")[:2] == ["\t".join(rows[0]), ""] and "text.jpg" in bad.stderr


def test_score_reference_cuts_an_over_long_caption_with_a_warning(trained: tuple[Path, Path], caption_data: Path,
                                                                  tmp_path: Path) -> None:
    """A reference longer than translate's --max-input-tokens default is scored on its first 400 tokens, the
    warning naming its line, as ``translate --score-reference`` does: an absurd line costs no absurd memory."""
    _, run_dir = trained
    train = read_records(caption_data / "train.jsonl")[:2]
    paths = [str(SMALL / "images" / r["image"]) for r in train]
    long = ("a dog runs on the grass " * 75).split()  # 450 words, each its own token
    (tmp_path / "refs.txt").write_text(train[0]["refs"][0] + "\n" + " ".join(long) + "\n")
    (tmp_path / "cut.txt").write_text(train[0]["refs"][0] + "\n" + " ".join(long[:400]) + "\n")
    scored, cut = (cli("caption", "--model", str(run_dir), *paths, "--device", "cpu", "--score-reference",
                       str(tmp_path / name)) for name in ("refs.txt", "cut.txt"))
    assert scored.exit_code == 0 and cut.exit_code == 0, scored.output
    assert "refs.txt: reference of line 2: 450 tokens, cut to 400" in scored.stderr
    assert "line 1" not in scored.stderr and "cut to" not in cut.stderr
    assert scored.stdout == cut.stdout


def test_a_streamed_list_gets_the_captions_of_the_whole_list(trained: tuple[Path, Path], caption_data: Path,
                                                              tmp_path: Path) -> None:
    """``caption --list - --buffer-size N`` reads the paths as they arrive and answers each group: the same lines,
    attention files and per-line warnings as the whole list; a per-image file of another length is named (a shorter
    one at its group, a longer one at the end), an empty stream is an error and leaves no output file."""
    _, run_dir = trained
    images = [str(SMALL / "images" / r["image"]) for r in read_records(caption_data / "train.jsonl")[:4]]
    listing = "\n".join([images[0], "", str(tmp_path / "missing.jpg"), *images[1:]]) + "\n"  # (a blank line)
    (tmp_path / "prefixes.txt").write_text("a\n\n\nzzzunknownword\na dog\n")
    base = ("caption", "--model", str(run_dir), "--list", "-", "--device", "cpu", "--beam", "3", "--nbest", "2",
            "--target-prefix", str(tmp_path / "prefixes.txt"))
    whole = cli(*base, "--attention", str(tmp_path / "whole"), input=listing)
    assert whole.exit_code == 1 and len(whole.stdout.splitlines()) == 10  # (2 lines per image)
    for size in ("1", "2"):
        streamed = cli(*base, "--attention", str(tmp_path / size), "--buffer-size", size, input=listing)
        assert streamed.exit_code == 1
        assert streamed.stdout == whole.stdout
        # the unknown prefix word named at its line 4 and the missing image (in the order they are met)
        assert sorted(streamed.stderr.splitlines()) == sorted(whole.stderr.splitlines())
        assert sorted(p.name for p in (tmp_path / size).iterdir()) == sorted(p.name for p in
                                                                             (tmp_path / "whole").iterdir())
    assert "prefixes.txt: line 4" in whole.stderr and "missing.jpg" in whole.stderr
    (tmp_path / "short.txt").write_text("a\n\n")
    short = cli(*base[:-1], str(tmp_path / "short.txt"), "--buffer-size", "2", input=listing)
    assert short.exit_code != 0 and short.stderr.splitlines()[-1] == (
        f"error: --target-prefix {tmp_path / 'short.txt'}: 2 lines, fewer than the images")
    # the first group (the list's lines 1-2: image 0 and a blank line) was answered; the second needs prefix line 3
    assert [line.split(" ||| ")[0] for line in short.stdout.splitlines()] == ["0", "0"]
    (tmp_path / "long.txt").write_text("a\n" * 6)
    out = tmp_path / "out.txt"
    long = cli(*base[:-1], str(tmp_path / "long.txt"), "--buffer-size", "2", "--output", str(out), input=listing)
    assert long.exit_code != 0 and long.stderr.splitlines()[-1] == (
        f"error: --target-prefix {tmp_path / 'long.txt'}: 6 lines for 5 images") and not out.exists()
    empty = cli(*base, "--buffer-size", "2", "--output", str(out), input="\n\n")
    assert empty.exit_code != 0 and "no images given" in empty.stderr and not out.exists()
    # samples too: an image's draws are its own, whatever its group or batch (an argument first, then the list)
    sampled = ("caption", "--model", str(run_dir), images[3], "--list", "-", "--device", "cpu", "--sampling",
               "--seed", "3", "--nbest", "2", "--json")
    whole = cli(*sampled, "--batch-size", "4", input=listing)
    streamed = cli(*sampled, "--batch-size", "1", "--buffer-size", "2", input=listing)
    assert whole.exit_code == streamed.exit_code == 1
    records = [json.loads(line) for line in whole.stdout.splitlines()]
    for record, again in zip(records, map(json.loads, streamed.stdout.splitlines()), strict=True):
        assert [c["text"] for c in record.get("captions", [])] == [c["text"] for c in again.get("captions", [])]
        for caption, same in zip(record.get("captions", []), again.get("captions", []), strict=True):
            assert caption["score"] == pytest.approx(same["score"], abs=1e-3)  # (batches of 4 and 1: float noise)
    assert [record["image"] for record in records] == [images[3], images[0], str(tmp_path / "missing.jpg"),
                                                       *images[1:]]
    assert records[0]["captions"] != records[4]["captions"]  # (the same picture, another image's draws)
    listed = tmp_path / "listed.jpg"  # an image of the list named as the output file: refused, not replaced
    listed.write_bytes(Path(images[0]).read_bytes())
    clash = cli(*base[:-2], "--buffer-size", "1", "--output", str(listed), input=f"{images[1]}\n{listed}\n")
    assert clash.exit_code != 0 and "also given as an image" in clash.stderr
    assert listed.read_bytes() == Path(images[0]).read_bytes()


def test_a_streamed_list_warns_once_when_min_len_is_above_the_limit(trained: tuple[Path, Path],
                                                                   caption_data: Path, tmp_path: Path) -> None:
    """An image's limit is max_len_b whatever max_len_a (its source has no length). Where max_len_a > 0 (a recipe
    that keeps the search defaults), --min-len 40 is no up-front error, each group is cut at 3 tokens, and the
    warning is said once for the stream (it was once a group)."""
    from nlgkit.generation.caption_stream import caption_input
    from nlgkit.generation.output import SearchOptions
    from nlgkit.runs.loading import load_trained

    _, run_dir = trained
    run = load_trained(run_dir, "best", "cpu")
    images = [str(SMALL / "images" / r["image"]) for r in read_records(caption_data / "train.jsonl")[:3]]
    options = SearchOptions.resolve(run.config.search, beam=2, min_len=40, max_len_a=1.0, max_len_b=3)
    said: list[str] = []
    results = caption_input(run, [[image] for image in images], options, tmp_path / "out.txt",
                            lambda first, batch: [str(first)] * len(batch), whole=False, warn=said.append,
                            note=said.append)
    assert [len(r.hypotheses[0].tokens) for r in results] == [3, 3, 3]
    assert said == [("--min-len 40 is above the length limit of some inputs (3 tokens for a source of length 0: "
                     "--max-len-a 1.0 × length + --max-len-b 3): their outputs stop there, shorter than --min-len")]


def test_a_streamed_list_answers_each_group_before_reading_the_next(trained: tuple[Path, Path],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from nlgkit.generation.caption_stream import caption_input

    _, run_dir = trained
    images = [str(path) for path in sorted((SMALL / "images").iterdir())[:3]]
    run = load_trained(run_dir, "best", "cpu")
    held = []  # what stdout holds each time the next group is asked for

    def arriving() -> Iterator[list[str]]:
        for image in images:
            held.append(capsys.readouterr().out)
            yield [image]

    results = caption_input(run, arriving(), SearchOptions.resolve(run.config.search, beam=2), None,
                            lambda first, batch: [f"{first + i}:{bool(r.hypotheses)}" for i, r in enumerate(batch)],
                            whole=False)
    assert len(results) == 3
    assert held == ["", "0:True\n", "1:True\n"]
    assert capsys.readouterr().out == "2:True\n"


def free_captions(run_dir: Path, caption_data: Path) -> tuple[tuple[str, ...], Result]:
    """The ``caption`` command line for four training images (beam 4) and its result without constraints."""
    paths = [str(SMALL / "images" / r["image"]) for r in read_records(caption_data / "train.jsonl")[:4]]
    base = ("caption", "--model", str(run_dir), *paths, "--device", "cpu", "--beam", "4")
    free = cli(*base)
    assert free.exit_code == 0, free.output
    return base, free


def test_constraints_put_their_words_in_each_caption(trained: tuple[Path, Path], caption_data: Path,
                                                    tmp_path: Path) -> None:
    """``caption --constraints``: each caption holds its line's phrases (an empty line: the free caption); a
    file of another length, or with --sampling, is a one-line error."""
    _, run_dir = trained
    base, free = free_captions(run_dir, caption_data)
    words = {line.split("\t")[0] for vocab in (run_dir / "data").glob("vocab*") for line in vocab.read_text().splitlines()}
    wanted = [[], ["dog", "grass"], ["two"], ["a red", "water"]]
    assert all(word in words for line in wanted for phrase in line for word in phrase.split())
    (tmp_path / "constraints.txt").write_text("".join("\t".join(line) + "\n" for line in wanted))
    constrained = cli(*base, "--constraints", str(tmp_path / "constraints.txt"))
    assert constrained.exit_code == 0, constrained.output
    captions = constrained.stdout.splitlines()
    assert captions[0] == free.stdout.splitlines()[0]
    for caption, phrases in zip(captions[1:], wanted[1:], strict=True):
        assert all(f" {phrase} " in f" {caption} " for phrase in phrases), (phrases, caption)
    assert "lacks" not in constrained.stderr
    # "a dog" and "the dog" cannot both be placed under --no-repeat-ngram-size 1: image 3's caption is written,
    # and a warning names its line and the phrase it lacks
    (tmp_path / "clash.txt").write_text("\n\na dog\tthe dog\n\n")
    clash = cli(*base, "--constraints", str(tmp_path / "clash.txt"), "--no-repeat-ngram-size", "1")
    assert clash.exit_code == 0 and len(clash.stdout.splitlines()) == 4, clash.output
    said = [line for line in clash.stderr.splitlines() if "lacks" in line]
    assert len(said) == 1 and "clash.txt: line 3: its output lacks constraint '" in said[0], clash.stderr
    (tmp_path / "short.txt").write_text("dog\n")
    bad = cli(*base, "--constraints", str(tmp_path / "short.txt"))
    assert bad.exit_code != 0 and bad.stdout == "" and "short.txt: 1 lines for 4 images" in bad.stderr
    bad = cli(*base, "--constraints", str(tmp_path / "short.txt"), "--sampling")
    assert bad.exit_code != 0 and "not with --sampling" in bad.stderr


def test_target_prefix_starts_each_caption_with_its_line(trained: tuple[Path, Path], caption_data: Path,
                                                          tmp_path: Path) -> None:
    """``caption --target-prefix``: each caption begins with its line's words and the model completes it (an
    empty line: the free caption); a word outside the vocabulary is forced as <unk> with a warning naming the line;
    a file of another length, or with --score-reference, is a one-line error."""
    _, run_dir = trained
    base, free = free_captions(run_dir, caption_data)
    starts = ["", "two dogs", "a red", "a Zzyzx"]
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("".join(start + "\n" for start in starts))
    started = cli(*base, "--target-prefix", str(prefix))
    assert started.exit_code == 0, started.output
    captions = started.stdout.splitlines()
    assert len(captions) == 4 and captions[0] == free.stdout.splitlines()[0]
    assert captions[1].startswith("two dogs ") and captions[2].startswith("a red ")
    assert captions[3].split()[:2] == ["a", "<unk>"]  # the unknown word forced as <unk>
    assert not any(caption.startswith(start) for caption, start in zip(free.stdout.splitlines()[1:3], starts[1:3]))
    warning = (f"warning: --target-prefix {prefix}: line 4: target prefix 'a Zzyzx': 'zzyzx' not in the target "
               "vocabulary, forced as <unk>")
    assert started.stderr.splitlines() == [warning]
    prefix.write_text("two dogs\n")
    bad = cli(*base, "--target-prefix", str(prefix))
    assert bad.exit_code != 0 and bad.stdout == "" and "prefix.txt: 1 lines for 4 images" in bad.stderr
    bad = cli(*base, "--target-prefix", str(prefix), "--score-reference", str(prefix))
    assert bad.exit_code != 0 and "not with" in bad.stderr and "--target-prefix" in bad.stderr


def test_token_scores_of_captions_match_the_scored_references(trained: tuple[Path, Path], caption_data: Path,
                                                              tmp_path: Path) -> None:
    """``caption --token-scores``: each caption's tokens' log-probabilities (the EOS's last) end its line and fill
    its JSON record; they sum to the caption's score (length penalty 0) and equal, token by token, what
    ``--score-reference --token-scores`` gives the same caption."""
    _, run_dir = trained
    paths = [str(SMALL / "images" / r["image"]) for r in read_records(caption_data / "test.jsonl")[:6]]
    base = ("caption", "--model", str(run_dir), *paths, "--device", "cpu", "--length-penalty", "0")
    lines = cli(*base, "--token-scores")
    records = cli(*base, "--token-scores", "--json", "--nbest", "2", "--beam", "2")
    assert lines.exit_code == 0 and records.exit_code == 0, (lines.output, records.output)
    rows = [row.split(" ||| ") for row in lines.stdout.splitlines()]
    (tmp_path / "best.txt").write_text("".join(text + "\n" for text, _ in rows), encoding="utf-8")
    scored = cli("caption", "--model", str(run_dir), *paths, "--device", "cpu", "--score-reference",
                 str(tmp_path / "best.txt"), "--token-scores")
    assert scored.exit_code == 0, scored.output
    ended = 0
    for (text, per_token), row in zip(rows, scored.stdout.splitlines(), strict=True):
        values = [float(v) for v in per_token.split()]
        assert len(values) in (len(text.split()), len(text.split()) + 1) and all(v <= 0 for v in values)
        if len(values) == len(text.split()) + 1:  # ended with its EOS (not cut at max_len): scored alike
            ended += 1
            assert all(abs(a - float(b)) < 2e-3 for a, b in zip(values, row.split("\t")[2].split(), strict=True))
    assert ended >= 3
    for record in map(json.loads, records.stdout.splitlines()):
        for caption in record["captions"]:
            assert abs(sum(caption["token_scores"]) - caption["score"]) < 2e-3
            assert caption["tokens"] == caption["text"].split()  # the tokens the scores belong to
            assert len(caption["token_scores"]) in (len(caption["tokens"]), len(caption["tokens"]) + 1)


def test_captions_search_in_bfloat16(trained: tuple[Path, Path], caption_data: Path) -> None:
    """``caption --compute-type bfloat16``: the search runs under autocast (scores move by rounding only)."""
    _, run_dir = trained
    paths = [str(SMALL / "images" / r["image"]) for r in read_records(caption_data / "test.jsonl")[:6]]
    found = {}
    for compute_type in ("float32", "bfloat16"):
        result = cli("caption", "--model", str(run_dir), *paths, "--device", "cpu", "--json", "--compute-type",
                     compute_type)
        assert result.exit_code == 0, result.output
        found[compute_type] = [json.loads(line)["captions"][0] for line in result.stdout.splitlines()]
    moved = [abs(a["score"] - b["score"]) for a, b in zip(found["bfloat16"], found["float32"], strict=True)]
    assert len(moved) == 6 and 0 < max(moved) and sum(moved) / len(moved) < 0.05, moved


def test_attention_maps_need_one_model_and_a_model_with_attention(trained: tuple[Path, Path],
                                                                  tmp_path: Path) -> None:
    """An ensemble's members attend separately: drawing "its" attention would show the first member's."""
    _, run_dir = trained
    image = str(min((SMALL / "images").iterdir()))
    result = cli("caption", "--model", str(run_dir), "--model", str(run_dir), image, "--device", "cpu",
                 "--attention", str(tmp_path / "att"))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("error: --attention: an ensemble of 2 models has no one attention to draw; "
                             "give a single --model\n")
    assert not (tmp_path / "att").exists()
    ensemble = cli("caption", "--model", str(run_dir), "--model", str(run_dir), image, "--device", "cpu")
    assert ensemble.exit_code == 0 and len(ensemble.stdout.splitlines()) == 1


def test_commands_refuse_a_model_of_the_other_task(trained: tuple[Path, Path]) -> None:
    _, run_dir = trained
    result = cli("translate", "--model", str(run_dir), input="ein hund\n")
    assert result.exit_code == 2 and "'captioning' task does not read text" in result.stderr
    assert "\n" not in result.stderr.strip()


def test_a_captioner_trains_with_every_head_through_the_trainer(caption_data: Path, tmp_path: Path) -> None:
    for head in ("learned", "tied", "hadamard"):
        path = recipe(tmp_path, caption_data, tmp_path / head)
        text = path.read_text().replace('type = "fixed"\ninit = "uniform"\nbias = "learned"', f'type = "{head}"')
        text = text.replace("max_epochs = 8", "max_updates = 3").replace('"show_attend_tell"', '"show_tell"')
        text = text.replace("attention_dim = 48\n", "").replace("hidden_dim = 96", "hidden_dim = 64")
        path.write_text(text)
        result = cli("train", str(path), "--device", "cpu")
        assert result.exit_code == 0, result.output
        assert load_trained(tmp_path / head, "last", "cpu").config.head.type == head


def test_table1_scores_a_run_whose_weights_stayed_elsewhere(trained: tuple[Path, Path], tmp_path: Path) -> None:
    """Test captions are cached under the checkpoint's identity: a copy of the run without its weights (a run
    trained on a lent GPU) still gives its Table 1 row, and a changed checkpoint is never scored stale."""
    import shutil

    from nlgkit.core.errors import CheckpointError
    from nlgkit.experiments.captioning import caption_split, nearest_neighbour_captions
    from nlgkit.experiments.table1 import build_table1, render

    _, run_dir = trained
    made = caption_split(run_dir, "test", "cpu")
    assert len(made.texts) == 20 and all(made.texts)
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("*.safetensors", "train_state.pt"))
    assert caption_split(copy, "test", "cpu").texts == made.texts  # no weights needed
    table = build_table1([copy])
    row = table["rows"][0]
    assert (row["model"], row["head"], row["images"]) == ("attend", "fixed", 20)
    assert row["values"]["VU"] == len({w for text in made.texts for w in text.split()})
    assert table["baseline"]["values"]["CIDEr"] is not None
    assert "| attend | fixed |" in render(table, "Flickr8k slice")
    baseline = nearest_neighbour_captions(copy)
    assert len(baseline.texts) == 20 and all(baseline.texts)

    meta = copy / "checkpoints" / "best" / "meta.json"
    meta.write_text(meta.read_text().replace('"epoch"', '"epoch" ', 1))  # another checkpoint
    with pytest.raises(CheckpointError, match="no checkpoint"):
        caption_split(copy, "test", "cpu")


def test_a_captioning_run_record_regenerates_its_table1_row(trained: tuple[Path, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``archive`` keeps a captioning run's test captions and the test images' references without weights:
    ``table1 --records`` gives the same row after the run directory is gone; the nearest-neighbour baseline,
    which needs the prepared features, is left out where they are missing too."""
    import shutil

    from helpers import reproduce

    _, run_dir = trained
    untrained_record = tmp_path / "early"
    shutil.copytree(run_dir, untrained_record, ignore=shutil.ignore_patterns("test.hyp.*"))
    with pytest.raises(SystemExit) as exit_info:
        reproduce(["archive", str(untrained_record), "--into", str(tmp_path / "records")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "test.hyp.en" in err

    from_run = tmp_path / "from_run.md"
    reproduce(["table1", str(run_dir), "--output", str(from_run)])  # captions the test images, keeps them
    reproduce(["archive", str(run_dir), "--into", str(tmp_path / "records")])
    record = tmp_path / "records" / run_dir.name
    assert (record / "data" / "test.jsonl").is_file() and not list(record.rglob("*.safetensors"))
    from_record = tmp_path / "from_record.md"
    reproduce(["table1", str(tmp_path / "gone" / run_dir.name), "--records", str(tmp_path / "records"),
               "--output", str(from_record)])
    assert from_record.read_text() == from_run.read_text()

    config = json.loads((record / "config.json").read_text())
    moved = tmp_path / "moved_data"
    shutil.move(config["data"]["dir"], moved)  # the prepared features gone too: rows, no baseline
    try:
        reproduce(["table1", str(record), "--output", str(tmp_path / "no_features.md")])
    finally:
        shutil.move(moved, config["data"]["dir"])
    text = (tmp_path / "no_features.md").read_text()
    assert "nearest neighbour" not in text
    assert [line for line in text.splitlines() if "| attend | fixed |" in line] == \
        [line for line in from_run.read_text().splitlines() if "| attend | fixed |" in line]

    captions = record / "test.hyp.en"
    captions.write_text("a " + captions.read_text())
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        reproduce(["table1", str(record), "--output", str(tmp_path / "edited.md")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "test.hyp.en" in err and "changed" in err


def test_fine_tuning_the_encoders_top_block_trains_it_with_the_captioner(caption_data: Path,
                                                                        tmp_path: Path) -> None:
    """``fine_tune_top``: the last block's weights are in the model, change with training, are saved and
    reloaded; the frozen part below it comes from a cache of its own; captions come out of the same search."""
    from nlgkit.vision.encoders import EncoderConfig, build_encoder

    path = recipe(tmp_path, caption_data, tmp_path / "tuned")
    text = path.read_text().replace("[task.encoder]\n", "[task.encoder]\nfine_tune_top = true\n")
    path.write_text(text.replace("max_epochs = 8", "max_epochs = 1\nmax_updates = 4"))
    result = cli("train", str(path), "--device", "cpu")
    assert result.exit_code == 0, result.output
    run = load_trained(tmp_path / "tuned", "last", "cpu")
    pretrained = build_encoder(EncoderConfig()).trunk[8:].state_dict()
    tuned = run.model.encoder_top.block.state_dict()  # type: ignore[union-attr]
    assert pretrained.keys() == tuned.keys()
    changed = [k for k in tuned if tuned[k].is_floating_point() and not torch.equal(tuned[k], pretrained[k])]
    assert changed and all("running_" not in k for k in changed)  # weights trained, batch-norm statistics kept
    manifests = [json.loads((p / "manifest.json").read_text()) for p in (caption_data / "features").iterdir()]
    below = [m for m in manifests if m["encoder"].get("stage")]
    assert len(below) == 1 and below[0]["encoder"]["channels"] == 1280  # a cache of its own, final dims named
    images = sorted((SMALL / "images").iterdir())[:2]
    captioned = cli("caption", "--model", str(tmp_path / "tuned"), *map(str, images), "--device", "cpu",
                    "--beam", "2", "--attention", str(tmp_path / "att"))
    assert captioned.exit_code == 0, captioned.output
    assert len(captioned.stdout.splitlines()) == 2 and len(list((tmp_path / "att").iterdir())) == 2


def test_the_word_vector_analyses_read_a_captioning_run(trained: tuple[Path, Path]) -> None:
    """A captioner has no source embedding: every analysis works on the vector sets it has (target input
    embedding, and the head's fixed target vectors) and says which sets those are."""
    _, run_dir = trained
    outputs = {}
    for command in ("norms", "wordsim", "geometry", "params"):
        result = cli("evaluate", command, str(run_dir), "--device", "cpu", "--json")
        assert result.exit_code == 0, result.output
        outputs[command] = json.loads(result.stdout)
    assert set(outputs["norms"]["sets"]) == {"tgt_input", "tgt_output"}  # no src_input in a captioner
    assert set(outputs["wordsim"]["sets"]) == {"tgt_input", "tgt_output"}
    result = cli("evaluate", "neighbours", str(run_dir), "--query", "dog", "-k", "3", "--device", "cpu", "--json")
    assert result.exit_code == 0, result.output
    asked = cli("evaluate", "norms", str(run_dir), "--vectors", "src_input", "--device", "cpu")
    assert asked.exit_code != 0 and "src_input" in asked.stderr and "\n" not in asked.stderr.strip()


def test_evaluate_confidence_scores_every_caption_of_each_image(trained: tuple[Path, Path], caption_data: Path,
                                                                tmp_path: Path) -> None:
    """``evaluate confidence`` on a captioner scores each test image with each of its captions: every caption token
    and EOS lands in one bin, and the bins' log-probabilities add up to ``caption --score-reference`` of the same
    image-caption pairs."""
    _, run_dir = trained
    result = cli("evaluate", "confidence", str(run_dir), "--json", "--device", "cpu")
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["runs"].values()
    bins = {b["bin"]: b for b in entry["bins"]}
    test = read_records(caption_data / "test.jsonl")
    captions = [(r["image"], reference) for r in test for reference in r["refs"]]
    assert len(captions) > len(test) and bins["</s>"]["tokens"] == len(captions)
    assert sum(b["tokens"] for b in bins.values()) == sum(len(t.split()) + 1 for r in test for t in r["tokens"])
    (tmp_path / "refs.txt").write_text("".join(reference + "\n" for _, reference in captions))
    scored = cli("caption", "--model", str(run_dir), *(str(SMALL / "images" / image) for image, _ in captions),
                 "--device", "cpu", "--score-reference", str(tmp_path / "refs.txt"))
    assert scored.exit_code == 0, scored.output
    total = sum(float(row.split("\t")[0]) for row in scored.stdout.splitlines())
    pooled = sum(b["tokens"] * b["mean_log_prob"] for b in bins.values() if b["tokens"])
    assert abs(pooled - total) < 1e-3 * abs(total), (pooled, total)
    missing = cli("evaluate", "confidence", str(run_dir), "--split", "nope", "--device", "cpu")
    assert missing.exit_code != 0 and "nope.jsonl" in missing.stderr and "\n" not in missing.stderr.strip()


def test_a_broken_split_file_is_a_one_line_error_naming_its_line(tmp_path: Path) -> None:
    from nlgkit.core.errors import DataError

    good = json.dumps({"image": "a.jpg", "tokens": [["a", "dog"]], "refs": ["A dog."]})
    for name, lines, message in (
            ("json.jsonl", [good, "{not json"], r"json.jsonl: line 2: not a caption record"),
            ("keys.jsonl", [good, good, json.dumps({"image": "b.jpg"})], r"keys.jsonl: line 3: not a caption record"),
            ("types.jsonl", [json.dumps({"image": 1, "tokens": [], "refs": []})],
             r"types.jsonl: line 1: 'image' must be a string")):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(DataError, match=message):
            read_records(tmp_path / name)
    (tmp_path / "bytes.jsonl").write_bytes(good.encode() + b"\n" + b'{"image": "\xff.jpg"}\n')
    with pytest.raises(DataError, match=r"bytes.jsonl: line 2: not valid UTF-8 \(byte 11\)"):
        read_records(tmp_path / "bytes.jsonl")
    assert read_records(tmp_path / "json.jsonl", limit=1) == [json.loads(good)]
