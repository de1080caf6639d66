"""The models a server holds: each trained run loaded once, with the one batcher that searches for it.

Every ``--model`` is one served model, named by its run directory (or ``NAME=RUN_DIR``). A model serves
the task its run reads: text (``/translate``: translation, and multimodal translation without images) or
images (``/caption``: captioning). The searching is ``nlgkit.generation``'s, the same code as ``nlgkit
translate`` and ``nlgkit caption``: a line gets the words the offline command prints for it. A CTranslate2
export (``nlgkit export ct2``) is served as ``translate --engine ct2`` translates with it.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import functools
import logging
import os
import tempfile
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from PIL import Image

from nlgkit.core.config import RunConfig
from nlgkit.core.errors import ConfigError, DataError, NlgkitError
from nlgkit.export.ct2 import META_FILE
from nlgkit.generation.caption import caption_images, caption_records, check_captioning_run, image_encoder
from nlgkit.generation.ensemble import load_ensemble
from nlgkit.generation.output import SearchOptions, cut_tokens
from nlgkit.generation.targets import TargetReader
from nlgkit.generation.text import Rendered, TargetText
from nlgkit.generation.translate import Translator
from nlgkit.runs.loading import TrainedRun
from nlgkit.search.constrained import missing_phrases
from nlgkit.serve.batching import DynamicBatcher
from nlgkit.serve.limits import ServeLimits
from nlgkit.tasks.base import TextInput
from nlgkit.vision.encoders import RESAMPLE, ImageEncoder
from nlgkit.vision.images import load_image

LOG = logging.getLogger("nlgkit.serve")
TRANSLATE, CAPTION = "translate", "caption"  # what a served model does: its endpoint


@dataclass(frozen=True)
class Picture:
    """An uploaded image, read and checked, at the size the encoder reads it (so a queued request holds a few
    hundred kB whatever was uploaded); ``name``: the upload's file name, for messages."""

    name: str
    image: Image.Image


class TextTranslator(Protocol):
    """What serving text needs of a translator: :class:`Translator` (nlgkit's search) or ``CT2Translator``."""

    options: SearchOptions
    output: TargetText
    targets: TargetReader
    text_input: TextInput
    pretokenized: bool
    max_input_tokens: int

    def texts(self, lines: list[str], name: str = ..., first_number: int = ..., images: Sequence[Path] | None = ...,
              prefix_ids: Sequence[list[int]] | None = ...) -> list[list[Rendered]]: ...


