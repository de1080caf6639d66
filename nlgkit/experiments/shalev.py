"""Shalev et al.'s Tables 1–4 (``nlgkit reproduce table1|table2|table3|table4``): nlgkit's figures beside the paper's.

Table 1 is built by :mod:`nlgkit.experiments.table1` (captioning runs), Table 2 by :mod:`nlgkit.evaluate.report`;
Table 3 counts the recipes' parameters (no data or weights needed) and Table 4 scores word similarity.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nlgkit.core.config import load_recipe
from nlgkit.core.errors import NlgkitError
from nlgkit.core.io import write_json
from nlgkit.evaluate.analysis.vectors import vector_sets
from nlgkit.evaluate.analysis.wordsim import DEFAULT_DIR, benchmark_paths, read_benchmark, word_similarity
from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.published import PaperTable
from nlgkit.evaluate.render import render_markdown
from nlgkit.evaluate.report import build_report, collect_runs, report_from_dict, report_to_dict
from nlgkit.experiments.common import RECIPES, log, trained_runs, write_output
from nlgkit.experiments.kept import kept_figures, unrecorded_labels, unrecorded_note
from nlgkit.experiments.papers import load_table
from nlgkit.experiments.table1 import build_table1, render
from nlgkit.runs.build import build_untrained, count_parameters
from nlgkit.runs.loading import load_trained
from nlgkit.runs.records import best_meta

TABLE2_TITLE = "Shalev et al., Table 2: BLEU on Multi30K test2016"


def table1(run_dirs: list[str], output: str | None, dataset: str = "Flickr8k") -> str:
    """Shalev et al.'s Table 1 for the given captioning runs (see :mod:`nlgkit.experiments.table1`)."""

    ready = []
    for run_dir in run_dirs:
        try:
            best_meta(Path(run_dir))
            ready.append(Path(run_dir))
        except NlgkitError:
            log(f"not trained yet: {run_dir}")
    kept = None if ready else kept_figures(output)
    if kept is not None:  # no run here or recorded: the figures kept from the original runs, marked so
        names = {Path(run_dir).name for run_dir in run_dirs}
        table = kept | {"rows": [row for row in kept["rows"] if Path(row["run"]).name in names]}
    else:
        table = build_table1(ready)
    text = render(table, dataset)
    write_output(text, output)
    if output:
        write_json(Path(output).with_suffix(".json"), {k: v for k, v in table.items() if k != "examples"}
                   | {"examples": table["examples"]})
    return text


def table4(run_dirs: list[str], output: str | None, wordsim_dir: str | None = None) -> str:
    """Shalev et al. Table 4: word similarity of target and input vectors beside the paper's correlations.

    For a DE-EN model the English vectors are the decoder's: "target" = the head's rows, "input" = the decoder's
    input embeddings; for EN-DE they are the encoder's input embeddings (the paper has no EN-DE row).
    """
    paper = load_table("shalev2020_table4")
    lines = ["# Shalev et al., Table 4: word similarity (Spearman ρ), target / input vectors", "",
             "Written by `make reproduce-table4` (`nlgkit reproduce table4 RUN_DIR…`): Spearman ρ between",
             "the cosine of two words' vectors and the human score, over the pairs whose words are both in the",
             "vocabulary (covered/total); each run's best checkpoint.", ""]
    kept = kept_figures(output)
    if kept is not None and not trained_runs(run_dirs)[0]:  # the cells kept from the original runs, marked so
        names = {Path(run_dir).name for run_dir in run_dirs}
        kept = kept | {"rows": [row for row in kept["rows"] if Path(row["run"]).name in names]}
        write_json(Path(str(output)).with_suffix(".json"), kept)
        body = [[f"`{row['run']}` (unrecorded)", row["head"], row["benchmark"], *row["cells"]] for row in kept["rows"]]
        return write_output(_table4_text(lines, body, unrecorded_note(kept, "table4")), output)
    benchmarks = {name: read_benchmark(path)
                  for name, path in benchmark_paths(Path(wordsim_dir) if wordsim_dir else DEFAULT_DIR).items()}
    body = []
    for run_dir in run_dirs:
        run = load_trained(Path(run_dir), "best", "cpu")
        cfg = run.config
        sets = vector_sets(run.model, run.source_vocab, run.tgt_vocab)
        english = ("tgt_output", "tgt_input") if cfg.data.tgt_lang == "en" else (None, "src_input")
        pair = run.task.report_keys({}).get("pair")  # Table 4's runs are translation runs
        row = paper.match({"dataset": "multi30k", "pair": pair,
                           "model": cfg.model.type}) if cfg.head.type == "learned" else None  # learned rows only
        for name, pairs in benchmarks.items():
            cells, covered = [], ""
            for kind, set_name in zip(("target", "input"), english):
                result = word_similarity(sets[set_name].matrix, sets[set_name].vocab, pairs) if set_name else None
                ours = "–" if result is None or result.rho is None else f"{result.rho:.2f}"
                theirs = row.values.get(f"{name}_{kind}") if row else None
                cells += [ours, "–" if theirs is None else f"{theirs:.2f}"]
                if result is not None:
                    covered = f"{result.covered}/{result.total}"
            body.append([f"`{run_dir}`", cfg.head.type, name, *cells, covered])
    return write_output(_table4_text(lines, body), output)


