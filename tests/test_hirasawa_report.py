"""Hirasawa & Komachi's report: word F-score by training frequency worked out by hand, which row a saved config
lands in, rows no run fills, the paper's cells against the differences its text states, and two tiny real
translation runs whose records rebuild the report byte for byte."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import pytest
from helpers import nlgkit_command, reproduce, tiny_recipe

from nlgkit.core.errors import DataError
from nlgkit.data.prepare import prepare_parallel
from nlgkit.evaluate.analysis.word_fscore import (
    BUCKETS,
    BucketScore,
    fscore_figure,
    fscore_table,
    mean_fscores,
    pooled_fscore,
    rare_bootstrap,
    word_fscore_by_frequency,
    word_matches,
)
from nlgkit.experiments.hirasawa import CAPPED, hirasawa_report
from nlgkit.experiments.hirasawa_runs import (
    HirasawaRun,
    Row,
    TableUse,
    load_run,
    parse_label,
    placement,
    planned_models,
)
from nlgkit.experiments.papers import load_table


def bucket(scores: list[BucketScore], name: str) -> BucketScore:
    return scores[BUCKETS.index(name)]


def test_word_fscore_by_frequency_by_hand() -> None:
    counts = {"the": 1000, "dog": 3, "cat": 7, "runs": 1}  # "a": never seen in training
    hyps = ["the dog the dog", "a cat runs"]
    refs = ["the dog runs", "the cat cat"]
    scores = word_fscore_by_frequency(hyps, refs, counts)
    assert [s.bucket for s in scores] == ["0", "1", "2", "3", "4", "5–9", "10–99", "100–999", "≥1000"]
    # sentence 1: "the" twice against once and "dog" twice against once match once each (clipped); "runs" misses
    # sentence 2: "cat" once against twice matches once; "the" is missing from the output; "a" and "runs" miss
    the = bucket(scores, "≥1000")
    assert (the.matches, the.hyp_tokens, the.ref_tokens) == (1, 2, 2) and the.fscore == pytest.approx(0.5)
    dog = bucket(scores, "3")  # P = 1/2, R = 1/1
    assert (dog.matches, dog.hyp_tokens, dog.ref_tokens) == (1, 2, 1) and dog.fscore == pytest.approx(2 / 3)
    cat = bucket(scores, "5–9")  # P = 1/1, R = 1/2
    assert (cat.precision, cat.recall, cat.fscore) == (1.0, 0.5, pytest.approx(2 / 3))
    runs = bucket(scores, "1")
    assert (runs.matches, runs.hyp_tokens, runs.ref_tokens, runs.fscore) == (0, 1, 1, 0.0)
    unseen = bucket(scores, "0")
    assert (unseen.hyp_tokens, unseen.ref_tokens, unseen.fscore) == (1, 0, 0.0)
    assert sum(s.ref_tokens for s in scores) == 6 and sum(s.hyp_tokens for s in scores) == 7


@pytest.mark.parametrize(("count", "name"), [(0, "0"), (1, "1"), (4, "4"), (5, "5–9"), (9, "5–9"), (10, "10–99"),
                                             (99, "10–99"), (100, "100–999"), (999, "100–999"), (1000, "≥1000")])
def test_word_fscore_bucket_edges(count: int, name: str) -> None:
    scores = word_fscore_by_frequency(["w"], ["w"], {"w": count} if count else {})
    assert [s.bucket for s in scores if s.ref_tokens] == [name] and bucket(scores, name).fscore == 1.0


def test_word_fscore_table_and_figure() -> None:
    seeds = [word_fscore_by_frequency(["a b"], ["a c"], {"a": 2, "b": 2, "c": 2}),
             word_fscore_by_frequency(["a c"], ["a c"], {"a": 2, "b": 2, "c": 2})]
    means = mean_fscores(seeds)
    assert means[BUCKETS.index("2")] == pytest.approx((0.5 + 1.0) / 2)
    lines = fscore_table([s.ref_tokens for s in seeds[0]], {"random": means, "GloVe": means})
    assert lines[0] == "| training frequency | reference tokens | F: random | F: GloVe |"
    assert "| 2 | 2 | 0.750 | 0.750 |" in lines
    figure = fscore_figure({"EN→DE": {"random": means, "GloVe": means}, "EN→FR": {"random": means}})
    assert [len(axes.get_lines()) for axes in figure.axes] == [2, 1]


def test_rare_words_pooled_by_hand() -> None:
    """Words seen 1–4 times taken as one bucket: matches and occurrences summed, not the buckets' F-scores averaged.
    Here "a" (seen twice) matches; "d" (once) matches; "e" (once) is missed: P = 2/2, R = 2/3, F = 0.8, where the
    mean of the two buckets' F-scores (1 and 2/3) would be 0.833."""
    scores = word_fscore_by_frequency(["a d"], ["a d e"], {"a": 2, "d": 1, "e": 1, "z": 50})
    assert bucket(scores, "2").fscore == 1.0 and bucket(scores, "1").fscore == pytest.approx(2 / 3)
    assert pooled_fscore(scores) == pytest.approx(0.8)
    assert pooled_fscore(word_fscore_by_frequency(["z"], ["z"], {"z": 50})) == 0.0  # no rare word: nothing matched
    lines = fscore_table([s.ref_tokens for s in scores], {"random": mean_fscores([scores])},
                         {"random": pooled_fscore(scores)})
    assert lines[-1] == "| 1–4 (pooled) | 3 | 0.800 |"


