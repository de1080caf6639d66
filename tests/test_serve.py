"""``nlgkit serve``: answers equal the offline commands', bad input is a one-line 4xx, batching and the queue's
bound, 1,000 fuzzed requests without a 5xx, and the command's start-up errors.

The runs are small untrained models saved as `nlgkit train` saves them (seeded weights, hand-made
vocabularies): what is tested is that the server searches exactly as `nlgkit translate` / `caption` do, which
needs no training.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image
from typer.testing import CliRunner

from nlgkit.cli.main import app as cli_app
from nlgkit.cli.main import main
from nlgkit.core.config import config_from_dict, to_dict
from nlgkit.core.io import write_json
from nlgkit.data.vocab import SPECIALS, Vocabulary
from nlgkit.runs.build import build_model
from nlgkit.runs.checkpoint import save_checkpoint
from nlgkit.serve.app import create_app
from nlgkit.serve.batching import DynamicBatcher, QueueFull
from nlgkit.serve.limits import ServeLimits
from nlgkit.serve.served import load_models
from nlgkit.tasks import build_task

DE = ["ein", "eine", "mann", "frau", "hund", "kind", "fährt", "läuft", "spielt", "mit", "dem", "der", "die", "im",
      "park", "fahrrad", "ball", "straße", "."]
EN = ["a", "man", "woman", "dog", "child", "rides", "runs", "plays", "with", "the", "in", "park", "bike", "ball",
      "street", "on", "."]
LINES = ["Ein Mann fährt mit dem Fahrrad .", "", "Eine Frau läuft im Park", "Der Hund spielt mit dem Ball .",
         "Ein Kind läuft auf der Straße ."]


def vocabulary(words: list[str]) -> Vocabulary:
    return Vocabulary(list(SPECIALS) + words, [0] * len(SPECIALS) + list(range(len(words) * 10, 0, -10)))


def save_run(root: Path, config: dict[str, Any], vocabs: dict[str, Vocabulary], manifest: dict[str, Any]) -> Path:
    """A run directory as `nlgkit train` leaves it (config, vocabularies, manifest, best checkpoint), with
    seeded untrained weights."""
    parsed = config_from_dict(config)
    task = build_task(parsed)
    for lang, vocab in vocabs.items():
        vocab.save(root / "data" / f"vocab.{lang}.txt")
    write_json(root / "data" / "manifest.json", manifest)
    torch.manual_seed(11)
    model = build_model(parsed, task.model_context(vocabs), vocabs[task.target_lang])
    meta = {"config": to_dict(parsed), "vocab_checksums": {lang: v.checksum() for lang, v in vocabs.items()}}
    save_checkpoint(root / "checkpoints" / "best", model, meta)
    return root


def translation_run(root: Path, beam: int = 4) -> Path:
    """A small RNN DE→EN run (Moses tokenizer, lowercased), ``beam`` (4) by default."""
    config = {"data": {"src_lang": "de", "tgt_lang": "en"},
              "model": {"type": "rnn", "embedding_dim": 16, "encoder_dim": 24, "decoder_dim": 24,
                        "attention_dim": 16, "pre_output_dim": 24},
              "head": {"type": "learned"}, "search": {"beam": beam, "max_len_b": 6}}
    manifest = {"src_lang": "de", "tgt_lang": "en", "tokenizer": "moses", "lowercase": True, "subword": "none"}
    return save_run(root, config, {"de": vocabulary(DE), "en": vocabulary(EN)}, manifest)


def doubly_attentive_run(root: Path) -> Path:
    """A multimodal translation run whose model reads an image with every sentence (on covered pairs only)."""
    config = {"task": {"type": "multimodal_translation"},
              "data": {"src_lang": "de", "tgt_lang": "en", "dir": str(root / "data"),
                       "prepare": {"corpus": "none", "covered_only": True}},
              "model": {"type": "doubly_attentive", "embedding_dim": 16, "encoder_dim": 16, "decoder_dim": 16,
                        "attention_dim": 16, "pre_output_dim": 16},
              "head": {"type": "learned"}}
    manifest = {"src_lang": "de", "tgt_lang": "en", "tokenizer": "moses", "lowercase": True, "subword": "none",
                "covered_only": True}
    return save_run(root, config, {"de": vocabulary(DE), "en": vocabulary(EN)}, manifest)


def caption_run(root: Path) -> Path:
    """A small show-attend-tell captioner over EfficientNet-Lite0 features, beam 3 by default."""
    config = {"task": {"type": "captioning"}, "data": {"tgt_lang": "en"},
              "model": {"type": "show_attend_tell", "embedding_dim": 16, "hidden_dim": 24, "attention_dim": 16},
              "head": {"type": "learned"}, "search": {"beam": 3, "max_len_a": 0.0, "max_len_b": 5}}
    return save_run(root, config, {"en": vocabulary(EN)}, {"tgt_lang": "en"})


def picture(seed: int, size: tuple[int, int] = (180, 120), fmt: str = "JPEG") -> bytes:
    """A small photograph-like picture (smooth colour gradients and noise) in ``fmt``."""
    generator = torch.Generator().manual_seed(seed)
    w, h = size
    ramp = torch.linspace(0, 1, w)[None, :] * torch.linspace(1, 0, h)[:, None]
    pixels = torch.stack([ramp, 1 - ramp, torch.rand(h, w, generator=generator)], -1)
    image = Image.fromarray((pixels * 255).to(torch.uint8).numpy(), "RGB")
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("serve_runs")
    return {"translation": translation_run(root / "de-en"), "captioning": caption_run(root / "captioner")}


LIMITS = ServeLimits(max_body_bytes=64 << 10, max_lines=32, max_line_chars=300, max_images=3,
                     max_image_bytes=512 << 10, max_pixels=1_000_000, max_beam=8, max_batch=16, queue_size=32)


@pytest.fixture(scope="module")
def served(runs: dict[str, Path]) -> dict[str, Any]:
    return load_models([f"de-en={runs['translation']}", f"captioner={runs['captioning']}"], device="cpu",
                       limits=LIMITS)


@pytest.fixture(scope="module")
def client(served: dict[str, Any]) -> Any:
    with TestClient(create_app(served, LIMITS)) as client:
        yield client


def cli(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli_app, list(args), input=input)


# -- answers equal the offline commands' ----------------------------------------------------------------------

def test_translate_answers_as_the_offline_command_does(client: TestClient, runs: dict[str, Path]) -> None:
    answer = client.post("/translate", json={"lines": LINES, "model": "de-en", "nbest": 3, "scores": True})
    assert answer.status_code == 200, answer.text
    translations = answer.json()["translations"]
    assert len(translations) == len(LINES) and translations[1] == {"text": "", "score": None, "nbest": []}

    offline = cli("translate", "--model", str(runs["translation"]), "--nbest", "3", "--device", "cpu",
                  input="\n".join(LINES) + "\n")
    assert offline.exit_code == 0, offline.output
    moses = [line.split(" ||| ") for line in offline.stdout.splitlines()]
    assert len(moses) == 3 * len(LINES)
    for i, t in enumerate(translations):
        expected = [(text, float(score)) for index, text, score in moses if int(index) == i and score != "-inf"]
        assert [h["text"] for h in t["nbest"]] == [text for text, _ in expected]
        assert [h["score"] for h in t["nbest"]] == pytest.approx([score for _, score in expected], abs=1e-4)
        assert t["text"] == (expected[0][0] if expected else "")

    constrained = client.post("/translate", json={"lines": LINES, "no_repeat_ngram_size": 1, "min_len": 2})
    offline = cli("translate", "--model", str(runs["translation"]), "--no-repeat-ngram-size", "1", "--min-len", "2",
                  "--device", "cpu", input="\n".join(LINES) + "\n")
    texts = [t["text"] for t in constrained.json()["translations"]]
    assert texts == offline.stdout.splitlines() and texts != [t["text"] for t in translations]
    assert all(len(set(text.split())) == len(text.split()) for text in texts)  # (no subwords: a word is a token)

    plain = client.post("/translate", json={"lines": LINES[:1], "beam": 1})  # greedy, the first model by default
    assert plain.json() == {"model": "de-en", "translations": [{"text": cli(
        "translate", "--model", str(runs["translation"]), "--beam", "1", "--device", "cpu",
        input=LINES[0]).stdout.strip()}]}


def test_translate_constraints_answer_as_translate_constraints(client: TestClient, runs: dict[str, Path],
                                                              tmp_path: Path) -> None:
    """``"constraints"``: per line, the phrases its outputs must hold; the answers are ``translate --constraints``'s
    lines (a batch mixing lines with and without constraints included), and each output holds its phrases."""
    wanted = [["the park", "ball"], [], ["woman"], [], ["bike"], []][: len(LINES)]
    answer = client.post("/translate", json={"lines": LINES, "constraints": wanted, "nbest": 2})
    assert answer.status_code == 200, answer.text
    texts = [t["text"] for t in answer.json()["translations"]]
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join("\t".join(phrases) + "\n" for phrases in wanted), encoding="utf-8")
    offline = cli("translate", "--model", str(runs["translation"]), "--device", "cpu", "--constraints",
                  str(constraints), input="\n".join(LINES) + "\n")
    assert offline.exit_code == 0, offline.output
    assert texts == offline.stdout.splitlines()
    for text, line, phrases in zip(texts, LINES, wanted, strict=True):
        assert all(f" {phrase} " in f" {text} " for phrase in phrases) or not line, (phrases, text)
    free = [t["text"] for t in client.post("/translate", json={"lines": LINES}).json()["translations"]]
    assert texts != free and all(text == plain for text, plain, phrases in zip(texts, free, wanted) if not phrases)
    assert "warnings" not in answer.json()  # every phrase was kept
    assert not any("missing_constraints" in t for t in answer.json()["translations"])  # and placed
    # "a dog" and "the dog" cannot both be placed under no_repeat_ngram_size 1: the line's answer names the one its
    # output lacks (`translate` warns), as its output reads
    clash = client.post("/translate", json={"lines": LINES[:2], "constraints": [["a dog", "the dog"], []],
                                            "no_repeat_ngram_size": 1}).json()["translations"]
    lacking = "the dog" if "a dog" in clash[0]["text"] else "a dog"
    assert clash[0]["missing_constraints"] == [lacking] and "missing_constraints" not in clash[1], clash


def test_what_the_target_vocabulary_loses_is_named_in_the_answer(client: TestClient) -> None:
    """A phrase with a word outside the target vocabulary cannot be output: the search leaves it out; a prefix
    word outside it is forced as ``<unk>`` (as ``translate`` does both). The answer's warnings say so, in line
    order, naming the line, the phrase or prefix and the word; an answer that lost nothing has none."""
    wanted = [["ball"], [], ["woman", "Qqxv park"], ["Zzyzx"], []]
    starts = ["a man", "", "a Wqxz", "", ""]
    answer = client.post("/translate", json={"lines": LINES, "constraints": wanted, "target_prefix": starts})
    assert answer.status_code == 200, answer.text
    assert answer.json()["warnings"] == [
        "line 3: target prefix 'a Wqxz': 'wqxz' not in the target vocabulary, forced as <unk>",
        "line 3: constraint 'Qqxv park' left out: 'qqxv' not in the target vocabulary",
        "line 4: constraint 'Zzyzx' left out: 'zzyzx' not in the target vocabulary"]
    kept = [[phrase for phrase in phrases if not phrase[0].isupper()] for phrases in wanted]
    same = client.post("/translate", json={"lines": LINES, "constraints": kept, "target_prefix": starts}).json()
    assert answer.json()["translations"] == same["translations"]
    assert same["warnings"] == answer.json()["warnings"][:1]
    starts[2] = "a"
    clean = client.post("/translate", json={"lines": LINES, "constraints": kept, "target_prefix": starts}).json()
    assert "warnings" not in clean


def test_a_line_the_translator_cuts_is_named_in_the_answer(served: dict[str, Any], client: TestClient) -> None:
    """A line over the translator's max_input_tokens is translated cut, as ``translate`` does; the warning went to
    the server's log alone, numbering the line within its batch: the answer now names the request's line."""
    model = served["de-en"]
    limit = model.translator.max_input_tokens
    model.translator.max_input_tokens = 7  # (line 1 has 7 tokens: kept whole)
    try:  # (the module's one app: another app's shutdown would stop the shared models' batchers)
        answer = client.post("/translate", json={"lines": [LINES[0], "ein mann , der einen roten ball wirft ."],
                                                 "target_prefix": ["", "a Wqxz"]})
    finally:
        model.translator.max_input_tokens = limit
    assert answer.status_code == 200, answer.text
    assert answer.json()["warnings"] == [
        "line 2: 9 tokens, cut to 7",
        "line 2: target prefix 'a Wqxz': 'wqxz' not in the target vocabulary, forced as <unk>"]
    assert len(answer.json()["translations"]) == 2


def test_translate_target_prefix_answers_as_translate_target_prefix(client: TestClient, runs: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    """``"target_prefix"``: per line, the text its outputs start with (an empty string: none); the answers are
    ``translate --target-prefix``'s lines, alone and with constraints in the same request."""
    starts = ["a man", "", "a", "", "the", ""][: len(LINES)]  # (words the tiny served model knows)
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("".join(start + "\n" for start in starts), encoding="utf-8")
    wanted = [["ball"], [], [], ["woman"], [], []][: len(LINES)]
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join("\t".join(phrases) + "\n" for phrases in wanted), encoding="utf-8")
    common = ("translate", "--model", str(runs["translation"]), "--device", "cpu", "--target-prefix", str(prefix))
    for extra, body in (((), {}), (("--constraints", str(constraints)), {"constraints": wanted})):
        answer = client.post("/translate", json={"lines": LINES, "target_prefix": starts, **body})
        assert answer.status_code == 200, answer.text
        texts = [t["text"] for t in answer.json()["translations"]]
        offline = cli(*common, *extra, input="\n".join(LINES) + "\n")
        assert offline.exit_code == 0, offline.output
        assert texts == offline.stdout.splitlines()
        assert all(text.lower().startswith(start) for text, start, line in zip(texts, starts, LINES) if line)
    free = [t["text"] for t in client.post("/translate", json={"lines": LINES}).json()["translations"]]
    prefixed = [t["text"] for t in client.post("/translate", json={"lines": LINES, "target_prefix": starts})
                .json()["translations"]]
    assert prefixed != free and all(a == b for a, b, start in zip(prefixed, free, starts) if not start)


