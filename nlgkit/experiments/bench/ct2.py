"""CTranslate2 in ``make bench``: a trained Transformer's test2016 beam search by nlgkit and by its CTranslate2
export, float32 and int8, on the CPU.

The run (``nlgkit bench --ct2-run``) is exported once to a temporary directory (:mod:`nlgkit.export.ct2`); each
pass of a row then runs in a process of its own (``nlgkit bench --worker ct2``, so peak memory is that row's) and
translates the prepared test split from the same source ids with the run's ``[search]`` settings at the given
beam: nlgkit's batched beam search (:func:`nlgkit.generation.decode.generate`), or CTranslate2's through
:class:`nlgkit.generation.ct2.CT2Translator`, with the same number of threads (torch's; ``OMP_NUM_THREADS``
sets both). A few sentences are translated first, untimed, so that neither engine is timed allocating its
buffers. The rows take turns for :data:`ROUNDS` rounds, one pass each, and each row's fastest pass is its speed:
on a shared machine the slower ones measure the neighbours, and taking turns gives every row the same chances
of a quiet moment. BLEU is sacreBLEU on the detokenised outputs against the raw
references, as in every results table; *identical* counts the outputs equal to nlgkit's, line for line.

A missing run, a run CTranslate2 cannot express, or a missing ``ctranslate2`` package leaves the section
unmeasured, with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.config import config_from_dict
from nlgkit.core.errors import NlgkitError
from nlgkit.experiments.bench.process import peak_rss_mib
from nlgkit.export.ct2 import check_exportable, export_ct2, load_export
from nlgkit.generation.ct2 import CT2Translator
from nlgkit.generation.decode import generate
from nlgkit.generation.output import SearchOptions
from nlgkit.runs.checkpoint import load_meta
from nlgkit.runs.loading import load_trained
from nlgkit.search import Hypothesis

CASES = (("nlgkit", "float32"), ("ct2", "float32"), ("ct2", "int8"))
WARMUP = 16  # sentences translated untimed before the timed pass
ROUNDS = 3  # timed passes of each row, taking turns; the fastest is reported


def ct2_benchmarks(root: Path, run: str, beam: int, limit: int,
                   spawn: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Every row of :data:`CASES` for the run ``run`` (relative to ``root``), or why it could not be measured."""
    section: dict[str, Any] = {"run": run, "beam": beam, "warmup": WARMUP, "rounds": ROUNDS, "rows": []}
    best = root / run / "checkpoints" / "best"
    if not best.exists():
        return {**section, "missing": f"no trained run at `{run}` (`nlgkit bench --ct2-run RUN` names another "
                                      "Transformer run with a learned, tied, fixed or hadamard head)"}
    if importlib.util.find_spec("ctranslate2") is None:
        return {**section, "missing": "ctranslate2 is not installed (the `ct2` extra)"}
    try:
        meta = load_meta(best)
        check_exportable(config_from_dict(meta["config"], str(best / "meta.json")), run)
    except NlgkitError as exc:
        return {**section, "missing": str(exc)}
    section["trained"] = trained_from(meta)
    with tempfile.TemporaryDirectory(prefix="nlgkit-ct2-") as tmp:
        export = Path(tmp) / "ct2"
        section["ctranslate2"] = export_ct2(root / run, export).ctranslate2_version
        passes: list[list[dict[str, Any]]] = [[] for _ in CASES]
        for _ in range(ROUNDS):
            for (engine, compute_type), row_passes in zip(CASES, passes, strict=True):
                case = {"engine": engine, "compute_type": compute_type, "export": str(export)}
                row_passes.append(spawn("--worker", "ct2", "--run", str(root / run), "--beam", str(beam),
                                        "--limit", str(limit), "--case", json.dumps(case)))
    section["rows"] = [_row(row_passes) for row_passes in passes]
    reference = section["rows"][0].pop("outputs")
    for row in section["rows"][1:]:
        row["identical"] = sum(a == b for a, b in zip(row.pop("outputs"), reference, strict=True))
    first = section["rows"][0]
    return {**section, "sentences": first["sentences"], "threads": first["threads"]}


def trained_from(meta: dict[str, Any]) -> dict[str, Any]:
    """How the measured checkpoint came to be, from its meta.json: the commit it was trained at, its update and
    epoch, its validation score and the whole resolved config (so that the run can be trained again)."""
    loop, metrics = meta.get("loop", {}), meta.get("metrics", {})
    return {"commit": meta.get("git", {}).get("commit"), "update": loop.get("update"),
            "epoch": loop.get("best_epoch"), "metrics": metrics, "config": meta["config"]}


def _row(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from its passes (the same outputs each time): the fastest pass's speed, the largest peak memory."""
    seconds = [p["seconds"] for p in passes]
    fastest = min(seconds)
    return {**passes[0], "seconds": fastest, "passes_s": seconds, "sentences_per_s": passes[0]["sentences"] / fastest,
            "output_tokens_per_s": passes[0]["output_tokens"] / fastest,
            "peak_rss_mib": max(p["peak_rss_mib"] for p in passes)}


def measure_ct2(run: str, beam: int, limit: int, engine: str, compute_type: str, export: str) -> dict[str, Any]:
    """One pass of a row: test-split beam search of ``run`` by ``engine`` (nlgkit, or ct2 on ``export``)."""
    translate: Callable[[list[list[int]]], list[list[Hypothesis]]]
    if engine == "nlgkit":
        trained = load_trained(Path(run), "best", "cpu")
        config, task, vocabs, tgt_vocab = trained.config, trained.task, trained.vocabs, trained.tgt_vocab
        detokenize = trained.detokenizer()
    else:
        exported = load_export(Path(export))
        config, task, vocabs, tgt_vocab = exported.config, exported.task, exported.vocabs, exported.tgt_vocab
        detokenize = task.detokenizer(exported.assets)
    data_dir = Path(config.data.dir)
    sources = task.split_sources(data_dir, "test", vocabs)[: limit or None]
    refs = task.split_references(data_dir, "test")[: len(sources)]
    search = config.search
    options = SearchOptions(beam=beam, nbest=1, length_penalty=search.length_penalty, max_len_a=search.max_len_a,
                            max_len_b=search.max_len_b, batch_size=search.batch_size)
    if engine == "nlgkit":
        def nlgkit_search(batch: list[list[int]]) -> list[list[Hypothesis]]:
            return generate(trained.model, task, batch, tgt_vocab, **options.search_kwargs())

        translate = nlgkit_search
    else:
        translator = CT2Translator(exported, options, compute_type=compute_type)
        compute_type = translator.engine.compute_type
        translate = translator.search
    translate(sources[:WARMUP])
    start = time.perf_counter()
    found = translate(sources)
    seconds = time.perf_counter() - start
    outputs = [detokenize(tgt_vocab.decode(h[0].tokens)) if h else "" for h in found]
    return {"engine": engine, "compute_type": compute_type, "sentences": len(sources), "seconds": seconds,
            "output_tokens": sum(len(h[0].tokens) for h in found if h), "bleu": task.score(outputs, refs)["bleu"],
            "threads": torch.get_num_threads(), "peak_rss_mib": peak_rss_mib(), "outputs": outputs}