def test_rare_word_bootstrap_resamples_sentences() -> None:
    """Twenty test sentences, each with one rare reference word "r" (seen once in training). System B translates it
    in all twenty, A in none: B wins on every resample. C translates it in sentence 0 alone: a resample without
    sentence 0, which happens with probability (19/20)^20 = 0.358, shows no gain, so p is about 0.36. Seeds are
    averaged: A's two seeds (F 0 and 1) score 0.5."""
    counts = {"r": 1, "the": 5000}
    refs = ["the r"] * 20
    none, every = word_matches(["the x"] * 20, refs, counts), word_matches(refs, refs, counts)
    first = word_matches(["the r", *["the x"] * 19], refs, counts)
    assert none.shape == (20, len(BUCKETS), 3) and first[0, BUCKETS.index("1")].tolist() == [1, 1, 1]
    assert first[1, BUCKETS.index("1")].tolist() == [0, 0, 1] and first[1, BUCKETS.index("0")].tolist() == [0, 1, 0]
    assert first[:, BUCKETS.index("≥1000")].sum(axis=0).tolist() == [20, 20, 20]

    sure = rare_bootstrap([none], [every], samples=300)
    assert (sure.score_a, sure.score_b, sure.delta, sure.p_value) == (0.0, 1.0, 1.0, 0.0)
    assert (sure.ci_low, sure.ci_high) == (1.0, 1.0)
    assert rare_bootstrap([every], [every], samples=50).p_value == 1.0  # a system is never better than itself
    lucky = rare_bootstrap([none], [first], samples=2000)
    assert lucky.score_b == pytest.approx(2 * (1 / 1) * (1 / 20) / (1 + 1 / 20))  # P = 1, R = 1/20
    assert 0.32 < lucky.p_value < 0.40 and lucky.ci_low == 0.0 and lucky.ci_high > 0
    seeds = rare_bootstrap([none, every], [every], samples=50)
    assert (seeds.score_a, seeds.delta) == (0.5, 0.5)
    with pytest.raises(DataError, match="segments"):
        rare_bootstrap([none], [word_matches(refs[:5], refs[:5], counts)])


def test_placement_from_saved_configs() -> None:
    base = {"model": {"type": "vag_nmt"}, "data": {"src_lang": "en", "tgt_lang": "fr"}, "train": {"seed": 3}}
    place = placement(base, {"covered_only": True})  # no [embeddings]: random initialisation
    assert place.row == Row("covered", "vag_nmt", "random", "none") and place.pair == "en-fr" and place.seed == 3
    place = placement({**base, "embeddings": {"label": "glove+abtt", "source": "x.en.vec"}}, {"covered_only": False})
    assert place.row == Row("all", "vag_nmt", "glove", "abtt")
    place = placement({**base, "embeddings": {"label": "", "source": "", "target": ""}}, {})
    assert place.row.embeddings == "random"
    place = placement({**base, "embeddings": {"label": "GloVe6B+LC"}}, {"subword": "bpe-joint:10000"})
    assert place.row == Row("all", "vag_nmt", "glove6b", "lc", "bpe-joint:10000")
    assert parse_label("word2vec") == ("word2vec", "none") and parse_label("") == ("random", "none")
    nmtpytorch = {"train": {"weight_init": "kaiming_normal"}, "embeddings": {"normalize": True, "match_scale": True}}
    place = placement({**base, **nmtpytorch}, {})  # no table: the row-scaling keys change nothing
    assert place.row == Row("all", "vag_nmt", "random", "none", "none", "kaiming_normal", "default")
    place = placement({**base, "embeddings": {"label": "glove+abtt", "source": "x", "match_scale": True}}, {})
    assert place.row == Row("all", "vag_nmt", "glove", "abtt", "none", "default", "table rows at the model's scale")
    place = placement({**base, **nmtpytorch, "embeddings": {"target": "glove.vec", "normalize": True}}, {})
    assert place.row == Row("all", "vag_nmt", "glove", "none", "none", "kaiming_normal", "unit table rows")


