"""Captioning image files with a trained run: read safely, run the run's CNN, search, and report per image.

Every image gets exactly one result, in input order: a bad file (missing, empty, truncated, corrupt, not
an image, a decompression bomb) becomes an error result naming it while the others are captioned. The
CNN is the one the run was trained on (``[task.encoder]``); its features are rounded to float16 as the
training cache stores them, so the model sees what it was trained on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from PIL import Image

from nlgkit.core.errors import DataError
from nlgkit.core.figures import save_png
from nlgkit.data.batching import Batch
from nlgkit.generation.decode import ReferenceScore, generate, score_references
from nlgkit.generation.ensemble import Ensemble
from nlgkit.generation.output import SearchOptions, output_lines, token_scores_field
from nlgkit.generation.targets import TargetReader
from nlgkit.runs.loading import TrainedRun
from nlgkit.search import Hypothesis
from nlgkit.vision.encoders import ImageEncoder, build_encoder
from nlgkit.vision.images import ImageError, load_image


@dataclass
class CaptionResult:
    image: str
    hypotheses: list[Hypothesis] = field(default_factory=list)
    error: str = ""
    attention_png: str = ""


def check_captioning_run(run: TrainedRun) -> None:
    """``caption`` serves any task whose model reads image features of the encoder its ``[task.encoder]`` names."""
    if getattr(run.config.task, "encoder", None) is None:
        raise DataError(f"{run.checkpoint}: a {run.config.task.type} model; `nlgkit caption` needs a "
                        f"model that reads images ([task.encoder])")


def check_caption_options(run: TrainedRun, attention_dir: Path | None) -> None:
    """What :func:`caption_images` refuses before any image is read: a run that reads no images, ``--attention``
    for an ensemble or a model without attention."""
    check_captioning_run(run)
    if attention_dir is not None and isinstance(run.model, Ensemble):
        raise DataError(f"--attention: an ensemble of {len(run.model.members)} models has no one attention to "
                        f"draw; give a single --model")
    if attention_dir is not None and not hasattr(run.model, "attention"):
        raise DataError(f"--attention: the {run.config.model.type!r} model has no attention to draw "
                        f"(show_attend_tell has)")


def caption_images(run: TrainedRun, paths: Sequence[str], options: SearchOptions, *,
                   attention_dir: Path | None = None, warn: Callable[[str], None] = print,
                   encoder: ImageEncoder | None = None,
                   load: Callable[[str], Image.Image] = load_image, constraints: Sequence[str] | None = None,
                   constraints_name: str = "constraints", prefixes: Sequence[str] | None = None,
                   prefixes_name: str = "target prefix", prefix_ids: Sequence[list[int]] | None = None,
                   note: Callable[[str], None] | None = None,
                   limit_note: Callable[[str], None] | None = None,
                   on_batch: Callable[[int, int], None] | None = None,
                   on_results: Callable[[int, Sequence[CaptionResult]], None] | None = None,
                   targets: TargetReader | None = None, first_image: int = 0) -> list[CaptionResult]:
    """One result per path, in order; unreadable images are error results (and a warning), not failures.
    ``constraints``: each image's phrases (tab-separated) that its captions must contain (``caption
    --constraints``, :meth:`TargetReader.phrases`); ``prefixes``: the text each image's captions start with
    (``caption --target-prefix``, :meth:`TargetReader.prefix`; an empty line: none), or ``prefix_ids``: those
    already read as target word ids (a server reads a request's prefix once, when it comes). Errors and warnings
    on them name ``constraints_name`` and ``prefixes_name``; the warnings go to ``note`` (default ``warn``, which
    gets the images that fail), and the one that ``min_len`` is above the length limit to ``limit_note`` (default
    ``note``; a stream of groups passes one that speaks once, :func:`nlgkit.generation.decode.once`); an image
    whose caption lacks some of its phrases is named to ``note`` (:meth:`TargetReader.warn_unmet`).
    ``on_batch(done, total)``: after each batch of images, those done so far (captioned or
    failed) and all of them (a progress bar); ``on_results(first, batch)``: after each batch, its results, in
    order, ``batch[0]`` being image ``first`` (``caption`` writes them as they come). ``first_image``: how many
    images a stream captioned before these; image numbers (in ``on_results``, warnings and attention files) count
    from it.

    A server passes the run's ``encoder`` it built once, a ``load`` that returns the pictures it has already read
    and checked (``paths`` are then its names for them) and its ``targets`` reader of the run's target text; by
    default all three are made here."""

    check_caption_options(run, attention_dir)
    for values, name in ((constraints, constraints_name), (prefixes, prefixes_name), (prefix_ids, "prefix_ids")):
        if values is not None and len(values) != len(paths):
            raise DataError(f"{name}: {len(values)} lines for {len(paths)} images")
    reader = targets if targets is not None else TargetReader(run.tgt_vocab,
                                                              lambda: run.task.target_tokenizer(run.assets))
    note = note or warn
    phrases = None if constraints is None else reader.phrase_lines(constraints, note, constraints_name,
                                                                   first_image + 1, options)
    if prefixes is not None:
        prefix_ids = reader.prefixes(prefixes, note, prefixes_name, first_image + 1)
    results = [CaptionResult(str(path)) for path in paths]
    detokenize = run.detokenizer()  # (a missing constraint is named as captions are written)
    first = 0  # the first image of each batch
    for end, good, sources, pictures in image_sources(run, paths, results, options.batch_size, warn, encoder,
                                                       load):
        if good:  # (none of a batch's images may be readable)
            with run.computing():  # the search (the CNN's features stay float32)
                found = generate(run.model, run.task, sources, run.tgt_vocab, device=run.device,
                                 item_ids=[first_image + i for i in good],  # (an image's samples: its own)
                                 constraints=None if phrases is None else [phrases[i] for i in good],
                                 prefixes=None if prefix_ids is None else [prefix_ids[i] for i in good],
                                 warn=limit_note or note, **options.search_kwargs())
            for j, i in enumerate(good):
                results[i].hypotheses = found[j]
                if attention_dir is not None and found[j]:
                    png = attention_dir / f"{first_image + i:05d}_{Path(paths[i]).stem}.png"
                    results[i].attention_png = str(draw_attention(run, sources[j], found[j][0].tokens, pictures[j],
                                                                  png))
        if phrases is not None:
            reader.warn_unmet([results[i].hypotheses for i in good], [phrases[i] for i in good], note,
                              constraints_name, [first_image + i + 1 for i in good],
                              lambda ids: detokenize(run.tgt_vocab.decode(ids)))
        if on_batch is not None:
            on_batch(end, len(paths))
        if on_results is not None:
            on_results(first_image + first, results[first:end])
        first = end
    return results


MAX_REFERENCE_TOKENS = 400
"""Where ``caption --score-reference`` cuts a reference: ``translate --max-input-tokens``'s default."""


def caption_reference_scores(run: TrainedRun, paths: Sequence[str], references: Sequence[str], batch_size: int,
                             *, warn: Callable[[str], None] = print, references_name: str = "references",
                             max_tokens: int = MAX_REFERENCE_TOKENS,
                             ) -> tuple[list[CaptionResult], list[ReferenceScore | None]]:
    """The model's log-score of each image's reference caption (``caption --score-reference``), tokenised as
    the training captions were and cut to ``max_tokens`` with a warning naming its line, as ``translate`` cuts
    references; an unreadable image gets an error result and no score."""
    check_captioning_run(run)
    if len(references) != len(paths):
        raise DataError(f"{references_name}: {len(references)} lines for {len(paths)} images")
    reader = TargetReader(run.tgt_vocab, lambda: run.task.target_tokenizer(run.assets))
    targets = reader.references(references, len(paths), name=references_name, first_number=1,
                                references_name=references_name, max_tokens=max_tokens, warn=warn)
    results = [CaptionResult(str(path)) for path in paths]
    scores: list[ReferenceScore | None] = [None] * len(paths)
    for _, good, sources, _ in image_sources(run, paths, results, batch_size, warn):
        if not good:
            continue
        with run.computing():
            found = score_references(run.model, run.task, sources, [targets[i] for i in good],
                                     run.tgt_vocab, batch_size=batch_size, device=run.device)
        for i, score in zip(good, found, strict=True):
            scores[i] = score
    return results, scores


def image_sources(run: TrainedRun, paths: Sequence[str], results: Sequence[CaptionResult], batch_size: int,
                  warn: Callable[[str], None], encoder: ImageEncoder | None = None,
                  load: Callable[[str], Image.Image] = load_image,
                  ) -> Iterator[tuple[int, list[int], list[tuple[torch.Tensor, torch.Tensor]], list[Image.Image]]]:
    """``(end, indices, sources, pictures)`` for each batch of ``paths[start:end]``: its readable images through
    the run's CNN. An image that cannot be read gets its error in ``results`` (and a warning) and is left out; a
    batch of none of them comes with empty lists."""
    if encoder is None:
        encoder = image_encoder(run)
    for start in range(0, len(paths), batch_size):
        end = min(start + batch_size, len(paths))
        good, pixels, pictures = [], [], []
        for i in range(start, end):
            try:
                picture = load(paths[i])
            except ImageError as exc:
                results[i].error = str(exc)
                warn(str(exc))
                continue
            good.append(i)
            pictures.append(picture)
            pixels.append(encoder.preprocess(picture))
        if not good:
            yield end, [], [], []
            continue
        with torch.inference_mode():
            spatial, pooled = encoder(torch.stack(pixels).to(run.device))  # (B, L, C), (B, P)
        spatial, pooled = spatial.half().float(), pooled.half().float()  # as the training cache stores them
        yield end, good, [(spatial[j], pooled[j]) for j in range(len(good))], pictures


def image_encoder(run: TrainedRun) -> ImageEncoder:
    """The CNN ``run`` was trained on, on its device, for inference: built once by a caller that captions many
    groups of images (a stream, a server)."""
    return build_encoder(run.config.task.encoder).to(run.device).eval()


def draw_attention(run: TrainedRun, source: tuple[torch.Tensor, torch.Tensor], tokens: list[int], picture: object,
                   path: Path) -> Path:
    """A PNG with the picture, then one panel per output word with its attention over the picture."""
    import numpy as np
    from matplotlib.figure import Figure


    vocab = run.tgt_vocab
    prev = torch.tensor([[vocab.bos_index] + tokens], device=run.device)  # (1, T): EOS step included
    inputs, _ = run.task.source_inputs([source], vocab)
    batch = Batch({k: v.to(run.device) for k, v in inputs.items()}, prev, prev, [0], prev.numel())
    with torch.inference_mode():
        _, alphas = cast(Any, run.model).attention(batch)  # (1, T, L)
    alphas = alphas[0].float().cpu()
    side = round(alphas.size(1) ** 0.5)
    words = vocab.decode(tokens) + ["</s>"]
    image = picture.convert("RGB").resize((224, 224))  # type: ignore[attr-defined]
    columns = 5
    rows = (len(words) + 1 + columns - 1) // columns
    figure = Figure(figsize=(2.2 * columns, 2.4 * rows))
    axis = figure.add_subplot(rows, columns, 1)
    axis.imshow(image)
    axis.set_title("image", fontsize=9)
    axis.axis("off")
    for k, word in enumerate(words):
        weights = alphas[k].reshape(side, side).numpy()
        heat = Image.fromarray((weights / max(weights.max(), 1e-12) * 255).astype(np.uint8)).resize(
            image.size, Image.Resampling.BILINEAR)
        axis = figure.add_subplot(rows, columns, k + 2)
        axis.imshow(image)
        axis.imshow(np.asarray(heat), cmap="jet", alpha=0.5)
        axis.set_title(word, fontsize=9)
        axis.axis("off")
    save_png(figure, path)
    return path


def caption_records(found: Sequence[Hypothesis], render: Callable[[list[int]], str],
                    words: Callable[[list[int]], list[str]] | None = None) -> list[dict[str, Any]]:
    """Captions, best first, as ``caption --json`` and ``nlgkit serve``'s /caption answer them: ``{"text",
    "score"}``; with ``words`` (token ids → tokens) also each one's ``tokens`` and ``token_scores`` (the EOS's
    last)."""
    records = []
    for h in found:
        record: dict[str, Any] = {"text": render(h.tokens), "score": round(float(h.score), 4)}
        if words is not None:
            record.update(tokens=words(h.tokens), token_scores=[round(v, 4) for v in h.token_scores or []])
        records.append(record)
    return records


def result_lines(results: Sequence[CaptionResult], nbest: int, as_json: bool,
                 render: Callable[[list[int]], str],
                 words: Callable[[list[int]], list[str]] | None = None, first_index: int = 0) -> list[str]:
    """Text lines (one per image; Moses n-best with nbest > 1, numbered from ``first_index``) or one JSON record
    per image; with ``words`` (token ids → tokens), each caption's tokens' log-scores, the EOS's last (a last field
    ``||| …`` of each line, or ``tokens`` and ``token_scores`` in each JSON caption)."""
    if as_json:
        lines = []
        for r in results:
            record: dict[str, object] = {"image": r.image}
            if r.error:
                record["error"] = r.error
            else:
                record["captions"] = caption_records(r.hypotheses[:nbest], render, words)
            if r.attention_png:
                record["attention"] = r.attention_png
            lines.append(json.dumps(record, ensure_ascii=False))
        return lines

    return output_lines([r.hypotheses for r in results], nbest, lambda _, hypothesis: render(hypothesis.tokens),
                        first_index=first_index, extras=[token_scores_field] * (words is not None))