def test_caption_target_prefix_answers_as_caption_target_prefix(client: TestClient, runs: dict[str, Path],
                                                                tmp_path: Path) -> None:
    """``target_prefix`` (a form field): every caption of the request starts with it and the model completes it,
    as ``caption --target-prefix`` gives; a word outside the target vocabulary is named in the answer's
    warnings."""
    files = {"one.jpg": picture(1), "two.png": picture(2, (90, 160), "PNG")}
    uploads = [("image", (name, data, "image/jpeg")) for name, data in files.items()]
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "prefix.txt").write_text("the woman\n" * len(files), encoding="utf-8")
    answer = client.post("/caption", data={"nbest": "2", "target_prefix": "the woman"}, files=uploads)
    assert answer.status_code == 200, answer.text
    offline = cli("caption", "--model", str(runs["captioning"]), *(str(tmp_path / n) for n in files), "--json",
                  "--nbest", "2", "--target-prefix", str(tmp_path / "prefix.txt"), "--device", "cpu")
    assert offline.exit_code == 0, offline.output
    captions = [r["captions"] for r in answer.json()["results"]]
    assert captions == [json.loads(line)["captions"] for line in offline.stdout.splitlines()]
    assert all(c["text"].lower().startswith("the woman") for image in captions for c in image)
    assert "warnings" not in answer.json()
    free = client.post("/caption", data={"nbest": "2"}, files=uploads).json()["results"]
    assert not any(c["text"].lower().startswith("the woman") for r in free for c in r["captions"])
    odd = client.post("/caption", data={"target_prefix": "the Zzyzx"}, files=uploads)
    assert odd.status_code == 200 and odd.json()["warnings"] == [
        "target_prefix: target prefix 'the Zzyzx': 'zzyzx' not in the target vocabulary, forced as <unk>"]