def test_the_recipes_plan_the_models_of_each_subset(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('[model]\ntype = "imagination"\n')
    (tmp_path / "b.toml").write_text('[model]\ntype = "vag_nmt"\n[data.prepare]\ncovered_only = true\n')
    (tmp_path / "c.toml").write_text('[model]\ntype = "rnn"\n[data.prepare]\ncovered_only = true\n')
    assert planned_models(tmp_path) == {"all": ["imagination"], "covered": ["rnn", "vag_nmt"]}
    assert planned_models(tmp_path / "none")["all"] == ["rnn", "doubly_attentive", "imagination", "vag_nmt"]


def table_rows(text: str, title: str) -> list[list[str]]:
    """The body rows of the table under the heading that starts with ``title``."""
    lines = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0].splitlines()
    headers = {i - 1 for i, line in enumerate(lines) if line.startswith("|---")}
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for i, line in enumerate(lines)
            if line.startswith("| ") and i not in headers]


def test_rows_without_runs_say_not_run_beside_the_papers_cells() -> None:
    text = hirasawa_report([], planned={"all": ["rnn"], "covered": ["vag_nmt"]})
    every = table_rows(text, "Tables 3–4: all")
    covered = table_rows(text, "Tables 3–4: image-covered")
    assert len(every) == len(covered) == 13  # random + 4 tables × 3 debiasings
    assert {row[0] for row in every} == {"text-only NMT (`rnn`)"} and {row[0] for row in covered} == {
        "VAG-NMT (`vag_nmt`)"}
    for row in every + covered:
        assert row[3] == row[8] == "0" and row[4] == row[6] == row[9] == row[11] == "not run"
    assert every[0][:3] == ["text-only NMT (`rnn`)", "random", "–"]
    assert (every[0][5], every[0][7], every[0][10], every[0][12]) == ("34.57", "54.50", "57.15", "72.47")
    abtt = next(row for row in covered if row[1] == "GloVe" and row[2] == "All-but-the-Top")
    assert (abtt[5], abtt[7], abtt[10], abtt[12]) == ("36.36", "55.17", "57.94", "73.40")
    glove6b = [row for row in every if row[1].startswith("GloVe 6B")]
    assert len(glove6b) == 3 and all(row[5] == "–" for row in glove6b)  # not in the paper
    assert "Their Table 6" in text and "35.46 BLEU / 55.30 METEOR" in text
    assert hirasawa_report([], planned={"all": ["rnn"], "covered": ["vag_nmt"]}) == text


def test_the_papers_cells_agree_with_the_differences_its_text_states() -> None:
    table = load_table("hirasawa")
    assert len(table.rows) == 2 * (4 + 4 * 3 * 3) + 2

    def cell(pair: str, model: str, embeddings: str, debiasing: str, metric: str) -> float:
        value = table.find(pair=pair, model=model, embeddings=embeddings, debiasing=debiasing,
                           subword="none").values[metric]
        assert value is not None
        return value

    def gain(pair: str, model: str, embeddings: str, debiasing: str, metric: str) -> float:
        return round(cell(pair, model, embeddings, debiasing, metric) - cell(pair, model, "random", "none", metric), 2)

    # §5.4: IMAGINATION EN→DE with GloVe, and with GloVe + All-but-the-Top
    assert (gain("en-de", "imagination", "glove", "none", "bleu"), gain("en-de", "imagination", "glove", "none",
                                                                        "meteor")) == (0.77, 0.79)
    assert (gain("en-de", "imagination", "glove", "abtt", "bleu"), gain("en-de", "imagination", "glove", "abtt",
                                                                        "meteor")) == (1.62, 1.14)
    # §5.4: EN→FR GloVe + All-but-the-Top over random, per model
    stated = {"rnn": (1.09, 0.93), "doubly_attentive": (1.27, 0.85), "imagination": (0.72, 0.69),
              "vag_nmt": (0.16, 0.19)}
    for model, (bleu, meteor) in stated.items():
        assert (gain("en-fr", model, "glove", "abtt", "bleu"), gain("en-fr", model, "glove", "abtt", "meteor")) == (
            bleu, meteor)
    # the abstract: EN→FR up to +1.40 BLEU and +1.13 METEOR
    assert (gain("en-fr", "doubly_attentive", "glove", "none", "bleu"),
            gain("en-fr", "doubly_attentive", "glove", "none", "meteor")) == (1.40, 1.13)
    # §6: the best GloVe row of each model over its random row, averaged over the four models
    for pair, average in (("en-de", 1.28), ("en-fr", 0.97)):
        best = [max(gain(pair, model, "glove", d, "bleu") for d in ("none", "lc", "abtt")) for model in stated]
        assert round(sum(best) / len(best), 2) == average