@dataclass
class ServedModel:
    """One trained run (or CTranslate2 export) being served: what it does, its search defaults, its batcher."""

    name: str
    config: RunConfig
    does: str  # TRANSLATE or CAPTION
    limits: ServeLimits
    origin: str  # the checkpoint or export directory it answers from
    device: str
    engine: str = "torch"  # or "ct2"
    compute_type: str = "float32"  # what its search computes in (--compute-type; for ct2, CTranslate2's)
    run: TrainedRun | None = None  # what captioning searches with (translation: the translator)
    translator: TextTranslator | None = None
    encoder: ImageEncoder | None = None
    batcher: DynamicBatcher = field(init=False)
    _by_key: dict[tuple[SearchOptions, bool, bool, bool], TextTranslator] = field(default_factory=dict,
                                                                                       init=False)

    def __post_init__(self) -> None:
        process = self._translate if self.does == TRANSLATE else self._caption
        self.batcher = DynamicBatcher(self.name, process, max_batch=self.limits.max_batch,
                                      max_wait_s=self.limits.max_wait_ms / 1000, queue_size=self.limits.queue_size)

    @property
    def attention(self) -> bool:
        """Whether the model can show where it looked for each word (show-attend-tell)."""
        return self.does == CAPTION and self.run is not None and hasattr(self.run.model, "attention")

    def options(self, beam: int | None, nbest: int | None, min_len: int | None = None,
                no_repeat_ngram_size: int | None = None) -> SearchOptions:
        """The run's ``[search]`` with a request's beam, n-best and constraints (DataError when they do not fit)."""
        if beam is not None and beam > self.limits.max_beam:
            raise DataError(f"beam {beam}: this server allows at most {self.limits.max_beam}")
        for name, value in (("min_len", min_len), ("no_repeat_ngram_size", no_repeat_ngram_size)):
            if value is not None and value < 0:
                raise DataError(f"{name} {value}: must be 0 or positive (0 = off)")
        try:
            return SearchOptions.resolve(self.config.search, beam=beam, nbest=nbest,
                                         batch_size=self.limits.max_batch, min_len=min_len,
                                         no_repeat_ngram_size=no_repeat_ngram_size)
        except DataError:
            default = self.config.search
            raise DataError(f"beam {default.beam if beam is None else beam} / nbest "
                            f"{default.nbest if nbest is None else nbest}: need 1 <= nbest <= beam") from None

    @functools.cached_property
    def targets(self) -> TargetReader:
        """Target text read as the training targets were: the translator's reader, or a captioning run's."""
        if self.translator is not None:
            return self.translator.targets
        run = self.run
        assert run is not None
        return TargetReader(run.tgt_vocab, lambda: run.task.target_tokenizer(run.assets))

    def read_targets(self, lines: Sequence[str], prefixes: Sequence[str] | None,
                     constraints: Sequence[Sequence[str]] | None,
                     options: SearchOptions) -> tuple[list[list[int]], list[list[list[int]]], list[str]]:
        """A /translate request's prefixes and constraint phrases as target word ids (one entry per line; none: an
        empty list), read once in the request's thread (the batch searches with the ids), and what the request
        loses, one message naming its line: a line over the translator's ``max_input_tokens`` is cut, and a prefix's
        or phrase's word outside the target vocabulary is forced as ``<unk>`` or left out, as ``translate`` does;
        so that the client, not only the server's log, learns why an output reads as it does. A phrase the search
        under ``options`` can never output is a ConfigError (``TargetReader.phrases``), before the request is queued."""
        found = list[str]()
        prefix_ids: list[list[int]] = []
        phrase_ids: list[list[list[int]]] = []
        translator = self.translator
        lost = self._logged(found)  # (a cut line is logged by the batch that cuts it)
        for number, line in enumerate(lines, start=1):
            where = f"line {number}"
            # (a token is at least one character: a line no longer than the limit is not tokenised twice)
            if translator is not None and len(line) > translator.max_input_tokens:
                tokens = line.split() if translator.pretokenized else translator.text_input.tokenize(line)
                cut_tokens(tokens, translator.max_input_tokens, found.append, where)
            prefix = prefixes[number - 1] if prefixes is not None else ""
            prefix_ids.append(self.targets.prefix(prefix, lost, where) if prefix.strip() else [])
            phrases = "\t".join(constraints[number - 1]) if constraints is not None else ""
            phrase_ids.append(self.targets.phrases(phrases, lost, where, options) if phrases.strip() else [])
        return prefix_ids, phrase_ids, found

    def read_prefix(self, prefix: str) -> tuple[list[int], list[str]]:
        """/caption's one ``target_prefix`` (every image's; "": none) as target word ids, read once in the
        request's thread, and what it loses to the target vocabulary."""
        found = list[str]()
        ids = self.targets.prefix(prefix, self._logged(found), "target_prefix") if prefix.strip() else []
        return ids, found

    def _logged(self, found: list[str]) -> Callable[[str], None]:
        """A warning function that adds to ``found`` (the answer's warnings) and logs, naming the model."""
        def warn(message: str) -> None:
            found.append(message)
            LOG.warning("request to %s: %s", self.name, message)
        return warn

    def describe(self) -> dict[str, Any]:
        config = self.config
        search = config.search
        return {"name": self.name, "endpoint": f"/{self.does}", "task": config.task.type,
                "model": config.model.type, "head": config.head.type, "checkpoint": self.origin,
                "engine": self.engine, "compute_type": self.compute_type, "device": self.device, "beam": search.beam, "nbest": search.nbest,
                "min_len": search.min_len, "no_repeat_ngram_size": search.no_repeat_ngram_size,
                "attention": self.attention,
                "replace_unk": self.translator is not None and self.translator.output.replace_unknown is not None}

    # -- the batches, in the batcher's worker thread ------------------------------------------------------------
    def _translate(self, key: Hashable, lines: list[Any]) -> list[Any]:
        """Each line's answer (:meth:`TargetText.record`, with ``missing_constraints`` where its best output lacks
        some of its phrases): key = (search options, align, token_scores, scores);
        a line is (its text, its constraint phrases and its target prefix as target word ids, :meth:`read_targets`;
        empty lists for none)."""
        assert isinstance(key, tuple) and self.translator is not None
        options, align, token_scores, scores = key
        translator = self._by_key.get(key)
        if translator is None:  # the same tokenizer and detokenizer, another search and answer
            translator = self._by_key[key] = copy.copy(self.translator)
            translator.options = options
            translator.output = dataclasses.replace(translator.output, report_alignment=align,
                                                    report_token_scores=token_scores, as_json=True)
        texts, constraints, prefixes = (list(column) for column in zip(*lines, strict=True))
        name = f"request to {self.name}"
        wanted = prefixes if any(prefixes) else None
        if not any(constraints):
            found = translator.texts(texts, name=name, prefix_ids=wanted)
        else:  # (the app refuses constraints for a CTranslate2 export)
            assert isinstance(translator, Translator)
            found = translator.texts(texts, name=name, prefix_ids=wanted, phrase_ids=constraints)
        records = [translator.output.record(rendered, options.nbest, scores) for rendered in found]
        for record, rendered, phrases in zip(records, found, constraints, strict=True):
            # a best output returned at the length limit without all its phrases (``translate`` warns): said per line
            if rendered and phrases and (missing := missing_phrases(rendered[0].hypothesis.tokens, phrases)):
                record["missing_constraints"] = [translator.output.text(list(phrase)) for phrase in missing]
        return records

    def _caption(self, key: Hashable, pictures: list[Any]) -> list[Any]:
        assert isinstance(key, tuple) and self.run is not None
        options: SearchOptions = key[0]
        attention: bool = key[1]
        token_scores: bool = key[2]
        prefix: tuple[int, ...] = key[3]  # the word ids every caption of the batch starts with (none: empty)
        by_label = {f"upload{i:05d}.png": picture for i, picture in enumerate(pictures)}
        run = self.run
        detokenize = run.detokenizer()

        def render(tokens: list[int]) -> str:
            return detokenize(run.tgt_vocab.decode(tokens))

        with tempfile.TemporaryDirectory(prefix="nlgkit-serve-") as tmp:
            results = caption_images(run, list(by_label), options, encoder=self.encoder,
                                     attention_dir=Path(tmp) if attention else None,
                                     load=lambda label: by_label[label].image, warn=LOG.warning,
                                     prefix_ids=[list(prefix)] * len(pictures) if prefix else None,
                                     targets=self.targets)
            answers = []
            for result in results:
                if result.error:  # pictures were read before they were queued: this is the model failing
                    raise DataError(result.error)
                answer: dict[str, Any] = {"captions": caption_records(result.hypotheses, render,
                                                                      run.tgt_vocab.decode if token_scores else None)}
                if result.attention_png:
                    answer["attention_png"] = base64.b64encode(Path(result.attention_png).read_bytes()).decode()
                answers.append(answer)
        return answers

    # -- reading an upload, in the request's thread -------------------------------------------------------------
    def read_picture(self, name: str, data: bytes) -> Picture:
        """An uploaded file → a checked picture at the encoder's input size (the same resize the encoder
        applies first, so the caption equals ``nlgkit caption``'s); a broken, truncated, non-image or
        too-large file is a DataError naming the upload."""
        assert self.encoder is not None
        size = self.encoder.config.image_size
        with tempfile.TemporaryDirectory(prefix="nlgkit-upload-") as tmp:
            path = Path(tmp) / "upload"
            path.write_bytes(data)
            try:
                picture = load_image(path, max_pixels=self.limits.max_pixels)
            except DataError as exc:
                raise DataError(str(exc).replace(str(path), name, 1)) from None
        resample = RESAMPLE[self.encoder.preprocessing["interpolation"]]
        return Picture(name, picture.convert("RGB").resize((size, size), resample))