def test_the_target_text_of_a_request_is_tokenised_once(served: dict[str, Any], client: TestClient,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A request's prefixes and phrases are tokenised (and their words looked up) once, when it comes, and the
    search gets their word ids: they were tokenised again in the batch (a /caption prefix once per image), which
    for a spaCy tokenizer is the slow part of a short request."""
    calls: list[str] = []

    def counted(tokenize: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
        def tokenize_counted(text: str) -> list[str]:
            calls.append(text)
            return tokenize(text)
        return tokenize_counted

    for name in ("de-en", "captioner"):
        targets = served[name].targets
        monkeypatch.setitem(targets.__dict__, "tokenize", counted(targets.tokenize))  # (a cached_property)
    starts, wanted = ["a man", "", "a"], [["ball"], [], ["the park", "woman"]]
    answer = client.post("/translate", json={"lines": LINES[:3], "target_prefix": starts, "constraints": wanted})
    assert answer.status_code == 200, answer.text
    assert sorted(text for text in calls if text.strip()) == ["a", "a man", "ball", "the park", "woman"]
    calls.clear()
    answer = client.post("/caption", data={"target_prefix": "the woman"},
                         files=[("image", (f"{i}.jpg", picture(i), "image/jpeg")) for i in range(3)])
    assert answer.status_code == 200, answer.text
    assert calls == ["the woman"]


def test_caption_answers_as_the_offline_command_does(client: TestClient, runs: dict[str, Path],
                                                     tmp_path: Path) -> None:
    files = {"one.jpg": picture(1), "two.png": picture(2, (90, 160), "PNG")}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    answer = client.post("/caption", data={"nbest": "2", "attention": "true"},
                         files=[("image", (name, data, "image/jpeg")) for name, data in files.items()])
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["image"] for r in results] == list(files)

    offline = cli("caption", "--model", str(runs["captioning"]), *(str(tmp_path / n) for n in files), "--json",
                  "--nbest", "2", "--device", "cpu")
    assert offline.exit_code == 0, offline.output
    records = [json.loads(line) for line in offline.stdout.splitlines()]
    for result, record in zip(results, records):
        assert result["captions"] == record["captions"]
        png = base64.b64decode(result["attention_png"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and Image.open(io.BytesIO(png)).size[0] > 200

    constrained = client.post("/caption", data={"no_repeat_ngram_size": "1", "min_len": "4"},
                              files=[("image", (name, data, "image/jpeg")) for name, data in files.items()])
    offline = cli("caption", "--model", str(runs["captioning"]), *(str(tmp_path / n) for n in files), "--json",
                  "--no-repeat-ngram-size", "1", "--min-len", "4", "--device", "cpu")
    captions = [r["captions"] for r in constrained.json()["results"]]
    assert captions == [json.loads(line)["captions"] for line in offline.stdout.splitlines()]
    assert captions != [r["captions"][:1] for r in results]

    # "token_scores": each caption's tokens and their log-probabilities, as caption --json --token-scores gives them
    scored = client.post("/caption", data={"nbest": "2", "token_scores": "true"},
                         files=[("image", (name, data, "image/jpeg")) for name, data in files.items()])
    offline = cli("caption", "--model", str(runs["captioning"]), *(str(tmp_path / n) for n in files), "--json",
                  "--nbest", "2", "--token-scores", "--device", "cpu")
    assert scored.status_code == 200 and offline.exit_code == 0, (scored.text, offline.output)
    for result, line in zip(scored.json()["results"], offline.stdout.splitlines(), strict=True):
        for served_caption, offline_caption in zip(result["captions"], json.loads(line)["captions"], strict=True):
            # to the printed rounding: the server batches the images otherwise, which moves the last float bits
            assert served_caption["token_scores"] == pytest.approx(offline_caption["token_scores"], abs=2e-4)
            assert served_caption["tokens"] == offline_caption["tokens"] == served_caption["text"].split()
            assert len(served_caption["token_scores"]) in (len(served_caption["tokens"]),
                                                           len(served_caption["tokens"]) + 1)

    drawn = cli("caption", "--model", str(runs["captioning"]), *(str(tmp_path / n) for n in files), "--json",
                "--sampling", "--nbest", "4", "--seed", "2", "--device", "cpu")
    samples = [json.loads(line)["captions"] for line in drawn.stdout.splitlines()]
    assert [len(c) for c in samples] == [4, 4] and len({c["text"] for c in samples[0]}) > 1
    assert [c["score"] for c in samples[0]] == sorted((c["score"] for c in samples[0]), reverse=True)


def test_an_ensemble_of_two_copies_serves_what_the_single_model_does(runs: dict[str, Path]) -> None:
    """``--model NAME=RUN+RUN``: one ensemble inside the one search, answering as ``translate -m RUN -m RUN``."""
    one = runs["translation"]
    models = load_models([f"pair={one}+{one}", str(one)], device="cpu")
    assert list(models) == ["pair", one.resolve().name]
    with TestClient(create_app(models)) as client:
        answers = [client.post("/translate", json={"lines": LINES, "model": name, "nbest": 2, "scores": True}).json()
                   for name in models]
    assert answers[0]["translations"] == answers[1]["translations"]
    offline = cli("translate", "-m", str(one), "-m", str(one), "--device", "cpu", input="\n".join(LINES) + "\n")
    assert [t["text"] for t in answers[0]["translations"]] == offline.stdout.splitlines()


def test_serve_replace_unk_answers_as_translate_replace_unk(runs: dict[str, Path], tmp_path: Path) -> None:
    """``serve --replace-unk`` replaces unknown words as ``translate --replace-unk`` does, and says so in /models."""
    one = runs["translation"]
    models = load_models([str(one)], device="cpu", phrase_table={"hund": "dog"})
    with TestClient(create_app(models)) as client:
        answer = client.post("/translate", json={"lines": LINES}).json()
        described = client.get("/models").json()
    table = tmp_path / "table.txt"
    table.write_text("hund|||dog\n", encoding="utf-8")
    offline = cli("translate", "-m", str(one), "--device", "cpu", "--replace-unk", "--phrase-table", str(table),
                  input="\n".join(LINES) + "\n")
    assert offline.exit_code == 0, offline.output
    assert [t["text"] for t in answer["translations"]] == offline.stdout.splitlines()
    assert [m["replace_unk"] for m in described["models"]] == [True]


def test_serve_compute_type_answers_as_translate_compute_type(runs: dict[str, Path]) -> None:
    """``serve --compute-type bfloat16`` searches as ``translate --compute-type bfloat16`` and says so in /models;
    a type nlgkit's search does not have stops the loading in one line."""
    one = runs["translation"]
    models = load_models([str(one)], device="cpu", compute_type="bfloat16")
    with TestClient(create_app(models)) as client:
        answer = client.post("/translate", json={"lines": LINES}).json()
        described = client.get("/models").json()["models"][0]
    offline = cli("translate", "-m", str(one), "--device", "cpu", "--compute-type", "bfloat16",
                  input="\n".join(LINES) + "\n")
    assert offline.exit_code == 0, offline.output
    assert [t["text"] for t in answer["translations"]] == offline.stdout.splitlines()
    assert described["compute_type"] == "bfloat16"
    assert load_models([str(one)], device="cpu")[one.name].describe()["compute_type"] == "float32"
    result = cli("serve", "--model", str(one), "--compute-type", "int8")
    assert result.exit_code != 0 and result.stderr.count("\n") == 1 and "--compute-type int8" in result.stderr


def aligned_offline(argv: list[str]) -> list[tuple[list[str], list[list[int]]]]:
    """``translate ARGV --no-detokenize --report-align`` of LINES: each line's output tokens and [src, out] pairs."""
    offline = cli("translate", *argv, "--no-detokenize", "--report-align", input="\n".join(LINES) + "\n")
    assert offline.exit_code == 0, offline.output
    rows = [line.partition(" ||| ") for line in offline.stdout.splitlines()]  # an empty line has no pairs
    return [(text.split(), [[int(n) for n in pair.split("-")] for pair in pairs.split()]) for text, _, pairs in rows]


def test_translate_with_align_answers_tokens_and_alignment_as_report_align(client: TestClient,
                                                                           runs: dict[str, Path]) -> None:
    """``"align": true``: the line's source tokens, and for each hypothesis its output tokens and [source, output]
    pairs, the ones ``translate --report-align`` prints (OpenNMT's server answers "align" the same way); without
    it the answer is as before."""
    answer = client.post("/translate", json={"lines": LINES, "model": "de-en", "align": True, "nbest": 2})
    assert answer.status_code == 200, answer.text
    translations = answer.json()["translations"]
    expected = aligned_offline(["-m", str(runs["translation"]), "--device", "cpu"])
    for line, t, (tokens, pairs) in zip(LINES, translations, expected, strict=True):
        assert t["tokens"] == tokens and t["alignment"] == pairs
        assert (t["source_tokens"] != []) == bool(line) and t["source_tokens"] == line.lower().split()
        assert all(0 <= s < len(t["source_tokens"]) and 0 <= o < len(t["tokens"]) for s, o in t["alignment"])
        assert all(set(h) == {"text", "tokens", "alignment"} for h in t["nbest"])
        assert [h["tokens"] for h in t["nbest"][:1]] == ([tokens] if line else [])
    assert sum(len(t["alignment"]) for t in translations) >= 10
    plain = client.post("/translate", json={"lines": LINES[:1], "model": "de-en"}).json()["translations"][0]
    assert set(plain) == {"text"}

    # translate --json writes the server's answer, line for line
    everything = {"lines": LINES, "model": "de-en", "align": True, "token_scores": True, "scores": True, "nbest": 3}
    served_records = client.post("/translate", json=everything).json()["translations"]
    offline = cli("translate", "-m", str(runs["translation"]), "--device", "cpu", "--json", "--report-align",
                  "--token-scores", "--nbest", "3", input="\n".join(LINES) + "\n")
    assert offline.exit_code == 0, offline.output
    assert [json.loads(line) for line in offline.stdout.splitlines()] == served_records
    assert set(served_records[0]) == {"text", "score", "source_tokens", "tokens", "alignment", "token_scores", "nbest"}

    # "token_scores": each hypothesis's tokens and their log-probabilities, as translate --token-scores prints them
    scored = client.post("/translate", json={"lines": LINES, "model": "de-en", "token_scores": True, "scores": True})
    offline = cli("translate", "-m", str(runs["translation"]), "--device", "cpu", "--no-detokenize",
                  "--token-scores", input="\n".join(LINES) + "\n")
    assert scored.status_code == 200 and offline.exit_code == 0, (scored.text, offline.output)
    for t, row in zip(scored.json()["translations"], offline.stdout.splitlines(), strict=True):
        text, _, per_token = row.partition(" ||| ")
        assert set(t) == {"text", "score", "tokens", "token_scores"} and t["tokens"] == text.split()
        assert [f"{v:.4f}" for v in t["token_scores"]] == per_token.split()


def test_a_ctranslate2_export_is_served_as_translate_engine_ct2_translates(tmp_path: Path) -> None:
    """``--model DIR`` of an ``nlgkit export ct2`` directory: CTranslate2 searches, the answers are the lines
    ``translate --engine ct2`` prints (n-best, --replace-unk too), /models says which engine; an ensemble of
    exports is refused in one line."""
    pytest.importorskip("ctranslate2")
    config = {"data": {"src_lang": "de", "tgt_lang": "en"},
              "model": {"type": "transformer", "encoder_layers": 1, "decoder_layers": 1, "dim": 16, "ffn_dim": 32,
                        "heads": 2},
              "head": {"type": "learned"}, "search": {"beam": 4, "max_len_b": 6}}
    manifest = {"src_lang": "de", "tgt_lang": "en", "tokenizer": "moses", "lowercase": True, "subword": "none"}
    run = save_run(tmp_path / "run", config, {"de": vocabulary(DE), "en": vocabulary(EN)}, manifest)
    exported = cli("export", "ct2", str(run), "-o", str(tmp_path / "ct2"))
    assert exported.exit_code == 0, exported.output
    table = tmp_path / "table.txt"
    table.write_text("hund|||dog\n", encoding="utf-8")
    text = "\n".join(LINES) + "\n"
    for phrase_table, flags in ((None, []), ({"hund": "dog"}, ["--replace-unk", "--phrase-table", str(table)])):
        models = load_models([f"fast={tmp_path / 'ct2'}"], device="cpu", limits=LIMITS, phrase_table=phrase_table)
        with TestClient(create_app(models, LIMITS)) as client:
            best = client.post("/translate", json={"lines": LINES, "model": "fast"}).json()
            nbest = client.post("/translate", json={"lines": LINES, "model": "fast", "nbest": 3, "scores": True})
            described = client.get("/models").json()["models"][0]
        offline = cli("translate", "--engine", "ct2", "-m", str(tmp_path / "ct2"), *flags, input=text)
        assert offline.exit_code == 0, offline.output
        assert [t["text"] for t in best["translations"]] == offline.stdout.splitlines()
        assert all(t["text"] for i, t in enumerate(best["translations"]) if LINES[i])
        assert nbest.status_code == 200 and len(nbest.json()["translations"][0]["nbest"]) == 3
        assert described["engine"] == "ct2" and described["model"] == "transformer"
        assert described["compute_type"] == "float32"  # CTranslate2's own name of what it computes in
        assert described["replace_unk"] is (phrase_table is not None)
    models = load_models([f"fast={tmp_path / 'ct2'}"], device="cpu", limits=LIMITS)
    with TestClient(create_app(models, LIMITS)) as client:
        aligned = client.post("/translate", json={"lines": LINES, "align": True}).json()["translations"]
        expected = aligned_offline(["--engine", "ct2", "-m", str(tmp_path / "ct2")])
        assert [(t["tokens"], t["alignment"]) for t in aligned] == expected
        as_json = cli("translate", "--engine", "ct2", "-m", str(tmp_path / "ct2"), "--json", "--report-align",
                      input="\n".join(LINES) + "\n")
        assert as_json.exit_code == 0 and [json.loads(line) for line in as_json.stdout.splitlines()] == client.post(
            "/translate", json={"lines": LINES, "align": True, "scores": True}).json()["translations"]
        meta = tmp_path / "ct2" / "nlgkit.json"
        written = json.loads(meta.read_text(encoding="utf-8"))
        meta.write_text(json.dumps({k: v for k, v in written.items() if k != "alignment"}), encoding="utf-8")
        models["fast"].translator.export.meta.pop("alignment")  # type: ignore[union-attr]  # as an older export
        token_scores = client.post("/translate", json={"lines": LINES, "token_scores": True, "scores": True})
        offline = cli("translate", "--engine", "ct2", "-m", str(tmp_path / "ct2"), "--json", "--token-scores",
                      input="\n".join(LINES) + "\n")
        assert token_scores.status_code == 200 and offline.exit_code == 0, offline.output
        for served, line in zip(token_scores.json()["translations"], offline.stdout.splitlines(), strict=True):
            record = json.loads(line)
            assert served["tokens"] == record["tokens"] and served["text"] == record["text"]
            assert served["token_scores"] == pytest.approx(record["token_scores"], abs=2e-4)
        assert all(len(t["token_scores"]) in (len(t["tokens"]), len(t["tokens"]) + 1)
                   for t in token_scores.json()["translations"] if t["text"])
        refused = client.post("/translate", json={"lines": LINES, "align": True})
        assert refused.status_code == 400 and "export the run again" in refused.json()["error"]
        refused = client.post("/translate", json={"lines": LINES, "constraints": [["dog"]] * len(LINES)})
        assert refused.status_code == 422 and "no lexically constrained search" in refused.json()["error"]
        starts = ["a", ""] * (len(LINES) // 2) + [""] * (len(LINES) % 2)
        (tmp_path / "prefix.txt").write_text("".join(start + "\n" for start in starts), encoding="utf-8")
        prefixed = client.post("/translate", json={"lines": LINES, "target_prefix": starts})
        offline = cli("translate", "--engine", "ct2", "-m", str(tmp_path / "ct2"), "--target-prefix",
                      str(tmp_path / "prefix.txt"), input="\n".join(LINES) + "\n")
        assert prefixed.status_code == 200 and offline.exit_code == 0, offline.output
        assert [t["text"] for t in prefixed.json()["translations"]] == offline.stdout.splitlines()
        # min_len above some lines' limits (1.5 · length + 6): each cut at its limit, as offline (CTranslate2 was
        # given a minimum above its maximum, and its ValueError answered 500)
        cut = client.post("/translate", json={"lines": LINES, "min_len": 30})
        offline = cli("translate", "--engine", "ct2", "-m", str(tmp_path / "ct2"), "--min-len", "30",
                      input="\n".join(LINES) + "\n")
        assert cut.status_code == 200 and offline.exit_code == 0, (cut.text, offline.output)
        assert [t["text"] for t in cut.json()["translations"]] == offline.stdout.splitlines()
        assert client.post("/translate", json={"lines": LINES}).status_code == 200
    result = cli("serve", "--model", f"{tmp_path / 'ct2'}+{tmp_path / 'ct2'}")
    assert result.exit_code == 2 and "an ensemble of CTranslate2 exports" in result.stderr
    assert result.stderr.count("\n") == 1


def test_models_and_health_describe_what_is_served(client: TestClient) -> None:
    models = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert models["de-en"]["endpoint"] == "/translate" and models["de-en"]["beam"] == 4
    assert models["captioner"]["endpoint"] == "/caption" and models["captioner"]["attention"] is True
    assert models["captioner"]["task"] == "captioning"
    health = client.get("/health").json()
    assert health["status"] == "ok" and set(health["models"]) == {"de-en", "captioner"}
    page = client.get("/")
    assert page.status_code == 200 and 'id="dropzone"' in page.text and 'id="source"' in page.text
    assert "fetch(" in client.get("/static/app.js").text


# -- bad input: one line, a 4xx, and the server carries on --------------------------------------------------

def bomb() -> bytes:
    """A 2,000 × 2,000 PNG of one colour: a few kB that decode to 4 Mpx (the test server allows 1 Mpx)."""
    out = io.BytesIO()
    Image.new("L", (2000, 2000), 255).save(out, "PNG")
    return out.getvalue()


TRANSLATE_CASES = [
    (b"\xff\xfe\x00bad", 400, "not UTF-8"),
    (b"", 400, "empty request body"),
    (b'{"lines": ["a"', 422, "Invalid JSON"),
    (b'{"lines": "ein mann"}', 422, "lines: Input should be a valid array"),
    (b'{"lines": ["a"], "beem": 3}', 422, "beem: Extra inputs are not permitted"),
    (b'{"lines": []}', 422, "nothing to translate"),
    (json.dumps({"lines": ["a"] * 33}).encode(), 413, "at most 32 per request"),
    (json.dumps({"lines": ["a", "b" * 301]}).encode(), 413, "line 2: 301 characters"),
    (json.dumps({"lines": ["a" * 250] * 300}).encode(), 413, "at most 65,536 bytes"),
    (b'{"lines": ["a"], "beam": 9}', 400, "at most 8"),
    (b'{"lines": ["a"], "beam": 2, "nbest": 3}', 400, "beam 2 / nbest 3"),
    (b'{"lines": ["a"], "beam": "2"}', 422, "beam: Input should be a valid integer"),
    (b'{"lines": ["a"], "no_repeat_ngram_size": -1}', 400, "no_repeat_ngram_size -1: must be 0 or positive"),
    (b'{"lines": ["a"], "min_len": 2.5}', 422, "min_len: Input should be a valid integer"),
    (b'{"lines": ["a", "b"], "constraints": [["x"]]}', 422, "constraints: 1 lists for 2 lines"),
    (b'{"lines": ["a", "b"], "target_prefix": ["x"]}', 422, "target_prefix: 1 prefixes for 2 lines"),
    (json.dumps({"lines": ["a"], "target_prefix": ["b" * 301]}).encode(), 413, "target_prefix: line 1: 301 characters"),
    (b'{"lines": ["a"], "target_prefix": [3]}', 422, "target_prefix.0: Input should be a valid string"),
    (b'{"lines": ["a"], "constraints": [["x\\ty"]]}', 422, "constraints: line 1: a phrase holds a tab"),
    (json.dumps({"lines": ["a"], "constraints": [["b" * 200, "c" * 101]]}).encode(), 413,
     "constraints: line 1: 301 characters"),
    (b'{"lines": ["a"], "constraints": "x"}', 422, "constraints: Input should be a valid array"),
    (b'{"lines": ["a"], "model": "nope"}', 404, "model 'nope' is not served (served: de-en, captioner)"),
    (b'{"lines": ["a"], "model": "captioner"}', 422, "'captioning' model"),
    (b"[" * 50_000, 422, "recursion limit"),
]


@pytest.mark.parametrize(("body", "status", "reason"), TRANSLATE_CASES, ids=lambda c: str(c)[:30])
def test_bad_translate_requests_get_a_one_line_4xx(client: TestClient, body: bytes, status: int,
                                                    reason: str) -> None:
    answer = client.post("/translate", content=body, headers={"content-type": "application/json"})
    assert (answer.status_code, reason in answer.json()["error"]) == (status, True), answer.text
    assert "\n" not in answer.json()["error"]


def caption_cases() -> list[tuple[Any, int, str]]:
    jpeg = picture(3)
    return [
        ({"files": [("image", ("cat.jpg", b"not an image at all", "image/jpeg"))]}, 400,
         "cat.jpg: not an image"),
        ({"files": [("image", ("cut.jpg", jpeg[: len(jpeg) // 2], "image/jpeg"))]}, 400, "cut.jpg: unreadable"),
        ({"files": [("image", ("bomb.png", bomb(), "image/png"))]}, 400, "exceeds the limit of 1,000,000"),
        ({"files": [("image", ("empty.jpg", b"", "image/jpeg"))]}, 400, "empty.jpg: empty file"),
        ({"files": [("image", ("big.jpg", b"x" * (600 << 10), "image/jpeg"))]}, 413, "over 524,288 bytes"),
        ({"files": [("image", (f"{i}.jpg", jpeg, "image/jpeg")) for i in range(4)]}, 413,
         "more than 3 images: at most 3 a request (max_images)"),
        ({"content": b'--x\r\nContent-Disposition: form-data; name="model"\r\n\r\ncaptioner\r\n--x--\r\n',
          "headers": {"content-type": "multipart/form-data; boundary=x"}}, 422, "no image uploaded"),
        ({"data": {"colour": "red"}, "files": [("image", ("a.jpg", jpeg, "image/jpeg"))]}, 422,
         "unknown form field 'colour'"),
        ({"data": {"beam": "three"}, "files": [("image", ("a.jpg", jpeg, "image/jpeg"))]}, 422,
         "beam: 'three' is not a positive integer"),
        ({"data": {"model": "de-en"}, "files": [("image", ("a.jpg", jpeg, "image/jpeg"))]}, 422,
         "model 'de-en' is a 'translation' model, served at /translate"),
        ({"content": b'--x\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\nabc\r\n--x--\r\n',
          "headers": {"content-type": "multipart/form-data; boundary=x"}}, 400, "Invalid multipart data"),
        ({"content": b"--x\r\n", "headers": {"content-type": "multipart/form-data"}}, 400, "Missing boundary"),
        ({"content": jpeg, "headers": {"content-type": "image/jpeg"}}, 415, "expected a multipart/form-data"),
        ({"data": {"target_prefix": "a " * 151}, "files": [("image", ("a.jpg", jpeg, "image/jpeg"))]}, 413,
         "target_prefix: 301 characters: at most 300"),
        ({"data": {"target_prefix": "a " * (40 << 10)}, "files": [("image", ("a.jpg", jpeg, "image/jpeg"))]}, 413,
         "target_prefix: 81,919 characters: at most 300"),  # (was Starlette's "Part exceeded maximum size of 64KB")
        ({"data": {f"f{i}": "x" for i in range(12)}, "files": [("image", ("a.jpg", jpeg, "image/jpeg"))]}, 422,
         "unknown form field 'f0'"),  # (was Starlette's 400 "Too many fields")
        # a text field that is not UTF-8 (Starlette read it as Latin-1 and went on: the captions started with 'café')
        ({"content": form_with(b"target_prefix", b"the caf\xe9", jpeg),
          "headers": {"content-type": "multipart/form-data; boundary=x"}}, 422,
         "target_prefix: not UTF-8 (byte 7 of the field)"),
        ({"content": form_with(b"model", b"caption\xff\xfer", jpeg),
          "headers": {"content-type": "multipart/form-data; boundary=x"}}, 422, "model: not UTF-8 (byte 7 of the field)"),
    ]


def form_with(name: bytes, value: bytes, image: bytes) -> bytes:
    """A multipart body (boundary ``x``) of one text field given as raw bytes, and one image."""
    return (b'--x\r\nContent-Disposition: form-data; name="' + name + b'"\r\n\r\n' + value + b"\r\n"
            b'--x\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\n'
            b"Content-Type: image/jpeg\r\n\r\n" + image + b"\r\n--x--\r\n")


@pytest.mark.parametrize("case", range(18))
def test_bad_caption_requests_get_a_one_line_4xx(client: TestClient, case: int) -> None:
    request, status, reason = caption_cases()[case]
    answer = client.post("/caption", **request)
    assert (answer.status_code, reason in answer.json()["error"]) == (status, True), answer.text
    assert answer.json()["error"] and "\n" not in answer.json()["error"]


def test_head_unknown_paths_and_methods_get_answers_that_name_them(client: TestClient) -> None:
    for path in ("/", "/health", "/models", "/static/app.js"):  # HEAD, as uptime checks send it
        answer = client.head(path)
        assert answer.status_code == 200 and answer.content == b"", (path, answer.status_code)
    wrong = client.get("/translate")
    assert wrong.status_code == 405 and wrong.json()["error"] == "GET /translate: Method Not Allowed (allowed: POST)"
    missing = client.post("/translation", json={"lines": ["a"]})
    assert missing.status_code == 404 and missing.json()["error"].startswith("POST /translation: Not Found (endpoints: ")


def test_a_multipart_content_type_is_read_in_any_case(client: TestClient) -> None:
    boundary = "XyZ"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\n'
            f"Content-Type: image/jpeg\r\n\r\n").encode() + picture(3) + f"\r\n--{boundary}--\r\n".encode()
    answer = client.post("/caption", content=body, headers={"content-type": f"Multipart/Form-Data; boundary={boundary}"})
    assert answer.status_code == 200 and answer.json()["results"][0]["image"] == "a.jpg", answer.text


async def post_and_leave(app: Any, body: bytes, complete: bool, leave: Any) -> list[int]:
    """POST ``body`` to /translate straight through ASGI (all of it, or ``complete=False``: the body is cut short),
    then ``await leave()`` and disconnect as a client that gives up does; the statuses the app answered."""
    messages = [{"type": "http.request", "body": body, "more_body": not complete}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await leave()
        return {"type": "http.disconnect"}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    length = len(body) + (0 if complete else 10)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/translate", "raw_path": b"/translate", "root_path": "", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % length)],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8080)}
    await app(scope, receive, send)
    return statuses


def test_a_client_that_leaves_is_not_searched_for_nor_logged_as_a_crash(runs: dict[str, Path],
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    limits = ServeLimits(max_wait_ms=0)
    models = load_models([str(runs["translation"])], device="cpu", limits=limits)
    model = models["de-en"]
    gate, searched = threading.Event(), list[str]()
    search = model.batcher.process

    def held(key: Any, items: list[Any]) -> list[Any]:
        gate.wait(30)  # (only a server that keeps waiting for a client that left waits this long)
        searched.extend(item[0] for item in items)
        return search(key, items)

    async def queued() -> None:  # the request waits behind the held one: now its client leaves
        while model.batcher.waiting == 0:
            await asyncio.sleep(0.01)

    async def at_once() -> None:
        pass

    model.batcher.process = held
    app = create_app(models, limits)
    model.batcher.start()
    try:
        key = (model.options(None, None), False, False, False)
        running = model.batcher.submit(key, [("ein mann", "", "")])  # the worker holds it at the gate
        while model.batcher.waiting:
            time.sleep(0.01)
        with caplog.at_level(logging.INFO, logger="nlgkit.serve"):
            cut = asyncio.run(post_and_leave(app, b'{"lines": ["der hu', False, at_once))  # gone mid-body
            gone = asyncio.run(post_and_leave(app, b'{"lines": ["eine frau"]}', True, queued))  # gone while queued
        gate.set()
        assert len(running.result(30)) == 1 and model.batcher.submit(key, [("der hund", "", "")]).result(30)
    finally:
        gate.set()
        model.batcher.stop()
    assert cut == gone == [499]
    assert searched == ["ein mann", "der hund"]  # the line of the client that left was never searched
    assert "internal error" not in caplog.text and "Traceback" not in caplog.text


# -- batching and the queue's bound ---------------------------------------------------------------------------

def test_requests_that_wait_together_are_searched_together_by_key() -> None:
    calls: list[tuple[object, list[int]]] = []
    gate = threading.Event()

    def process(key: object, items: list[int]) -> list[int]:
        gate.wait(5)
        calls.append((key, list(items)))
        return [10 * item for item in items]

    batcher = DynamicBatcher("test", process, max_batch=100, max_wait_s=0.0, queue_size=10)
    batcher.start()
    first = batcher.submit("a", [0])  # taken at once; the worker waits at the gate while the rest queue up
    time.sleep(0.1)
    futures = [batcher.submit("a", [1, 2]), batcher.submit("b", [3]), batcher.submit("a", [4])]
    gate.set()
    assert first.result(5) == [0]
    assert [f.result(5) for f in futures] == [[10, 20], [30], [40]]
    batcher.stop()
    assert calls == [("a", [0]), ("a", [1, 2, 4]), ("b", [3])]


def test_a_full_queue_is_refused_not_grown_and_the_batch_size_is_kept() -> None:
    gate = threading.Event()
    sizes: list[int] = []

    def process(key: object, items: list[int]) -> list[int]:
        gate.wait(5)
        sizes.append(len(items))
        if 13 in items:
            raise ValueError("unlucky")
        return items

    batcher = DynamicBatcher("test", process, max_batch=3, max_wait_s=0.0, queue_size=4)
    batcher.start()
    busy = batcher.submit("k", [0])
    time.sleep(0.1)
    queued = [batcher.submit("k", [i]) for i in range(1, 5)]
    with pytest.raises(QueueFull, match="4 requests waiting"):
        batcher.submit("k", [5])
    with pytest.raises(QueueFull):
        batcher.check_room()  # what /caption asks before it decodes the uploads
    gate.set()
    assert busy.result(5) == [0] and [f.result(5) for f in queued] == [[1], [2], [3], [4]]
    assert sizes == [1, 3, 1]  # at most max_batch items per batch
    failed = batcher.submit("k", [13])
    with pytest.raises(ValueError, match="unlucky"):
        failed.result(5)
    assert batcher.submit("k", [7]).result(5) == [7]  # a failed batch does not end the worker
    batcher.stop()


def test_the_server_answers_503_while_the_queue_is_full(runs: dict[str, Path]) -> None:
    limits = ServeLimits(queue_size=1, max_wait_ms=0)
    models = load_models([str(runs["translation"])], device="cpu", limits=limits)
    model = models["de-en"]
    gate = threading.Event()
    search = model.batcher.process
    model.batcher.process = lambda key, items: (gate.wait(10), search(key, items))[1]
    with TestClient(create_app(models, limits)) as client:
        key = (model.options(None, None), False, False, False)  # search options; no alignment, token scores, score
        running = model.batcher.submit(key, [("ein mann", "", "")])  # the worker holds it at the gate
        time.sleep(0.1)
        waiting = model.batcher.submit(key, [("eine frau", "", "")])  # fills the queue
        answer = client.post("/translate", json={"lines": ["der hund"]})
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        assert "1 requests waiting" in answer.json()["error"]
        gate.set()
        assert len(running.result(10)) == len(waiting.result(10)) == 1
        assert client.post("/translate", json={"lines": ["der hund"]}).status_code == 200


# -- fuzzing ------------------------------------------------------------------------------------------------------

def fuzzed_request(rng: random.Random, images: list[bytes]) -> dict[str, Any]:
    """One random request: random bytes, huge or odd JSON, malformed multipart, images that are not images,
    and now and then a valid one."""
    kind = rng.randrange(10)
    noise = rng.randbytes(rng.randrange(0, 3000))
    if kind == 0:
        return {"method": "POST", "url": "/translate", "content": noise}
    if kind == 1:
        return {"method": "POST", "url": "/translate",
                "content": json.dumps({"lines": ["x" * rng.randrange(100, 1000)] * rng.randrange(1, 200)})}
    if kind == 2:
        def char() -> str:  # ASCII, other scripts, emoji, NUL, a right-to-left override
            return chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000), rng.randrange(0x1F300, 0x1F600),
                                   0, 0x202E]))

        words = ["".join(char() for _ in range(rng.randrange(12))) for _ in range(rng.randrange(0, 6))]
        body: dict[str, Any] = {"lines": words}
        for key, values in (("beam", [1, 2, 0, -3, 8, 9, 10**30, "3", None, 2.5]), ("nbest", [1, 2, 5, 0, True]),
                            ("scores", [True, False, "yes", 1]), ("model", ["de-en", "captioner", "", None, 7]),
                            ("min_len", [0, 3, -1, 10**30]), ("no_repeat_ngram_size", [0, 1, 2, -2, "2"])):
            if rng.random() < 0.4:
                body[key] = rng.choice(values)
        if rng.random() < 0.1:
            body = rng.choice([[], "lines", 3, {"lines": [["nested"]]}, {"lines": [None]}, {"extra": 1}])
        return {"method": "POST", "url": "/translate", "content": json.dumps(body)}
    if kind in (3, 4):
        boundary = "b" + str(rng.randrange(10**6))
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; "
                'filename="f.jpg"\r\n\r\n').encode()
        body_bytes = rng.choice([head + noise, head + noise + f"\r\n--{boundary}--\r\n".encode(), noise,
                                 head[: rng.randrange(len(head))], f"--{boundary}--\r\n".encode()])
        header = rng.choice([f"multipart/form-data; boundary={boundary}", "multipart/form-data",
                             f"multipart/form-data; boundary={boundary}x", "application/json", "text/plain"])
        return {"method": "POST", "url": "/caption", "content": body_bytes, "headers": {"content-type": header}}
    if kind in (5, 6, 7):
        data = rng.choice(images)
        data = rng.choice([noise, data[: rng.randrange(len(data))], data[:20] + noise, b"GIF89a" + noise,
                           data if rng.random() < 0.5 else noise])
        name = rng.choice(["a.jpg", "", "../../etc/passwd", "x\x00y.png", "é" * 300, "a\nb.png"])
        fields = {key: rng.choice(values) for key, values in (("nbest", ["1", "2", "x", "-1", "99999999"]),
                                                               ("attention", ["true", "no", "maybe"]),
                                                               ("model", ["captioner", "de-en", "other"]))
                  if rng.random() < 0.3}
        return {"method": "POST", "url": "/caption", "data": fields,
                "files": [("image", (name, data, "image/jpeg")) for _ in range(rng.choice([1, 1, 2, 4]))]}
    if kind == 8:
        return {"method": rng.choice(["GET", "PUT", "DELETE", "POST"]),
                "url": rng.choice(["/", "/health", "/models", "/nope", "/static/../../etc/passwd", "/translate",
                                   "/static/app.js", "/caption/x", "/%ff%fe"])}
    return {"method": "POST", "url": "/translate", "content": noise, "headers": {"content-type": rng.choice(
        ["application/json; charset=utf-16", "multipart/form-data; boundary=z", "", "image/png"])}}


def test_the_server_survives_1000_fuzzed_requests_without_a_5xx(served: dict[str, Any]) -> None:
    rng = random.Random(20240533)
    images = [picture(i) for i in range(3)] + [picture(4, (64, 64), "PNG"), bomb()]
    statuses: dict[int, int] = {}
    answered: dict[str, int] = {}  # 200s of the model endpoints: valid requests were among the noise
    with TestClient(create_app(served, LIMITS), raise_server_exceptions=False) as client:
        for _ in range(1000):
            request = fuzzed_request(rng, images)
            answer = client.request(**request)
            statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
            if answer.status_code == 200 and request["method"] == "POST":
                answered[request["url"]] = answered.get(request["url"], 0) + 1
            assert answer.status_code < 500 or answer.status_code == 503, (answer.status_code, answer.text)
            if answer.status_code >= 400 and answer.headers.get("content-type") == "application/json":
                assert "\n" not in answer.json()["error"]
        assert client.post("/translate", json={"lines": LINES}).status_code == 200
        assert all(m.batcher.running for m in served.values())
    assert sum(statuses.values()) == 1000 and answered["/translate"] >= 10 and answered["/caption"] >= 1, \
        (statuses, answered)
    assert len([s for s in statuses if 400 <= s < 500]) >= 5, statuses


# -- the command ---------------------------------------------------------------------------------------------

def test_serve_stops_at_start_with_one_line_when_a_model_does_not_load(runs: dict[str, Path], tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    translation_run(broken)
    (broken / "checkpoints" / "best" / "model.safetensors").write_bytes(b"not a safetensors file")
    for argv, reason in (
        (["--model", str(tmp_path / "missing")], "run directory not found"),
        (["--model", str(broken)], "model.safetensors"),
        (["--model", str(doubly_attentive_run(tmp_path / "mm"))], "reads an image with each sentence"),
        (["--model", str(runs["translation"]), "--model", str(runs["translation"])], "a second model named"),
        (["--model", str(runs["translation"]), "--limit", "max_line=3"], "did you mean 'max_lines'"),
        (["--model", str(runs["translation"]), "--limit", "max_beam=3"],  # (requests naming no beam searched 4)
         "its search beam 4 is wider than max_beam 3, which bounds every request (--limit max_beam=4 serves it)"),
        (["--model", str(runs["translation"]), "--port", "70000"], "--port 70000"),
    ):
        result = cli("serve", *argv)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("error: ") and reason in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1

    with socket.create_server(("127.0.0.1", 0)) as taken:
        result = cli("serve", "--model", str(runs["translation"]), "--port", str(taken.getsockname()[1]))
    assert result.exit_code == 2 and "cannot listen there" in result.stderr and result.stderr.count("\n") == 1

    with pytest.raises(SystemExit) as stopped:  # a usage error, through the console entry point
        main(["serve", "--model", str(runs["translation"]), "--threads", "-1"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert "--threads': Input should be greater than or equal to 0" in err
