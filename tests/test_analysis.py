"""Analyses of trained models on constructed vectors whose answers are known by hand, and their CLI."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import typer
from helpers import model_for, rnn
from PIL import Image
from typer.testing import CliRunner

from nlgkit.cli.analyze import register
from nlgkit.cli.main import app as main_app
from nlgkit.core.config import config_from_dict, to_dict
from nlgkit.core.errors import DataError
from nlgkit.core.figures import save_png
from nlgkit.core.io import write_json
from nlgkit.data.vocab import SPECIALS, Vocabulary
from nlgkit.evaluate.analysis import confidence, geometry, neighbours, norms, params, wordsim
from nlgkit.models.rnn import RNNConfig, RNNModel
from nlgkit.runs.checkpoint import save_checkpoint
from nlgkit.wordvectors import knn
from nlgkit.wordvectors.hubness import neighbours_of
from nlgkit.wordvectors.sources import read_vectors
from nlgkit.wordvectors.tables import save_table


def vocab_of(words: list[str], counts: list[int] | None = None) -> Vocabulary:
    counts = counts if counts is not None else list(range(10 * len(words), 0, -10))
    return Vocabulary(list(SPECIALS) + words, [0] * len(SPECIALS) + counts)


def at_angles(degrees: list[float], dim: int = 2) -> torch.Tensor:
    """Unit vectors in the plane of the first two axes: cosines are cos(angle differences)."""
    radians = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    matrix = torch.zeros(len(degrees), dim)
    matrix[:, 0], matrix[:, 1] = radians.cos().float(), radians.sin().float()
    return matrix


# -- reference-token confidence -------------------------------------------------------------------------------

def test_confidence_pools_token_scores_by_training_count_unknown_and_end_apart() -> None:
    counts = {"a": 1, "b": 3, "c": 50}
    references = [["a", "c", "zzz"], ["b", "c"]]
    scores = [[-4.0, -1.0, -6.0, -0.5], [-2.0, -3.0, -0.1]]  # each token's, then the EOS's
    bins = {b.label: b for b in confidence.confidence_by_frequency(references, scores, counts, (1, 2, 10))}
    assert list(bins) == ["<1", "1", "[2,10)", ">=10", "<unk>", "</s>"]
    assert bins["<1"].tokens == 0 and bins["<1"].mean_log_prob is None and bins["<1"].perplexity is None
    assert (bins["1"].tokens, bins["1"].mean_log_prob) == (1, -4.0)  # a
    assert (bins["[2,10)"].tokens, bins["[2,10)"].mean_log_prob) == (1, -2.0)  # b
    assert (bins[">=10"].tokens, bins[">=10"].mean_log_prob) == (2, -2.0)  # c twice: (−1 − 3) / 2
    assert (bins["<unk>"].tokens, bins["<unk>"].mean_log_prob) == (1, -6.0)
    assert bins["</s>"].tokens == 2 and bins["</s>"].mean_log_prob == pytest.approx(-0.3)
    assert bins[">=10"].perplexity == pytest.approx(math.exp(2.0))
    with pytest.raises(DataError, match="reference 2: 2 token scores for 2 tokens"):
        confidence.confidence_by_frequency(references, [scores[0], [-1.0, -1.0]], counts, (1, 2, 10))


# -- norms ------------------------------------------------------------------------------------------------

def test_norms_decreasing_with_frequency_give_rho_minus_one() -> None:
    vocab = vocab_of(["a", "b", "c", "d", "e", "never"], [60, 50, 40, 30, 20, 0])
    matrix = torch.zeros(len(vocab), 3)
    matrix[:4, 0] = 100.0  # specials: huge norms, must be ignored
    matrix[4:9, 1] = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])  # rarer → longer
    matrix[9, 2] = 0.5  # count 0: ignored, although it would break the order
    result = norms.norm_frequency(matrix, vocab)
    assert result.rho == pytest.approx(-1.0)
    assert result.words == 5 and result.counts == [60, 50, 40, 30, 20]


def test_norms_undefined_when_constant() -> None:
    vocab = vocab_of(["a", "b", "c", "d"])
    assert norms.norm_frequency(torch.ones(len(vocab), 2), vocab).rho is None


# -- word similarity --------------------------------------------------------------------------------------

def test_word_similarity_in_human_order_gives_rho_one_and_counts_covered_pairs() -> None:
    vocab = vocab_of(["a", "b", "c", "d", "e"])
    matrix = torch.cat([torch.zeros(4, 2), at_angles([0, 10, 30, 60, 90])])
    pairs = [("a", "b", 9.0), ("A", "c", 7.0), ("a", "d", 5.0), ("a", "e", 3.0), ("B", "C", 8.0),
             ("a", "zebra", 4.0), ("<unk>", "b", 1.0)]
    result = wordsim.word_similarity(matrix, vocab, pairs)
    assert result.rho == pytest.approx(1.0)
    assert (result.covered, result.total) == (5, 7)
    assert wordsim.word_similarity(matrix, vocab, [("x", "y", 1.0)]).summary() == \
        {"rho": None, "covered": 0, "total": 1}


def test_benchmark_files_are_read_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "EN-SIMLEX-999.txt"
    good.write_text("old\tnew\t1.58\nsmart\tintelligent\t9.2\n")
    assert wordsim.read_benchmark(good) == [("old", "new", 1.58), ("smart", "intelligent", 9.2)]
    bad = tmp_path / "bad.txt"
    bad.write_text("old\tnew\tmany\n")
    with pytest.raises(DataError, match="line 1"):
        wordsim.read_benchmark(bad)
    with pytest.raises(DataError, match="EN-MEN-TR-3k.txt: word-similarity file not found"):
        wordsim.benchmark_paths(tmp_path)
    assert wordsim.benchmark_paths(tmp_path, ["simlex999"]) == {"simlex999": good}


# -- neighbours -------------------------------------------------------------------------------------------

BIRDS = ["bird", "duck", "seagull", "tree", "car"]


def bird_vectors(dim: int = 2) -> torch.Tensor:
    """Specials sit exactly on bird (they must still never be neighbours); duck 20°, seagull 40° away."""
    return torch.cat([at_angles([0, 0, 0, 0], dim), at_angles([0, 20, 40, 90, 180], dim)])


def test_nearest_neighbours_on_hand_placed_vectors() -> None:
    vocab = vocab_of(BIRDS)
    found = neighbours.nearest_neighbours(bird_vectors(), vocab, ["bird", "Car", "zebra"], k=3)
    assert [w for w, _ in found.found["bird"]] == ["duck", "seagull", "tree"]
    expected = [math.cos(math.radians(angle)) for angle in (20, 40, 90)]
    assert [c for _, c in found.found["bird"]] == pytest.approx(expected, abs=1e-6)
    assert [w for w, _ in found.found["Car"]] == ["tree", "seagull", "duck"]
    assert found.oov == ["zebra"]
    assert len(neighbours.nearest_neighbours(bird_vectors(), vocab, ["bird"], k=50).found["bird"]) == 4
    pairs = neighbours.cosine_of_pairs(bird_vectors(), vocab, [("bird", "duck"), ("bird", "emu")])
    assert pairs[0][2] == pytest.approx(math.cos(math.radians(20)), abs=1e-6)
    assert pairs[1] == ("bird", "emu", None)


def test_embed_report_and_evaluate_neighbours_agree_and_skip_the_specials(tmp_path: Path) -> None:
    """A table extracted from a model holds rows for <unk>, <pad>, <s> and </s>; here they sit exactly on bird.
    ``embed report --neighbours`` listed them as bird's nearest words, where ``evaluate neighbours`` (the same
    vectors with their vocabulary) leaves them out: both now give the same words and cosines."""
    vocab = vocab_of(BIRDS)
    table = tmp_path / "birds.safetensors"
    save_table(table, bird_vectors(), vocab.tokens)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main_app, ["embed", "report", str(table), "--neighbours", "bird", "--k", "3",
                                           "--no-hubness", "--json", str(out)])
    assert result.exit_code == 0, result.output
    reported = [(word, cosine) for word, cosine in json.loads(out.read_text())["neighbours"]["bird"]]
    evaluated = neighbours.nearest_neighbours(bird_vectors(), vocab, ["bird"], k=3).found["bird"]
    assert [word for word, _ in reported] == [word for word, _ in evaluated] == ["duck", "seagull", "tree"]
    assert [cosine for _, cosine in reported] == pytest.approx([cosine for _, cosine in evaluated], abs=1e-6)
    source = read_vectors(table)  # a k past the other words: all of them, as evaluate's
    assert len(neighbours_of(source.vectors, source.words, source.index, ["bird"], 50)["bird"]) == 4


def test_chunked_neighbours_equal_the_full_matrix() -> None:
    generator = torch.Generator().manual_seed(0)
    matrix = torch.randn(40, 6, generator=generator)
    exclude = torch.zeros(40, dtype=torch.bool)
    exclude[:4] = True
    rows = torch.arange(4, 40)
    values, indices = knn.top_neighbours(matrix, rows, 3, exclude, budget_bytes=1)  # one row a chunk
    unit = matrix / matrix.norm(dim=1, keepdim=True)
    full = unit @ unit.t()
    full[:, :4] = -2
    full.fill_diagonal_(-2)
    expected = full[rows].topk(3, dim=1)
    torch.testing.assert_close(values, expected.values)
    assert torch.equal(indices, expected.indices)
    assert knn.block_rows(50_000, knn.DEFAULT_BUDGET) * 50_000 * 4 <= knn.DEFAULT_BUDGET


# -- geometry ---------------------------------------------------------------------------------------------

ANGLES = [0, 1, 3, 6, 10, 15, 21, 28]  # gaps 1, 2, …, 7: each word's nearest neighbour is the one before it


def test_frequency_ranks_break_ties_by_vocabulary_order() -> None:
    vocab = vocab_of(["w", "x", "y", "z"], [5, 9, 9, 1])
    assert geometry.frequency_ranks(vocab).tolist() == [0, 0, 0, 0, 3, 1, 2, 4]


def test_geometry_on_constructed_angles() -> None:
    vocab = vocab_of([f"w{i}" for i in range(len(ANGLES))])  # counts descending: ranks 1..8 in order
    matrix = torch.cat([at_angles([0] * 4), at_angles(ANGLES)])
    found = geometry.neighbour_geometry(matrix, vocab)
    cos = [math.cos(math.radians(a)) for a in (1, 1, 2, 3, 4, 5, 6, 7)]
    assert found.ranks.tolist() == list(range(1, 9))
    torch.testing.assert_close(found.cosines[:, 0], torch.tensor(cos), atol=1e-6, rtol=0)
    assert found.neighbour_ranks[:, 0].tolist() == [2, 1, 2, 3, 4, 5, 6, 7]
    assert found.neighbour_ranks[0, 1] == 6 and found.neighbour_ranks[7, 1] == 3  # 5th: 15° and 25° away
    assert found.cosines[0, 1] == pytest.approx(math.cos(math.radians(15)), abs=1e-6)
    rows = geometry.bin_geometry(found, geometry.rank_bins(8, bins=2))
    assert [row["ranks"] for row in rows] == [[1, 4], [5, 8]] and [row["words"] for row in rows] == [4, 4]
    assert rows[0]["rank@1"]["mean"] == pytest.approx(2.0) and rows[1]["rank@1"]["mean"] == pytest.approx(5.5)
    assert rows[1]["cos@1"]["mean"] == pytest.approx(sum(cos[4:]) / 4, abs=1e-6)


@pytest.mark.parametrize("words,bins,size,expected", [
    (10, 3, None, [(1, 3), (4, 7), (8, 10)]),
    (10, None, 4, [(1, 4), (5, 8), (9, 10)]),
    (3, 10, None, [(1, 1), (2, 2), (3, 3)]),
])
def test_rank_bins_cover_every_rank_once(words: int, bins: int | None, size: int | None,
                                         expected: list[tuple[int, int]]) -> None:
    assert geometry.rank_bins(words, bins, size) == expected


# -- parameters -------------------------------------------------------------------------------------------

def tiny_model(head: str) -> RNNModel:
    config = RNNConfig(embedding_dim=8, encoder_dim=10, decoder_dim=12, attention_dim=7, pre_output_dim=9)
    return rnn(config, 30, 25, head)  # type: ignore[return-value]


# by hand: embeddings V·E; bi-GRU 2·(3·10·8 + 3·10·10 + 2·30); bridge 20·12+12;
# attention (12+20)·7+7 + 7; GRUCell 36·28 + 36·12 + 72; pre-output (12+20+8)·9+9; head 9·25+25
BODY = {"src_embed": 240, "tgt_embed": 200, "encoder": 1200, "bridge": 252, "attention": 238,
        "decoder": 1512, "pre_output": 369}


@pytest.mark.parametrize("head", ["learned", "fixed"])
def test_parameter_report_matches_hand_counts(head: str) -> None:
    model = tiny_model(head)
    report = params.parameter_report(model)
    components = report["components"]
    assert {name: components[name]["trainable"] for name in BODY} == BODY
    # fixed: W (25, 9) and the fixed zero bias (25,) are buffers
    head_trainable, head_buffers = (250, 0) if head == "learned" else (0, 250)
    assert components["head"]["trainable"] == head_trainable and components["head"]["buffers"] == head_buffers
    assert report["trainable"] == sum(BODY.values()) + head_trainable and report["frozen"] == 0
    assert report["bytes"] == 4 * (sum(BODY.values()) + 250)
    assert report["adam_bytes"] == 2 * report["trainable"] * 4 and report["adam_bytes_measured"] is None


def test_measured_adam_state_is_two_moments_per_trainable_element() -> None:
    model = tiny_model("fixed")
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable)
    for p in trainable:
        p.grad = torch.zeros_like(p)
    optimizer.step()
    report = params.parameter_report(model, optimizer.state_dict())
    extra = report["adam_bytes_measured"] - report["adam_bytes"]  # the per-tensor step counters
    assert 0 <= extra <= 8 * len(trainable)


def test_png_is_never_left_half_written(tmp_path: Path) -> None:
    class Broken:
        def savefig(self, handle, **_: object) -> None:  # type: ignore[no-untyped-def]
            handle.write(b"\x89PNG partial")
            raise RuntimeError("renderer failed")

    with pytest.raises(RuntimeError):
        save_png(Broken(), tmp_path / "plot.png")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


# -- CLI on a real (tiny, untrained) run directory ---------------------------------------------------------

TGT_WORDS = BIRDS + ["a", "b", "c"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory ``load_trained`` accepts; its target vectors are the hand-placed bird vectors."""
    root = tmp_path_factory.mktemp("analysis") / "run"
    config = config_from_dict({
        "data": {"src_lang": "de", "tgt_lang": "en"},
        "model": {"type": "rnn", "embedding_dim": 8, "encoder_dim": 10, "decoder_dim": 12, "attention_dim": 7,
                  "pre_output_dim": 9},
        "head": {"type": "learned"},
    })
    src, tgt = vocab_of(["haus", "baum", "vogel"]), vocab_of(TGT_WORDS)
    data = root / "data"
    src.save(data / "vocab.de.txt")
    tgt.save(data / "vocab.en.txt")
    write_json(data / "manifest.json", {"src_lang": "de", "tgt_lang": "en", "tokenizer": "none",
                                        "lowercase": True, "subword": "none"})
    model = model_for(config, src, tgt)
    with torch.no_grad():  # norms 1..8 over the 8 words, growing as the counts fall
        rows = torch.cat([bird_vectors(9), at_angles([100, 110, 120], 9)])
        rows[4:] *= torch.arange(1, len(TGT_WORDS) + 1, dtype=torch.float32)[:, None]
        model.head.weight.copy_(rows)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    meta = {"config": to_dict(config), "vocab_checksums": {"de": src.checksum(), "en": tgt.checksum()}}
    save_checkpoint(root / "checkpoints" / "best", model, meta, {"optimizer": optimizer.state_dict()})
    return root