def parse_spec(spec: str) -> tuple[str, list[Path]]:
    """``RUN_DIR`` (named by its last part) or ``NAME=RUN_DIR``; ``RUN_A+RUN_B…`` is an ensemble of those runs
    (named by their names joined with +), unless a directory of that very name exists."""
    name, sep, paths = spec.partition("=")
    if not (sep and name and "/" not in name):
        name, paths = "", spec
    run_dirs = [Path(paths)] if Path(paths).exists() or "+" not in paths else [Path(p) for p in paths.split("+")]
    return name or "+".join(run_dir.resolve().name or str(run_dir) for run_dir in run_dirs), run_dirs


def load_model(spec: str, checkpoint: str, device: str, limits: ServeLimits,
               ensemble_mode: str = "log_linear", phrase_table: Mapping[str, str] | None = None,
               compute_type: str = "default") -> ServedModel:
    """Load one ``--model`` for serving (its CNN too, for captioning); several runs joined by + are searched as
    one ensemble (``ensemble_mode``, as ``translate --ensemble-mode``); a translation model replaces its outputs'
    unknown words when ``phrase_table`` is given (empty: copied from the source, as ``translate --replace-unk``);
    ``compute_type`` as ``translate --compute-type``. An NlgkitError names what failed."""
    name, run_dirs = parse_spec(spec)
    if any((run_dir / META_FILE).is_file() for run_dir in run_dirs):
        return load_export_model(name, run_dirs, checkpoint, device, limits, phrase_table, compute_type)
    run = load_ensemble(run_dirs, checkpoint, device, ensemble_mode, compute_type)
    if run.compute_note():
        LOG.warning("%s: %s", name, run.compute_note())
    try:
        translator = Translator(run, SearchOptions.resolve(run.config.search, batch_size=limits.max_batch),
                                max_input_tokens=400, warn=LOG.warning, phrase_table=phrase_table)
    except DataError:
        translator = None
    if translator is not None:
        try:
            translator.text_input.encode(["."])  # a model that needs an image with each sentence says so here
        except DataError:
            raise DataError(f"{run.checkpoint}: model.type = {run.config.model.type!r} reads an image with each "
                            "sentence, and `nlgkit serve` takes none with text (serve a text-only or IMAGINATION "
                            "model)") from None
        return ServedModel(name, run.config, TRANSLATE, limits, str(run.checkpoint), str(run.device),
                           compute_type=run.compute_type, run=run, translator=translator)
    try:
        check_captioning_run(run)
    except DataError:
        raise DataError(f"{run.checkpoint}: a {run.config.task.type!r} model reads neither text nor images: "
                        "nothing to serve") from None
    encoder = image_encoder(run)
    return ServedModel(name, run.config, CAPTION, limits, str(run.checkpoint), str(run.device),
                       compute_type=run.compute_type, run=run, encoder=encoder)


