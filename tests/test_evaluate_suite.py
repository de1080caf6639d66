"""Evaluation suite: each score equals its reference implementation; VU, rare share and word F1 match
hand-worked answers; the bootstrap behaves; a read-only pycocoevalcap and a missing java are handled.

Java starts are slow (METEOR loads a 60 MB paraphrase table), so the caption scores are computed once, by a
subprocess that uses a read-only copy of pycocoevalcap, while the reference values are computed here.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest
import sacrebleu
from typer.testing import CliRunner

from nlgkit.cli.evaluate import app
from nlgkit.core.errors import ConfigError
from nlgkit.data.vocab import Vocabulary
from nlgkit.data.word_counts import write_word_counts
from nlgkit.evaluate.significance import mean_sd, paired_bootstrap
from nlgkit.metrics import captions as cm
from nlgkit.metrics import meteor
from nlgkit.metrics.corpus import corpus_scores, score_all
from nlgkit.metrics.meteor import METEOR_JAR, meteor_score, meteor_variant
from nlgkit.metrics.vocabulary import DEFAULT_EDGES, bin_labels, parse_edges, train_counts, vocab_report

ROOT = Path(__file__).resolve().parents[1]
CAPTIONS = ROOT.parent / "shared/data/flickr8k-1k/captions.txt"
TOK = ROOT.parent / "shared/data/multi30k/task1/tok"
COCO = METEOR_JAR.parents[1]
runner = CliRunner()
READONLY_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from nlgkit.metrics import captions as caption_metrics
from nlgkit.metrics import meteor
data = json.load(open(sys.argv[2]))
print(json.dumps({"jars": [str(caption_metrics.PTB_JAR), str(meteor.METEOR_JAR)],
                  "caption": caption_metrics.caption_scores(data["hyps"], data["refs"]),
                  "meteor_de": meteor.meteor_score(["ein hund"], [["ein kleiner hund"]], "de")}))
"""


def perturb(line: str, seed: int) -> str:
    words = line.split()
    if len(words) > 3:
        del words[seed % len(words)]
    return " ".join("the" if w == "a" and seed % 2 else w for w in words)


def snapshot(root: Path) -> dict[str, int]:
    """Every path under ``root`` with its mtime: creating or deleting a file changes its directory's."""
    return {str(path): path.stat().st_mtime_ns for path in [root, *root.rglob("*")]}


@pytest.fixture(scope="module")
def flickr() -> tuple[list[str], list[list[str]]]:
    """20 Flickr8k images: the first caption is the hypothesis, the other four the references."""
    if not CAPTIONS.is_file():
        pytest.skip(f"{CAPTIONS} not available")
    by_image: dict[str, list[str]] = defaultdict(list)
    with CAPTIONS.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            by_image[row["image"]].append(row["caption"])
    images = list(by_image)[:20]
    return [by_image[i][0] for i in images], [by_image[i][1:] for i in images]


@pytest.fixture(scope="module")
def readonly_run(tmp_path_factory: pytest.TempPathFactory, flickr: tuple) -> Iterator[dict]:
    """Start our caption scorer on a read-only copy of pycocoevalcap, in a subprocess (see ``collected``)."""
    if shutil.which("java") is None:
        pytest.skip("java not installed")
    base = tmp_path_factory.mktemp("readonly")
    copy = base / "site" / "pycocoevalcap"
    shutil.copytree(COCO, copy, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "a-w", str(copy)], check=True)
    (base / "input.json").write_text(json.dumps({"hyps": flickr[0], "refs": flickr[1]}), encoding="utf-8")
    before = snapshot(copy)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", READONLY_SCRIPT, str(copy.parent), str(base / "input.json")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    yield {"process": process, "copy": copy, "before": before}
    process.kill()
    subprocess.run(["chmod", "-R", "u+w", str(copy)], check=True)


