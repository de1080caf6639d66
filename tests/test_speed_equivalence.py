"""Speed work must not change results: the optimised search against a straightforward reference, the fast
detokenizer against sacremoses' own, and what a one-line ``translate`` imports (issue 33).

The reference beam search below is written for reading, not speed: one sentence at a time, the full
normalised distribution of every hypothesis, Python lists, and the model's general ``step`` (with gradients
on, so that models with a separate inference step, such as the RNN's fused one, take their training path).
It follows the rules the search documents (fairseq's): the best 2·beam candidates, EOS ones ranked within the
best beam finish, the first beam non-EOS ones go on, a sentence stops with beam finished hypotheses or at its
length limit. Models run in float64, so that batched and single matrix products agree far below the gaps
between hypotheses.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import rnn, tiny_recipe
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.io import read_lines
from nlgkit.data.moses import _without_tokenizer
from nlgkit.models.base import Generator
from nlgkit.models.rnn import RNNConfig
from nlgkit.search import Hypothesis, search
from nlgkit.search.steps import normalise

PAD, UNK, BOS, EOS = 1, 0, 2, 3
ROOT = Path(__file__).resolve().parents[1]


def reference_search(model: Generator, inputs: dict[str, Any], sentence: int, *, beam: int, max_len: int,
                     length_penalty: float = 1.0, nbest: int = 1, min_len: int = 0,
                     no_repeat_ngram_size: int = 0, never: tuple[int, ...] = ()) -> list[Hypothesis]:
    """Beam search for one sentence of ``inputs``, the plain way (see the module docstring)."""
    if max_len <= 0:
        return [Hypothesis([], 0.0, 0.0)]
    one = {name: value[sentence : sentence + 1] for name, value in inputs.items()}
    with torch.enable_grad():
        start = model.encode(one)
        active: list[tuple[list[int], float, Any]] = [([], 0.0, start)]  # (tokens, log-prob, state)
        finished: list[Hypothesis] = []
        for step in range(1, max_len + 1):
            candidates = []  # (score, order, tokens, word, state): order breaks ties as the search's ranking does
            for row, (tokens, log_prob, state) in enumerate(active):
                prev = torch.tensor([tokens[-1] if tokens else BOS])
                features, next_state = model.step(prev, state)
                scores = model.head.log_probs(features)[0].double().detach()  # (V,)
                for word in [*never, *([EOS] if step - 1 < min_len else [])]:
                    scores[word] = -math.inf
                for word in range(len(scores)):
                    if repeats_an_ngram(tokens, word, no_repeat_ngram_size):
                        scores[word] = -math.inf
                for word, score in enumerate(scores.tolist()):
                    candidates.append((log_prob + score, row, word, tokens, next_state))
            candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
            ranked = candidates[: 2 * beam]
            for rank, (score, _, word, tokens, _) in enumerate(ranked):
                if word == EOS and rank < beam and math.isfinite(score) and len(finished) < beam:
                    finished.append(Hypothesis(tokens, normalise(score, step, length_penalty), score))
            active = [(tokens + [word], score, state) for score, _, word, tokens, state in ranked
                      if word != EOS][:beam]
            if len(finished) >= beam:
                break
            if step == max_len:
                finished += [Hypothesis(tokens, normalise(score, step, length_penalty), score)
                             for tokens, score, _ in active if math.isfinite(score)]
    return sorted(finished, key=lambda h: h.score, reverse=True)[:nbest]


def repeats_an_ngram(tokens: list[int], word: int, size: int) -> bool:
    """Whether tokens + [word] ends with an n-gram of ``size`` tokens that ``tokens`` already holds."""
    if size <= 0:
        return False
    new = (*tokens[len(tokens) - size + 1 :], word) if size > 1 else (word,)
    return any(tuple(tokens[i : i + size]) == new for i in range(len(tokens) - size + 1))


def paper_like_rnn(seed: int, vocab: int = 40) -> Generator:
    """The paper's model family (bidirectional GRU encoder, additive attention, fixed random head), small,
    random, in float64; EOS made likely enough that outputs end at different steps."""
    torch.manual_seed(seed)
    config = RNNConfig(embedding_dim=12, encoder_dim=10, decoder_dim=14, attention_dim=9, pre_output_dim=16)
    model = rnn(config, vocab, vocab, head="fixed").double().eval()
    with torch.no_grad():
        model.head.weight.mul_(6.0)  # peaked distributions: no near-ties
        model.head.weight[EOS] *= 1.2
    return model


def sources(seed: int, batch: int, vocab: int = 40) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 9, (batch,), generator=generator)
    src = torch.full((batch, int(lengths.max())), PAD)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=generator)
        src[i, n - 1] = EOS
    max_lens = (lengths.double() * 1.5 + 2).long()
    max_lens[0] = 0 if batch > 3 else max_lens[0]  # an empty output too
    return {"src": src, "src_lengths": lengths}, max_lens


def assert_same(got: list[Hypothesis], expected: list[Hypothesis]) -> None:
    assert [h.tokens for h in got] == [h.tokens for h in expected]
    assert [h.log_prob for h in got] == pytest.approx([h.log_prob for h in expected], abs=1e-5)
    assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-5)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("options", [
    {"beam": 5},
    {"beam": 3, "nbest": 3, "length_penalty": 0.0},
    {"beam": 4, "nbest": 2, "min_len": 3, "never": (PAD, BOS), "length_penalty": 0.6},
    {"beam": 1},
    {"beam": 4, "nbest": 2, "no_repeat_ngram_size": 2, "min_len": 2},
    {"beam": 1, "no_repeat_ngram_size": 1, "min_len": 4},
], ids=["beam5", "nbest3-raw", "min-len-never", "greedy", "no-repeat-bigram", "greedy-no-repeat-word"])
def test_search_equals_the_reference(seed: int, options: dict[str, Any]) -> None:
    model = paper_like_rnn(seed)
    inputs, max_lens = sources(seed, batch=7)
    with torch.inference_mode():
        found = search(model, model.encode(inputs), batch_size=len(max_lens), bos=BOS, eos=EOS, max_lens=max_lens,
                       beam_size=options["beam"], **{k: v for k, v in options.items() if k != "beam"})
    for i, hyps in enumerate(found):
        assert_same(hyps, reference_search(model, inputs, i, max_len=int(max_lens[i]), **options))
    if options == {"beam": 5}:  # outputs of different lengths: sentences left the batch at different steps
        assert len({len(hyps[0].tokens) for hyps in found[1:]}) > 2
    if options.get("no_repeat_ngram_size"):  # the ban changed outputs: without it, some repeat an n-gram
        size = options["no_repeat_ngram_size"]
        free = {k: v for k, v in options.items() if k not in ("beam", "no_repeat_ngram_size")}
        with torch.inference_mode():
            unbanned = search(model, model.encode(inputs), batch_size=len(max_lens), bos=BOS, eos=EOS,
                              max_lens=max_lens, beam_size=options["beam"], **free)
        assert any(repeats_an_ngram(h.tokens[:i], h.tokens[i], size)
                   for hyps in unbanned for h in hyps for i in range(len(h.tokens)))
        assert not any(repeats_an_ngram(h.tokens[:i], h.tokens[i], size)
                       for hyps in found for h in hyps for i in range(len(h.tokens)))


# --- the detokenizer: sacremoses' own code, loaded without its tokenizer --------------------------------------

TRICKY = ['a man \'s dog , " quoted " ( here ) .', "it costs $ 5 , or 5 % more !", "l' homme d' affaires ?",
          "„ so “ - sagte er : nein .", "e-mail @-@ address [ x ] { y } & z", "don 't stop ... now", ""]


@pytest.mark.parametrize("lang", ["en", "de", "fr"])
def test_the_light_detokenizer_is_sacremoses_own(lang: str, paper: tuple[Path, dict]) -> None:
    from sacremoses import MosesDetokenizer

    light, full = _without_tokenizer()(lang=lang), MosesDetokenizer(lang=lang)
    assert type(light) is not MosesDetokenizer  # built from the source here, not the package's class
    lines = [*TRICKY, *read_lines(paper[0] / f"test.{'de' if lang == 'de' else 'en'}")[:300]]
    assert [light.detokenize(line.split()) for line in lines] == [full.detokenize(line.split()) for line in lines]


def test_detokenizing_loads_no_tokenizer_and_leaves_sacremoses_whole() -> None:
    code = ("import sys\n"
            "from nlgkit.data.tokenize import moses_detokenizer\n"
            "out = moses_detokenizer('en').detokenize(['a', 'dog', \"'s\", 'toy', '.'])\n"
            "loaded = 'sacremoses.tokenize' in sys.modules\n"
            "from sacremoses import MosesTokenizer\n"
            "print(out, loaded, MosesTokenizer(lang='en').tokenize('A dog.'))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "a dog's toy. False ['A', 'dog', '.']"


@pytest.fixture(scope="module")
def tiny_run(paper: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tiny")
    recipe = tiny_recipe(tmp, paper[0], tmp / "run", max_updates=1, valid_limit=5)
    assert CliRunner().invoke(app, ["train", str(recipe)]).exit_code == 0
    return tmp / "run"


def test_a_one_line_translation_imports_only_what_it_needs(tiny_run: Path) -> None:
    """Start-up is imports: translating text loads no metric, no captioning or vision code, no Moses tokenizer."""
    unwanted = ["sacrebleu", "pycocoevalcap", "sacremoses.tokenize", "nlgkit.metrics.corpus", "nlgkit.vision",
                "nlgkit.tasks.captioning", "nlgkit.models.transformer", "nlgkit.heads.continuous", "timm"]
    code = ("import sys, json\n"
            "from nlgkit.cli.main import main\n"
            "try:\n"
            f"    main(['translate', '--model', {str(tiny_run)!r}, '--device', 'cpu'])\n"
            "except SystemExit as exc:\n"
            "    assert not exc.code, exc.code\n"
            f"print(json.dumps([m for m in {unwanted!r} if m in sys.modules]))\n")
    result = subprocess.run([sys.executable, "-c", code], input="Ein Mann fährt Fahrrad .\n", capture_output=True,
                            text=True, check=True)
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2 and json.loads(lines[-1]) == []


def test_the_translate_command_ends_at_once_with_its_output_written(tiny_run: Path, tmp_path: Path) -> None:
    """As a command, translate leaves without the interpreter's teardown: its output must be complete by then
    (a pipe, or the atomic output file), and its exit code kept."""
    command = [sys.executable, "-m", "nlgkit", "translate", "--model", str(tiny_run), "--device", "cpu"]
    piped = subprocess.run(command, input="Ein Mann .\nZwei Hunde .\n", capture_output=True, text=True, check=False)
    assert piped.returncode == 0 and len(piped.stdout.splitlines()) == 2 and piped.stderr == ""
    output = tmp_path / "out.en"
    written = subprocess.run([*command, "--output", str(output)], input="Ein Mann .\n" * 3, capture_output=True,
                             text=True, check=False)
    assert written.returncode == 0 and output.read_text(encoding="utf-8").splitlines() == piped.stdout.splitlines()[:1] * 3
    missing = subprocess.run([*command[:4], "--model", str(tmp_path / "nothing")], input="", capture_output=True,
                             text=True, check=False)
    assert missing.returncode == 2 and missing.stderr == f"error: {tmp_path / 'nothing'}: run directory not found\n"