def load_export_model(name: str, directories: list[Path], checkpoint: str, device: str, limits: ServeLimits,
                      phrase_table: Mapping[str, str] | None = None, compute_type: str = "default") -> ServedModel:
    """A CTranslate2 export served through CTranslate2's search (``translate --engine ct2``), with as many
    threads as the searches are given (:func:`set_threads`)."""
    # lazy: CTranslate2 is an optional extra, loaded only when an export is served
    from nlgkit.generation.ct2 import CT2Translator, single_export

    if len(directories) > 1:
        raise ConfigError(f"{'+'.join(map(str, directories))}: an ensemble of CTranslate2 exports is not served "
                          "(serve the runs themselves: RUN_A+RUN_B)")
    export = single_export(directories, checkpoint)
    translator = CT2Translator(export, SearchOptions.resolve(export.config.search, batch_size=limits.max_batch),
                               compute_type=compute_type, device=device, warn=LOG.warning, phrase_table=phrase_table)
    return ServedModel(name, export.config, TRANSLATE, limits, str(export.directory), translator.engine.device,
                       engine="ct2", compute_type=translator.engine.compute_type, translator=translator)


def set_threads(threads: int = 0) -> int:
    """Intra-op threads of the searches (0: one fewer than the cores, at least one). A server leaves a core to
    its HTTP side: search threads that spin on every core starve the event loop that feeds them, and a single
    request's latency grows tenfold on a busy machine."""
    count = threads or max(1, (os.cpu_count() or 1) - 1)
    torch.set_num_threads(count)
    return count


def load_models(specs: Sequence[str], checkpoint: str = "best", device: str = "auto",
                limits: ServeLimits | None = None, ensemble_mode: str = "log_linear",
                phrase_table: Mapping[str, str] | None = None, compute_type: str = "default") -> dict[str, ServedModel]:
    """Every ``--model``, loaded once, by name (in the order given); two models of one name are an error.
    ``phrase_table``: translation models replace unknown words (see :func:`load_model`)."""
    limits = limits or ServeLimits()
    if not specs:
        raise DataError("no model given (--model RUN_DIR, once per model)")
    models: dict[str, ServedModel] = {}
    for spec in specs:
        model = load_model(spec, checkpoint, device, limits, ensemble_mode, phrase_table, compute_type)
        if model.name in models:
            raise NlgkitError(f"--model {spec}: a second model named {model.name!r} (name them: NAME=RUN_DIR)")
        if model.config.search.beam > limits.max_beam:  # a request that names no beam searches with the model's own
            raise NlgkitError(f"--model {spec}: its search beam {model.config.search.beam} is wider than max_beam "
                              f"{limits.max_beam}, which bounds every request (--limit max_beam="
                              f"{model.config.search.beam} serves it)")
        models[model.name] = model
    return models