@pytest.fixture(scope="module")
def collected(readonly_run: dict) -> dict:
    out, err = readonly_run["process"].communicate(timeout=300)
    assert readonly_run["process"].returncode == 0, err.decode()
    return json.loads(out)


@pytest.fixture(scope="module")
def reference(readonly_run: dict, flickr: tuple) -> dict:
    """pycocoevalcap used directly, as its COCOEvalCap does (while the subprocess works: ask for it first)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    hyps, refs = flickr
    gts = PTBTokenizer().tokenize({i: [{"caption": c} for c in r] for i, r in enumerate(refs)})
    res = PTBTokenizer().tokenize({i: [{"caption": h}] for i, h in enumerate(hyps)})
    bleu = Bleu(4).compute_score(gts, res, verbose=0)[0]
    scores = {f"BLEU-{n}": value for n, value in enumerate(bleu, start=1)}
    scores["METEOR"] = Meteor().compute_score(gts, res)[0]
    scores["ROUGE-L"] = Rouge().compute_score(gts, res)[0]
    scores["CIDEr"] = Cider().compute_score(gts, res)[0]
    return {"scores": scores, "gts": gts, "res": res}


def test_caption_scores_equal_pycocoevalcap(reference: dict, collected: dict) -> None:
    caption = collected["caption"]
    assert caption["tokenizer"].startswith("PTB")
    for name, value in reference["scores"].items():
        assert caption["scores"][name]["available"], name
        assert caption["scores"][name]["score"] == pytest.approx(100 * value, abs=1e-9), name
    assert 10 < caption["scores"]["BLEU-4"]["score"] < caption["scores"]["BLEU-1"]["score"] < 100
    assert "paraphrase" in caption["scores"]["METEOR"]["signature"]
    spice = caption["scores"]["SPICE"]
    assert spice["available"] is False and "CoreNLP" in spice["reason"]


def test_readonly_install_is_used_and_untouched(collected: dict, readonly_run: dict) -> None:
    """chmod does not stop root, so the check is that no file or directory under the copy changed."""
    assert all(path.startswith(str(readonly_run["copy"])) for path in collected["jars"])
    assert collected["meteor_de"]["available"] and collected["meteor_de"]["score"] > 0
    assert snapshot(readonly_run["copy"]) == readonly_run["before"]


def test_ptb_tokenize_equals_pycocoevalcap(flickr: tuple, reference: dict) -> None:
    hyps, refs = flickr
    tricky = ["Two dogs (brown) play, it's café-time!", "", "  ", 'A "quoted" -- dash ... end.']
    ours = cm.ptb_tokenize(hyps + tricky + [ref for image in refs for ref in image])
    assert ours[: len(hyps)] == [reference["res"][i][0] for i in range(len(hyps))]
    assert ours[len(hyps) + 4 :] == [ref for i in range(len(refs)) for ref in reference["gts"][i]]
    assert ours[len(hyps) : len(hyps) + 4] == [
        "two dogs -lrb- brown -rrb- play it 's café-time", "", "", "a quoted dash end"
    ]  # fmt: skip


@pytest.fixture()
def no_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without java


def test_missing_java_keeps_bleu_rouge_cider(no_java: None, flickr: tuple) -> None:
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider

    hyps, refs = flickr
    result = cm.caption_scores(hyps, refs)
    assert result["tokenizer"].startswith("fallback") and "java" in result["tokenizer"]
    assert result["scores"]["METEOR"]["available"] is False and "java" in result["scores"]["METEOR"]["reason"]
    res = {i: [h] for i, h in enumerate(cm.fallback_tokenize(hyps))}
    gts = {i: cm.fallback_tokenize(r) for i, r in enumerate(refs)}
    scores = {name: entry.get("score") for name, entry in result["scores"].items()}
    assert scores["BLEU-4"] == pytest.approx(100 * Bleu(4).compute_score(gts, res, 0)[0][3])
    assert scores["CIDEr"] == pytest.approx(100 * Cider().compute_score(gts, res)[0])
    assert "tok:fallback" in result["scores"]["ROUGE-L"]["signature"]
    assert meteor_score(["a b"], [["a b"]])["available"] is False
    tokens = cm.fallback_tokenize(["A dog's tri-colored coat, RUNNING!"])
    assert tokens == ["a dog s tri-colored coat running"]


def test_images_with_fewer_references_are_scored_on_the_ones_they_have(no_java: None, flickr: tuple) -> None:
    """Reference streams where some images have fewer captions (blank lines in the later streams): the caption
    metrics score each image against its own captions only, as COCOEvalCap does, and the sacreBLEU metrics read
    those blanks as missing references too (an empty reference would lift BLEU's brevity penalty)."""
    hyps, refs = flickr
    ragged = [image[: 2 + i % 3] for i, image in enumerate(refs)]  # 2, 3 or 4 captions an image
    streams = [[image[k] if k < len(image) else "" for image in ragged] for k in range(4)]
    hyps = [" ".join(hyp.split()[:4]) for hyp in hyps]  # short captions: an empty reference would be the closest
    scores = score_all(hyps, streams, ["bleu", "caption"])
    assert scores["caption"] == cm.caption_scores(hyps, ragged)
    absent = [[image[k] if k < len(image) else None for image in ragged] for k in range(4)]
    assert scores["bleu"]["score"] == pytest.approx(sacrebleu.corpus_bleu(hyps, absent).score, abs=1e-9)
    assert scores["bleu"]["signature"].startswith("nrefs:var|")


@pytest.mark.parametrize(
    ("lang", "options", "modules"),
    [("en", "-l en -norm", "exact stem synonym paraphrase"), ("cs", "-l cz -norm -m exact", "exact"),
     ("de", "-l de -norm -m exact+stem", "exact stem"), ("ru", "-l ru -norm -m exact+stem", "exact stem"),
     ("it", "-l it -lower", "exact stem"), ("ja", "-l other -lower", "exact")],
)  # fmt: skip
def test_meteor_variant_per_language(lang: str, options: str, modules: str) -> None:
    """What the shipped jar supports: paraphrases for English only, no Czech stemmer, -norm for six."""
    variant = meteor_variant(lang)
    assert [option.replace(" ", "+") for option in variant.options()] == options.split()
    assert variant.modules == tuple(modules.split())
    assert f"modules:{modules.replace(' ', '+')}" in variant.signature()


def test_meteor_translation_equals_jar_file_mode(tmp_path: Path) -> None:
    if shutil.which("java") is None or not (TOK / "val.lc.norm.tok.de").is_file():
        pytest.skip("java or Multi30K not available")
    refs = (TOK / "val.lc.norm.tok.de").read_text(encoding="utf-8").splitlines()[:30]
    hyps = [perturb(r, i) for i, r in enumerate(refs)]
    second = [perturb(r, i + 1) for i, r in enumerate(refs)]
    (tmp_path / "hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (tmp_path / "ref").write_text("".join(f"{a}\n{b}\n" for a, b in zip(refs, second)), encoding="utf-8")
    command = ["java", "-Xmx2G", "-jar", str(METEOR_JAR), "hyp", "ref", "-r", "2", "-q"]
    done = subprocess.run(
        [*command, *meteor_variant("de").options()], cwd=tmp_path, capture_output=True, check=True
    )
    ours = meteor_score(hyps, [refs, second], "de")
    assert ours["score"] == pytest.approx(100 * float(done.stdout.strip()), abs=1e-9)
    assert ours["signature"] == "METEOR 1.5|lang:de|modules:exact+stem|params:rank|tok:meteor-norm"
    li = meteor_score(["ciao mondo bello", "x"], [["ciao mondo bello", "y"]], "it")
    assert li["available"] and 0 < li["score"] < 100 and "tok:13a+lower" in li["signature"]



def test_a_meteor_session_scores_each_system_as_a_jar_of_its_own_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """A report scores thirty systems in one warm jar per language: every system still gets the score a fresh
    jar gives it, whatever was scored before it."""
    if shutil.which("java") is None or not (TOK / "val.lc.norm.tok.de").is_file():
        pytest.skip("java or Multi30K not available")
    refs = [[r] for r in (TOK / "val.lc.norm.tok.de").read_text(encoding="utf-8").splitlines()[:40]]
    systems = [[perturb(r[0], i + shift) for i, r in enumerate(refs)] for shift in (0, 1, 3)]
    alone = [meteor.run_meteor(hyps, refs, meteor_variant("de")) for hyps in systems]
    assert len({score for score, _ in alone}) == 3  # the systems differ, so a mixed-up score would show
    started, jar = [], meteor._MeteorProcess
    monkeypatch.setattr(meteor, "_MeteorProcess", lambda *args: started.append(args) or jar(*args))
    with meteor.MeteorSession() as session:
        together = [session.score(hyps, refs, meteor_variant("de")) for hyps in (*systems[::-1], systems[0])]
        italian = session.score(["ciao mondo bello"], [["ciao mondo"]], meteor_variant("it"))
    assert together == [*alone[::-1], alone[0]] and len(started) == 2  # one jar for German, one for Italian
    assert italian == meteor.run_meteor(["ciao mondo bello"], [["ciao mondo"]], meteor_variant("it"))



# -- vocabulary usage, rare share, word F1 (worked out by hand in the comments) ----------------------------

HYPS, REFS = ["the cat sat", "the the dog"], ["the cat sat down", "a dog"]
SPECIAL = ["<unk>", "<pad>", "<s>", "</s>"]
VOCAB = Vocabulary([*SPECIAL, "a", "the", "dog", "cat", "sat"], [0, 0, 0, 0, 2000, 1000, 50, 5, 1])


def test_vocabulary_usage_rare_share_and_word_f1() -> None:
    report = vocab_report(HYPS, [REFS], train_counts(VOCAB), edges=(1, 5, 100))
    assert (report["score"], report["tokens"]) == (4, 6)  # the cat sat dog; 6 tokens
    # bins <1, [1,5), [5,100), >=100: sat(1) | cat(5) dog(50) | the the the
    assert [(r["bin"], r["tokens"], r["types"]) for r in report["rare"]] == [
        ("<1", 0, 0), ("[1,5)", 1, 1), ("[5,100)", 2, 2), (">=100", 3, 1)]  # fmt: skip
    assert [r["share"] for r in report["rare"]] == pytest.approx([0, 1 / 6, 2 / 6, 3 / 6])
    # matches: sat | cat, dog | one "the"; ref "down" (count 0) unmatched; >=100: out the×3, ref the + a
    rows = [(r["matches"], r["ref"], r["out"]) for r in report["word_f1"]]
    assert rows == [(0, 1, 0), (1, 1, 1), (2, 2, 2), (1, 2, 3)]
    last = report["word_f1"][-1]
    assert (last["precision"], last["recall"], last["f1"]) == pytest.approx((1 / 3, 1 / 2, 0.4))
    assert report["word_f1"][0]["f1"] == 0.0  # no match: 0, as compare-mt


def test_bins_labels_and_case() -> None:
    assert " ".join(bin_labels(DEFAULT_EDGES)) == "<1 1 2 3 4 [5,10) [10,100) [100,1000) >=1000"
    assert parse_edges("1,2,5,10,100,1000") == (1, 2, 5, 10, 100, 1000)
    for bad in ("1,1", "0,2", "a", ""):
        with pytest.raises(ConfigError):
            parse_edges(bad)
    cased = Vocabulary([*SPECIAL, "the", "The"], [0, 0, 0, 0, 4, 3])
    assert train_counts(cased, lowercase=True) == {"the": 7}
    assert vocab_report(["The THE the"], lowercase=True)["score"] == 1
    # lowercased scoring adds up the training counts of a word's case variants: 4 + 3 reach the bin >= 5
    merged = vocab_report(["the"], [["The"]], {"the": 4, "The": 3}, edges=(5,), lowercase=True)
    assert [r["tokens"] for r in merged["rare"]] == [0, 1]


# -- significance ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def systems() -> tuple[list[str], list[str], list[str]]:
    """(ref, worse system A, better system B) on 60 Multi30K validation sentences."""
    if not (TOK / "val.lc.norm.tok.en").is_file():
        pytest.skip("Multi30K not available")
    ref = (TOK / "val.lc.norm.tok.en").read_text(encoding="utf-8").splitlines()[:60]
    worse = [" ".join(perturb(perturb(r, i), i + 1).split()[:-2]) for i, r in enumerate(ref)]
    return ref, worse, [perturb(r, i) for i, r in enumerate(ref)]


def test_bootstrap_identical_and_better(systems: tuple) -> None:
    ref, worse, better = systems
    same = paired_bootstrap(worse, worse, [ref], samples=200)
    assert (same.delta, same.p_value, same.ci_low, same.ci_high) == (0.0, 1.0, 0.0, 0.0)
    result = paired_bootstrap(worse, better, [ref], samples=300)
    true_delta = sacrebleu.corpus_bleu(better, [ref]).score - sacrebleu.corpus_bleu(worse, [ref]).score
    assert result.score_a == pytest.approx(sacrebleu.corpus_bleu(worse, [ref]).score, abs=1e-9)
    assert result.delta == pytest.approx(true_delta) and true_delta > 0
    assert result.p_value < 0.05 and 0 < result.ci_low <= true_delta <= result.ci_high
    assert paired_bootstrap(better, worse, [ref], samples=300).p_value > 0.95
    assert paired_bootstrap(worse, better, [ref], samples=300) == result  # same seed, same answer
    assert paired_bootstrap(worse, better, [ref], samples=300, seed=1) != result


@pytest.mark.parametrize("metric", ["chrf", "ter"])
def test_bootstrap_other_metrics_and_direction(systems: tuple, metric: str) -> None:
    ref, worse, better = systems
    result = paired_bootstrap(worse, better, [ref], metric=metric, samples=200)
    expected = corpus_scores(worse, [ref], metrics=[metric])[metric]["score"]
    assert result.score_a == pytest.approx(expected, abs=1e-9)
    assert result.p_value < 0.05 and result.higher_is_better == (metric == "chrf")
    assert (result.delta < 0) == (metric == "ter")  # lower TER is better


def test_a_baselines_statistics_are_extracted_once_for_every_comparison(
        systems: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report scores each row and bootstraps many rows against one baseline: each system's n-grams are counted
    once (then kept, read-only), and the kept statistics give the same answers as fresh ones."""
    from sacrebleu.metrics.bleu import BLEU

    from nlgkit.evaluate.significance import sentence_statistics
    from nlgkit.metrics.corpus import segment_statistics

    ref, worse, better = systems
    sentence_statistics.cache_clear()
    segment_statistics.cache_clear()
    fresh = [paired_bootstrap(worse, system, [ref], samples=100) for system in (better, ref)]
    fresh_scores = [corpus_scores(system, [ref]) for system in systems]
    extracted: list[int] = []
    original = BLEU._extract_corpus_statistics

    def counting(self, hyps, refs):  # type: ignore[no-untyped-def]
        extracted.append(len(hyps))
        return original(self, hyps, refs)

    monkeypatch.setattr(BLEU, "_extract_corpus_statistics", counting)
    sentence_statistics.cache_clear()
    segment_statistics.cache_clear()
    kept = [paired_bootstrap(worse, system, [ref], samples=100) for system in (better, ref, better)]
    assert kept == [*fresh, fresh[0]]
    assert len(extracted) == 3  # three systems, once each (the check against corpus_score's sum reads them too)
    assert [corpus_scores(system, [ref], metrics=("bleu",))["bleu"] for system in systems] == \
        [scores["bleu"] for scores in fresh_scores]  # a report's scores of the same systems: nothing counted again
    assert len(extracted) == 3
    paired_bootstrap(worse, better, [ref], samples=100, lowercase=True)  # another metric setting: counted anew
    assert len(extracted) == 5
    stats = sentence_statistics("bleu", False, tuple(worse), (tuple(ref),))
    with pytest.raises(ValueError, match="read-only"):
        stats[0, 0] = 0.0


def test_mean_sd_and_bootstrap_errors() -> None:
    mean, sd = mean_sd([1.0, 2.0, 3.0, 4.0])
    assert (mean, sd) == pytest.approx((2.5, math.sqrt(5 / 3)))  # sum of squares 5, ddof = 1
    assert mean_sd([7.0])[0] == 7.0 and math.isnan(mean_sd([7.0])[1])
    with pytest.raises(ConfigError, match="meteor"):
        paired_bootstrap(["a"], ["a"], [["a"]], metric="meteor")


# -- CLI ---------------------------------------------------------------------------------------------------


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def test_cli_caption_vu_and_compare(tmp_path: Path, no_java: None, flickr: tuple, systems: tuple) -> None:
    hyps, refs = flickr
    streams = [write(tmp_path / f"ref{k}", [r[k] for r in refs]) for k in range(4)]
    args = ["--hyp", write(tmp_path / "hyp", hyps), *[arg for s in streams for arg in ("--ref", s)], "--json"]
    result = runner.invoke(app, [*args, "--metrics", "bleu,caption,meteor"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert list(out) == ["bleu", "caption", "meteor"] and out["meteor"]["available"] is False
    assert out["caption"] == json.loads(json.dumps(cm.caption_scores(hyps, refs)))
    assert out["bleu"] == corpus_scores(hyps, [[r[k] for r in refs] for k in range(4)])["bleu"]

    vocab = tmp_path / "vocab.en.txt"
    VOCAB.save(vocab)
    hyp, ref = write(tmp_path / "h", HYPS), write(tmp_path / "r", REFS)
    base = ["--hyp", hyp, "--ref", ref, "--train-vocab", str(vocab), "--bins", "1,5,100"]
    out = json.loads(runner.invoke(app, [*base, "--metrics", "bleu", "--json"]).stdout)
    assert out["vu"] == vocab_report(HYPS, [REFS], train_counts(VOCAB), (1, 5, 100))
    # a record's word counts (data/train.words.LANG) bin the same words the same way
    words = tmp_path / "train.words.en"
    write_word_counts(words, Counter(train_counts(VOCAB)))
    by_words = ["--hyp", hyp, "--ref", ref, "--train-words", str(words), "--bins", "1,5,100", "--json"]
    assert json.loads(runner.invoke(app, [*by_words, "--metrics", "bleu"]).stdout)["vu"] == out["vu"]

    ref_s, worse, better = systems
    files = [write(tmp_path / name, lines) for name, lines in (("a", worse), ("b", better), ("ref", ref_s))]
    args = ["--hyp", files[0], "--ref", files[2], "--compare", files[1], "--samples", "100", "--seed", "3"]
    out = json.loads(runner.invoke(app, [*args, "--metrics", "bleu,ter", "--json"]).stdout)
    assert out["paired_bootstrap"]["ter"]["p_value"] < 0.05
    assert out["paired_bootstrap"]["bleu"] == asdict(paired_bootstrap(worse, better, [ref_s], "bleu", 100, 3))
    table = runner.invoke(app, [*args, "--train-vocab", str(vocab), "--metrics", "bleu,caption,vu"])
    assert table.exit_code == 0 and "paired bootstrap" in table.stdout
    assert all(word in table.stdout for word in ("caption SPICE", "n/a", "fallback", "[100,1000)", ">=1000"))


@pytest.mark.parametrize(
    "case", ["length", "empty hyp", "empty ref", "latin1", "compare length", "compare latin1", "bad vocab",
             "bad bins", "bins alone", "vocab and words", "bad words", "unknown metric", "no corpus metric"],
)  # fmt: skip
def test_cli_bad_input_is_one_line(case: str, tmp_path: Path) -> None:
    hyp, ref = write(tmp_path / "hyp.txt", HYPS), write(tmp_path / "ref.txt", REFS)
    short, empty, latin1 = (
        write(tmp_path / "short.txt", ["x"]),
        write(tmp_path / "empty.txt", []),
        tmp_path / "l1",
    )
    latin1.write_bytes(b"ok\ncaf\xe9\n")
    vocab = write(tmp_path / "vocab.txt", [f"{token}\t0" for token in SPECIAL] + ["dog\tmany"])
    good = write(tmp_path / "vocab.en.txt", [f"{token}\t0" for token in SPECIAL])
    args, named = {
        "length": (["--hyp", hyp, "--ref", short], short),
        "empty hyp": (["--hyp", empty, "--ref", ref], empty),
        "empty ref": (["--hyp", hyp, "--ref", empty], empty),
        "latin1": (["--hyp", hyp, "--ref", str(latin1)], f"{latin1}: line 2"),
        "compare length": (["--hyp", hyp, "--ref", ref, "--compare", short], short),
        "compare latin1": (["--hyp", hyp, "--ref", ref, "--compare", str(latin1)], f"{latin1}: line 2"),
        "bad vocab": (["--hyp", hyp, "--ref", ref, "--train-vocab", vocab], f"{vocab}: line 5"),
        "bad bins": (["--hyp", hyp, "--ref", ref, "--train-vocab", good, "--bins", "5,2"], "5, 2"),
        "bins alone": (["--hyp", hyp, "--ref", ref, "--bins", "1,2"], "--train-vocab"),
        "vocab and words": (["--hyp", hyp, "--ref", ref, "--train-vocab", good, "--train-words", good],
                            "--train-words"),
        "bad words": (["--hyp", hyp, "--ref", ref, "--train-words", vocab], f"{vocab}, line 5"),
        "unknown metric": (["--hyp", hyp, "--ref", ref, "--metrics", "bleu,rouge"], "rouge"),
        "no corpus metric": (["--hyp", hyp, "--ref", ref, "--compare", ref, "--metrics", "vu"], "bleu"),
    }[case]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code != 0 and result.stdout == ""
    message = result.stderr.strip()
    assert "\n" not in message and message.startswith("error: ") and named in message, message


def test_caption_scores_are_kept_for_inputs_scored_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table scored again in one process (a report, then its record) runs PTB and METEOR once; other captions,
    references or options are scored anew, and each caller gets its own copy."""
    from collections import OrderedDict

    from nlgkit.metrics import captions

    calls: list[list[str]] = []

    def score(hyps: list[str], *_: object) -> dict:
        calls.append(list(hyps))
        return {"scores": {"x": [len(calls)]}}

    monkeypatch.setattr(captions, "_caption_scores", score)
    monkeypatch.setattr(captions, "_RECENT", OrderedDict())
    first = captions.caption_scores(["a dog"], [["a dog", "dog"]])
    first["scores"]["x"].append(9)  # a caller's change stays its own
    assert captions.caption_scores(["a dog"], [["a dog", "dog"]]) == {"scores": {"x": [1]}} and len(calls) == 1
    captions.caption_scores(["a cat"], [["a dog", "dog"]])
    captions.caption_scores(["a dog"], [["a dog"]])
    captions.caption_scores(["a dog"], [["a dog", "dog"]], meteor=False)
    assert len(calls) == 4