def cli(*args: str) -> object:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)
    return CliRunner().invoke(app, [str(arg) for arg in args])


def test_cli_neighbours_reports_neighbours_pairs_and_oov(run_dir: Path) -> None:
    result = cli("neighbours", run_dir, "--query", "bird", "--query", "zebra", "-k", "2",
                 "--pair", "bird,duck", "--device", "cpu", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)["sets"]["tgt_output"]
    assert [w for w, _ in out["neighbours"]["bird"]] == ["duck", "seagull"]
    assert out["oov"] == ["zebra"]
    assert out["pairs"][0]["cosine"] == pytest.approx(math.cos(math.radians(20)), abs=1e-5)
    table = cli("neighbours", run_dir, "--query", "zebra", "--device", "cpu")
    assert table.exit_code == 0 and "OOV" in table.stdout


def test_cli_norms_writes_a_png_and_reports_rho(run_dir: Path, tmp_path: Path) -> None:
    png = tmp_path / "figs" / "norms.png"
    result = cli("norms", run_dir, "--vectors", "tgt_output", "--png", png, "--device", "cpu", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["sets"]["tgt_output"]["rho"] == pytest.approx(-1.0) and payload["head"] == "learned"
    with Image.open(png) as image:
        assert image.format == "PNG"
    assert sorted(p.name for p in png.parent.iterdir()) == ["norms.png"]


def test_cli_geometry_table_and_png(run_dir: Path, tmp_path: Path) -> None:
    png = tmp_path / "geometry.png"
    result = cli("geometry", run_dir, "--bins", "2", "--png", png, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "1–4" in result.stdout and "5–8" in result.stdout
    with Image.open(png) as image:
        image.verify()


def test_cli_wordsim_counts_pairs_and_names_a_missing_file(run_dir: Path, tmp_path: Path) -> None:
    for name in wordsim.BENCHMARKS.values():
        (tmp_path / name).write_text("bird\tduck\t9\nbird\tseagull\t8\nBird\ttree\t3\nbird\tzebra\t5\n")
    result = cli("wordsim", run_dir, "--data-dir", tmp_path, "--device", "cpu", "--json")
    assert result.exit_code == 0, result.output
    sets = json.loads(result.stdout)["sets"]
    assert sets["tgt_output"]["men"] == {"rho": pytest.approx(1.0), "covered": 3, "total": 4}
    (tmp_path / wordsim.BENCHMARKS["men"]).unlink()
    missing = cli("wordsim", run_dir, "--data-dir", tmp_path, "--device", "cpu")
    assert missing.exit_code == 2 and "EN-MEN-TR-3k.txt: word-similarity file not found" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_cli_wordsim_meets_english_vectors_only(run_dir: Path, tmp_path: Path) -> None:
    """The run is DE-EN: its encoder embedding holds German words, and the benchmarks are English. Was: scored by
    default, over the pairs of the words both languages spell alike ('hand', 'film': 13 of SimLex's 999 on a
    Multi30K DE-EN run), a ρ that means nothing."""
    for name in wordsim.BENCHMARKS.values():
        (tmp_path / name).write_text("bird\tduck\t9\nhaus\tbaum\t8\nhaus\tvogel\t3\nbaum\tvogel\t5\n")
    result = cli("wordsim", run_dir, "--data-dir", tmp_path, "--device", "cpu", "--json")
    assert result.exit_code == 0, result.output
    assert sorted(json.loads(result.stdout)["sets"]) == ["tgt_input", "tgt_output"]
    asked = cli("wordsim", run_dir, "--vectors", "src_input", "--data-dir", tmp_path, "--device", "cpu")
    assert asked.exit_code == 2 and asked.stderr.startswith("error: --vectors src_input: its words are de")
    assert len(asked.stderr.strip().splitlines()) == 1


def test_cli_params_measures_optimizer_state(run_dir: Path) -> None:
    result = cli("params", run_dir, "--measure-optimizer", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    vocab_src, vocab_tgt = 4 + 3, 4 + len(TGT_WORDS)
    body = 1200 + 252 + 238 + 1512 + 369  # as in BODY
    assert report["trainable"] == vocab_src * 8 + vocab_tgt * 8 + body + vocab_tgt * (9 + 1)
    assert report["adam_bytes_measured"] >= report["adam_bytes"] == 8 * report["trainable"]


def test_cli_params_says_which_checkpoint_keeps_the_optimizer_state(run_dir: Path, tmp_path: Path) -> None:
    """A best checkpoint written without the training state (as the trainer writes it) was "no training state to
    resume from", though nothing resumes."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "checkpoints" / "best" / "train_state.pt").unlink()
    result = cli("params", copy, "--measure-optimizer")
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        (f"error: --measure-optimizer: {copy / 'checkpoints' / 'best'} keeps no optimizer state (train_state.pt; "
        "the last checkpoint does: --checkpoint last)")], result.stderr


@pytest.mark.parametrize("args", [
    ("norms", "{missing}"),
    ("neighbours", "{run}", "--pair", "bird"),
    ("neighbours", "{run}"),
    ("norms", "{run}", "--vectors", "nope"),
    ("norms", "{run}", "--png", "{file}/x.png"),
])
def test_cli_errors_are_one_line(run_dir: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    filled = [a.format(missing=tmp_path / "none", run=run_dir, file=blocker) for a in args]
    result = cli(*filled, "--device", "cpu")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