def _table4_text(intro: list[str], body: list[list[str]], notes: list[str] | None = None) -> str:
    """Table 4's document: the intro, one row per run and benchmark, the closing remark and any notes."""
    lines = [*intro, *md_table(["run", "head", "benchmark", "target ρ (nlgkit)", "target ρ (paper)",
                                "input ρ (nlgkit)", "input ρ (paper)", "pairs"], body, [False] * 3 + [True] * 5),
             "", "A fixed head's target vectors are random by construction; the paper reports learned models only.",
             "", *([*notes, ""] if notes else [])]
    return "\n".join(lines)


def table2(run_dirs: list[str], output: str | None) -> str:
    """Shalev et al.'s Table 2 beside the given runs (see :mod:`nlgkit.evaluate.report`)."""

    ready, waiting = trained_runs(run_dirs)  # runs not trained yet are listed, not an error
    intro = [
        "Written by `make reproduce-table2` (`nlgkit reproduce table2 RUN_DIR…`): each run's best",
        "checkpoint (by validation BLEU) translates test2016 with the recipe's beam; sacreBLEU on detokenised,",
        "lowercased output against the lowercased raw references.",
        *([""] + [f"Not run yet: `{Path(run_dir).name}`" for run_dir in waiting] if waiting else []),
    ]
    kept = None if ready else kept_figures(output)
    if kept is not None:  # no run here or recorded: the figures kept from the original runs, marked so
        write_json(Path(str(output)).with_suffix(".json"), kept)
        kept_names = {Path(run).name for row in kept["rows"] for run in row["runs"]}
        intro = intro[:3] + ["", *unrecorded_note(kept, "table2"), ""] + [
            f"Not run yet: `{Path(run_dir).name}`" for run_dir in waiting if Path(run_dir).name not in kept_names]
        report = report_from_dict(unrecorded_labels(kept), load_table(kept["paper"]["id"]))
        return write_output(render_markdown(report, title=TABLE2_TITLE, intro=intro), output)
    if not ready:
        text = "\n".join([f"# {TABLE2_TITLE}", "", *intro, ""])
        write_output(text, output)
        return text
    # significance against the first run (the learned head in the Makefile's order), for runs on the same test set
    report = build_report(collect_runs(ready, log=log), load_table("shalev2020_table2"),
                          baseline=ready[0])
    text = render_markdown(report, title=TABLE2_TITLE, intro=intro)
    write_output(text, output)
    if output:
        write_json(Path(output).with_suffix(".json"), report_to_dict(report))
    return text