# -- two tiny real translation runs, their records and the report rebuilt from them -------------------------

RNN = """type = "rnn"
embedding_dim = 24
encoder_dim = 32
decoder_dim = 32
attention_dim = 24
pre_output_dim = 32"""


def sliced_en_de(source: Path, tmp: Path) -> Path:
    """Multi30K EN→DE prepared from its first 300 / 30 / 30 lines (min_freq 1, as the recipes)."""
    sizes = {"train": ("train", 300), "val": ("valid", 30), "test_2016_flickr": ("test", 30)}
    for name, (split, lines) in sizes.items():
        for lang in ("en", "de"):
            with gzip.open(source / "task1" / "raw" / f"{name}.{lang}.gz", "rt", encoding="utf-8") as handle:
                text = handle.read().splitlines()[:lines]
            (tmp / f"{split}.{lang}").write_text("".join(f"{line}\n" for line in text), encoding="utf-8")
    out = tmp / "data"
    prepare_parallel(out, str(tmp / "train"), str(tmp / "valid"), str(tmp / "test"), "en", "de", min_freq=1)
    return out


@pytest.fixture(scope="module")
def hirasawa_runs(multi30k_source: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("hirasawa")
    data = sliced_en_de(multi30k_source, tmp)
    runs = []
    for name, label in (("text_random_seed2", ""), ("text_glove_seed2", "glove")):
        path = tiny_recipe(tmp, data, tmp / "runs" / name, dropout=0.0, model=RNN, head='type = "learned"', beam=3,
                           valid_limit=30, lr=0.005, batch_size=50, schedule="none", max_updates=12, log_every=6,
                           seed=2, device="cpu")
        text = path.read_text().replace("[data]\n", '[data]\nsrc_lang = "en"\ntgt_lang = "de"\n', 1)
        path.write_text(text + (f'\n[embeddings]\nlabel = "{label}"\n' if label else ""))
        nlgkit_command(["train", str(path)])
        runs.append(tmp / "runs" / name)
    return runs


def test_real_records_land_in_their_rows_and_rebuild_the_report(hirasawa_runs: list[Path], tmp_path: Path) -> None:
    from_runs = tmp_path / "from_runs" / "hirasawa.md"
    from_runs.parent.mkdir()
    reproduce(["hirasawa", *map(str, hirasawa_runs), "--records", str(tmp_path / "none"),
               "--output", str(from_runs)])  # keeps each run's test outputs, which a record needs
    records = tmp_path / "records"
    reproduce(["archive", *map(str, hirasawa_runs), "--into", str(records)])

    built = []
    for attempt in ("first", "second"):
        out = tmp_path / attempt / "hirasawa.md"
        out.parent.mkdir()
        reproduce(["hirasawa", str(tmp_path / "gone" / "text_random_seed2"), str(tmp_path / "never_trained"),
                   "--records", str(records), "--output", str(out)])
        built.append(out)
    text = built[0].read_text()
    assert text == built[1].read_text()  # byte for byte from the same records
    assert (built[0].with_name("hirasawa_fscore.png").read_bytes()
            == built[1].with_name("hirasawa_fscore.png").read_bytes())
    assert text == from_runs.read_text() + "\nNot trained yet: `never_trained`.\n"

    rows = {(row[0], row[1], row[2]): row for row in table_rows(text, "Tables 3–4: all")}
    random, glove = rows[("text-only NMT (`rnn`)", "random", "–")], rows[("text-only NMT (`rnn`)", "GloVe", "none")]
    for row in (random, glove):  # one seed, stopped by max_updates (marked): BLEU and METEOR alone
        assert row[3] == "1 †" and float(row[4]) >= 0 and float(row[6]) > 0
        assert row[8] == "0" and row[9] == "not run"  # no EN→FR run
    assert rows[("text-only NMT (`rnn`)", "GloVe", "All-but-the-Top")][3] == "0"
    assert all(row[3] == "0" for key, row in rows.items() if key not in {(random[0], random[1], random[2]),
                                                                       (glove[0], glove[1], glove[2])})
    versus = table_rows(text, "Against random initialisation")
    assert len(versus) == 1 and versus[0][:3] == ["text-only NMT (`rnn`)", "GloVe", "none"]
    assert versus[0][3].startswith(f"seed 2 {CAPPED}: ") and "p " in versus[0][3] and versus[0][4] == "not run"
    fscore = table_rows(text, "Word F-score by training frequency")
    assert [row[0] for row in fscore] == [*BUCKETS, "1–4 (pooled)"]
    assert "| training frequency | reference tokens | F: random (n = 1 †) | F: GloVe (n = 1 †) |" in text
    assert "Columns marked" not in text  # every column capped alike: no mixed-budget warning
    assert "1–4 (pooled) against random, paired bootstrap over test sentences (1000 resamples;" in text
    assert ": GloVe " in text and "], p " in text.split("1–4 (pooled) against random")[1]
    assert "`text_glove_seed2`: rnn, en-de, glove, seed 2, all" in text


def as_finished_seed3(run: HirasawaRun, tmp_path: Path) -> HirasawaRun:
    """``run`` as seed 3 trained to the stopping rule (its directory copied under a name of its own)."""
    name = run.name.replace("seed2", "seed3")
    shutil.copytree(run.result.run_dir, tmp_path / name)
    progress = {**run.result.progress, "finished": True, "stop_reason": "no bleu improvement for 10 epochs"}
    return dataclasses.replace(run, result=dataclasses.replace(run.result, run_dir=tmp_path / name, progress=progress),
                               place=dataclasses.replace(run.place, seed=3))


def test_a_cell_with_finished_seeds_counts_those_alone(hirasawa_runs: list[Path], tmp_path: Path) -> None:
    """Runs stopped by a limit are interim: beside a seed trained to the stopping rule they would drag its mean, and
    a bootstrap of a finished run against a capped one compares training budgets, not embeddings."""
    random, glove = (load_run(path, "cpu") for path in hirasawa_runs)  # both stopped by train.max_updates
    finished, finished_glove = as_finished_seed3(random, tmp_path), as_finished_seed3(glove, tmp_path)
    text = hirasawa_report([random, glove, finished], planned={"all": ["rnn"], "covered": []}, samples=50)
    rows = {(row[1], row[2]): row for row in table_rows(text, "Tables 3–4: all")}
    assert rows[("random", "–")][3] == "1" and rows[("GloVe", "none")][3] == "1 †"
    assert rows[("random", "–")][4] == f"{finished.result.values['bleu']:.2f}"
    assert "Left out of the means and the figure because their cell has finished seeds, which a run stopped by a " \
           "limit is not comparable with (the bootstrap still compares each with the capped run of its seed): " \
           "`text_random_seed2`." in text
    versus = table_rows(text, "Against random initialisation")
    # the capped random seed 2, set aside from the mean, still pairs with the capped GloVe seed 2: equal budgets
    assert versus[0][3].startswith(f"seed 2 {CAPPED}: ") and "p " in versus[0][3]
    assert "F: random (n = 1) | F: GloVe (n = 1 †)" in text
    assert f"Columns marked {CAPPED} are interim" in text  # a finished column beside a capped one

    both = hirasawa_report([random, glove, finished, finished_glove], planned={"all": ["rnn"], "covered": []},
                           samples=50)
    versus = table_rows(both, "Against random initialisation")
    seed2, seed3 = versus[0][3].split("; ")
    assert seed2.startswith(f"seed 2 {CAPPED}: ") and seed3.startswith("seed 3: ") and "p " in seed3
    capped_random = dataclasses.replace(random, place=dataclasses.replace(random.place, seed=3))
    mixed = hirasawa_report([capped_random, finished_glove], planned={"all": ["rnn"], "covered": []}, samples=50)
    assert table_rows(mixed, "Against random initialisation")[0][3] == (
        "seed 3: not compared (one of the two finished, the other stopped by a limit)")


def test_one_cell_never_pools_runs_started_from_different_tables(hirasawa_runs: list[Path], tmp_path: Path) -> None:
    """A label names a row, not the vectors: two seeds of "glove" trained from tables that differ (other text, say)
    are two experiments, and the report says so instead of averaging them."""
    _, glove = (load_run(path, "cpu") for path in hirasawa_runs)
    assert glove.tables == {}  # trained without a table file: nothing recorded, nothing to compare
    seed3 = as_finished_seed3(glove, tmp_path)
    same = {"source": TableUse("a" * 64, 1234, 9797), "target": TableUse("b" * 64, 567, 18669)}
    one, two = dataclasses.replace(glove, tables=same), dataclasses.replace(seed3, tables=same)
    pooled = hirasawa_report([one, two], planned={"all": ["rnn"], "covered": []}, samples=20)
    assert ("`text_glove_seed3`: rnn, en-de, glove, seed 3, all, source table aaaaaaaa: 1,234 of 9,797 words, "
            "target table bbbbbbbb: 567 of 18,669 words") in pooled
    package = dataclasses.replace(seed3, tables={**same, "source": TableUse(None, 1234, 9797)})  # nothing to compare
    assert "source table (package): 1,234 of 9,797 words" in hirasawa_report(
        [one, package], planned={"all": ["rnn"], "covered": []}, samples=20)
    other = dataclasses.replace(seed3, tables={**same, "source": TableUse("c" * 64, 1234, 9797)})
    with pytest.raises(DataError, match=r"text_glove_seed2 and text_glove_seed3: one cell \(rnn, glove, none, en-de\) "
                                        r"but source embeddings from different tables"):
        hirasawa_report([one, other], planned={"all": ["rnn"], "covered": []}, samples=20)
    # The same vectors saved again with the header keys in the other order: file digest "c", content digest "d".
    # An older run recorded the file digest alone ("a"), a later one both ("a", content "d"): the later run links
    # them, so the three seeds are one table; a run of content "e" is not.
    linked = dataclasses.replace(seed3, tables={**same, "source": TableUse("a" * 64, 1234, 9797, "d" * 64)})
    seed4 = dataclasses.replace(seed3, place=dataclasses.replace(seed3.place, seed=4),
                                result=dataclasses.replace(seed3.result, name="text_glove_seed4", run_dir=Path(
                                    shutil.copytree(seed3.result.run_dir, tmp_path / "text_glove_seed4"))),
                                tables={**same, "source": TableUse("c" * 64, 1234, 9797, "d" * 64)})
    assert "seed 4" in hirasawa_report([one, linked, seed4], planned={"all": ["rnn"], "covered": []}, samples=20)
    # The link holds across cells: the run that recorded both digests may be another model's (the German GloVe +
    # ABTT table of the IMAGINATION seeds was linked by a text-only run); without it the two seeds are two tables.
    elsewhere = as_model(linked, "imagination")
    planned = {"all": ["rnn", "imagination"], "covered": []}
    assert "seed 4" in hirasawa_report([one, elsewhere, seed4], planned=planned, samples=20)
    with pytest.raises(DataError, match=r"text_glove_seed2 and text_glove_seed4: one cell"):
        hirasawa_report([one, seed4], planned=planned, samples=20)
    with pytest.raises(DataError, match=r"text_glove_seed2 and text_glove_seed4: one cell"):
        hirasawa_report([one, dataclasses.replace(seed4, tables={**same, "source": TableUse("c" * 64, 1234, 9797,
                                                                                            "e" * 64)})],
                        planned={"all": ["rnn"], "covered": []}, samples=20)


def test_a_report_without_a_figure_removes_a_stale_one(hirasawa_runs: list[Path], tmp_path: Path) -> None:
    random, glove = (load_run(path, "cpu") for path in hirasawa_runs)
    figure = tmp_path / "hirasawa_fscore.png"
    hirasawa_report([random, glove], planned={"all": ["rnn"], "covered": []}, figure=figure, samples=20)
    assert figure.read_bytes().startswith(b"\x89PNG")
    text = hirasawa_report([random], planned={"all": ["rnn"], "covered": []}, figure=figure, samples=20)
    assert "needs a random and a GloVe run" in text and not figure.exists()


def as_model(run: HirasawaRun, model: str) -> HirasawaRun:
    return dataclasses.replace(run, place=dataclasses.replace(
        run.place, row=dataclasses.replace(run.place.row, model=model)))


def test_every_model_with_random_and_glove_rows_gets_its_fscore_table_and_panel(
        hirasawa_runs: list[Path], tmp_path: Path) -> None:
    """The rare-word claim is read off each model the runs cover: text-only and IMAGINATION each get a table and a
    panel, in the paper's order (a multimodal model before text-only); a model with a random row alone gets none."""
    random, glove = (load_run(path, "cpu") for path in hirasawa_runs)
    runs = [random, glove, as_model(random, "imagination"), as_model(glove, "imagination"),
            as_model(random, "vag_nmt")]
    figure = tmp_path / "hirasawa_fscore.png"
    text = hirasawa_report(runs, planned={"all": ["rnn", "imagination", "vag_nmt"], "covered": []}, figure=figure,
                           samples=20)
    titles = [line for line in text.splitlines() if line.startswith("### EN→DE")]
    assert titles == ["### EN→DE, IMAGINATION (`imagination`), all Multi30K pairs",
                      "### EN→DE, text-only NMT (`rnn`), all Multi30K pairs"]
    assert figure.read_bytes().startswith(b"\x89PNG") and "EN→DE: needs a random and a GloVe run" not in text
    panels = {title: {"random": [0.1] * len(BUCKETS)} for title in "abc"}
    assert [axes.get_subplotspec().rowspan.start for axes in fscore_figure(panels).axes] == [0, 0, 1]


def test_each_multimodal_row_is_compared_with_text_only_of_its_embeddings(hirasawa_runs: list[Path]) -> None:
    """What the image adds: a multimodal seed against the text-only seed of the same initial embeddings (the same
    run here, so Δ is 0 exactly), never against another table's; a row without that text-only run says so."""
    random, glove = (load_run(path, "cpu") for path in hirasawa_runs)
    text = hirasawa_report([random, glove, as_model(random, "imagination"), as_model(glove, "vag_nmt")],
                           planned={"all": ["rnn", "imagination", "vag_nmt"], "covered": []}, samples=20)
    versus = table_rows(text, "Against text-only NMT")
    assert [row[:3] for row in versus] == [["IMAGINATION (`imagination`)", "random", "–"],
                                           ["VAG-NMT (`vag_nmt`)", "GloVe", "none"]]
    for row in versus:
        assert row[3].startswith(f"seed 2 {CAPPED}: +0.00 [+0.00, +0.00], p ") and row[4] == "not run"
    alone = hirasawa_report([glove, as_model(random, "imagination")],
                            planned={"all": ["rnn", "imagination"], "covered": []}, samples=20)
    assert table_rows(alone, "Against text-only NMT")[0][3] == "seed 2: no text-only run of this seed"
    covered = text.split("## Against text-only NMT", 1)[1].split("\n## ", 1)[0].split("### image-covered")[1]
    assert covered.split("\n\n")[1].strip() == "No multimodal run on these pairs yet."


def test_rescaled_table_rows_are_a_row_of_their_own_against_random_of_the_same_weights(
        hirasawa_runs: list[Path]) -> None:
    """``embeddings.match_scale`` changes only the table's rows, so such a row is compared with the random run of
    the same initial weights (no random run of its own: a random model reads no table) and named in brackets."""
    random, glove = (load_run(path, "cpu") for path in hirasawa_runs)
    matched = dataclasses.replace(glove, place=dataclasses.replace(glove.place, row=dataclasses.replace(
        glove.place.row, table_rows="table rows at the model's scale")))
    text = hirasawa_report([random, matched], planned={"all": ["rnn"], "covered": []}, samples=20)
    versus = table_rows(text, "Against random initialisation")
    assert [row[:3] for row in versus] == [["text-only NMT (`rnn`)", "GloVe (table rows at the model's scale)", "none"]]
    assert versus[0][3].startswith(f"seed 2 {CAPPED}: ") and "p = " in versus[0][3]
    rows = {(row[1], row[2]): row for row in table_rows(text, "Tables 3–4: all")}
    assert rows[("GloVe", "none")][3] == "0" and rows[("GloVe (table rows at the model's scale)", "none")][3] == "1 †"