def table3(output: str | None) -> str:
    """Trainable parameters of the Multi30K recipes, checked to the unit against the paper's counts."""

    paper = load_table("shalev2020_table3")
    rows = []
    for src, tgt in (("de", "en"), ("en", "de")):
        prefix = "multi30k_" if (src, tgt) == ("de", "en") else "multi30k_en_de_"
        paper_learned, paper_fixed = (paper.find(dataset="multi30k", pair=f"{src}-{tgt}", model="rnn",
                                                 head=head).values["params"] for head in ("learned", "fixed"))
        counts = {}
        for head in ("learned", "fixed", "tied"):
            config = load_recipe(RECIPES / f"{prefix}{head}.toml")
            model = build_untrained(config, log=lambda *a: print(*a, file=sys.stderr))[2]
            counts[head] = count_parameters(model)["trainable"]
        saving = 1 - counts["fixed"] / counts["learned"]
        rows.append([f"Multi30K {src.upper()}-{tgt.upper()}", f"{counts['learned']:,}", f"{paper_learned:,}",
                     f"{counts['fixed']:,}", f"{paper_fixed:,}", f"{saving:.0%}", f"{counts['tied']:,}",
                     "yes" if (counts["learned"], counts["fixed"]) == (paper_learned, paper_fixed) else "NO"])
    caption_rows = _table3_captioning(paper)
    text = "\n".join([
        "# Shalev et al., Table 3: trainable parameters",
        "",
        "Computed by `make reproduce-table3` (`nlgkit reproduce table3`) from the recipes in `recipes/`.",
        "Multi30K: vocabularies from `nlgkit prepare multi30k` (raw files, spaCy tokenizer, lowercase, min-freq 2).",
        "MSCOCO: the `coco_*` recipes (ResNet-101 features, 2048 channels, 14×14 regions) counted for the paper's",
        "9,490-word vocabulary (`nlgkit train recipes/coco_attend_learned.toml --dry-run --vocab-size 9490`).",
        "",
        *md_table(["model", "learned (nlgkit)", "learned (paper)", "fixed (nlgkit)", "fixed (paper)", "decrease",
                   "tied (nlgkit)", "equal to paper"], rows + caption_rows, [False] + [True] * 6 + [False]),
        "",
        "The tied models have no row in the paper. Multi30K's tied head shares the 256-dim target embeddings",
        "through a learned 512→256 projection; the captioners' embeddings are 512-wide, so they tie directly.",
        "",
        "**Captioning rows.** nlgkit's Show-Attend-Tell is, layer for layer, the widely used PyTorch decoder",
        "(sgrvinod's tutorial: attention 2048/512→512→1, Embedding(9490, 512), LSTMCell(2560→512), init_h/init_c",
        "2048→512, f_β 512→2048) with the output layer as nlgkit's head. Its learned count equals the paper's",
        "*fixed* count, and both nlgkit rows are exactly one 512×9,490 matrix (4,858,880) below the paper's, while",
        "learned − fixed = 512·9,490 as in the paper (the fixed head's bias trains, its 512×9,490 matrix does not).",
        "No layer of Xu et al.'s model accounts for that matrix: the paper's counts hold one V×512 matrix that is not",
        "trained (most likely the frozen matrix counted with `sum(p.numel() for p in model.parameters())`, the learned",
        "row then derived as fixed + d·|V|). Show-and-Tell (Vinyals et al.: the pooled image projected 2048→512 and fed",
        "as the first LSTM input, Embedding(9490, 512), LSTM(512→512)) differs by that matrix plus 264,705 = a",
        "512×512 linear layer with bias (262,656) and a BatchNorm1d(512) counted with its buffers (2,049), as in the",
        "popular yunjey image-captioning tutorial's encoder head; Vinyals et al. describe neither, so nlgkit does not",
        "add them. IWSLT and WMT rows are not covered (their data is not available offline).",
        "",
    ])
    return write_output(text, output)


def _table3_captioning(paper: PaperTable) -> list[list[str]]:
    """Tell and Attend rows for the paper's 9,490-word COCO vocabulary (no data or weights needed)."""

    rows = []
    for model, name in (("tell", "Show-and-Tell"), ("attend", "Show-Attend-Tell")):
        paper_learned, paper_fixed = (paper.find(dataset="mscoco", pair="image-en", model=model,
                                                 head=head).values["params"]
                                      for head in ("learned", "fixed"))
        counts = {head: count_parameters(build_untrained(load_recipe(RECIPES / f"coco_{model}_{head}.toml"),
                                                         vocab_size=9490)[2])["trainable"]
                  for head in ("learned", "fixed", "tied")}
        saving = 1 - counts["fixed"] / counts["learned"]
        gaps = {paper_learned - counts["learned"], paper_fixed - counts["fixed"]}
        verdict = "yes" if gaps == {0} else (f"no: {gaps.pop():,} below in both rows (see below)" if len(gaps) == 1
                                             else "no")
        rows.append([f"MSCOCO {name}", f"{counts['learned']:,}", f"{paper_learned:,}", f"{counts['fixed']:,}",
                     f"{paper_fixed:,}", f"{saving:.0%}", f"{counts['tied']:,}", verdict])
    return rows

