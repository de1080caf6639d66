"""Captioning: image features in, a caption out, CIDEr or BLEU-4 over all of an image's references.

A prepared caption directory (``nlgkit prepare flickr8k|coco|flickr30k|captions|multi30k --task captions``)
holds ``{split}.jsonl`` records ``{"image", "tokens", "refs"}`` (one per image, several captions each), the
target vocabulary and a manifest naming the images directory. The CNN runs once per image into a feature
cache (``nlgkit.vision.cache``); training examples are (image row, caption) pairs over cached features,
validation generates one caption per image and scores it against all of its references.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor

from nlgkit.core.config import DataConfig, DataSection, PrepareConfig
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import invalid_utf8, read_json
from nlgkit.core.registry import TASKS, PluginConfig
from nlgkit.data.batching import Batch, Examples, target_tensors
from nlgkit.data.caption_sources import prepare_captions
from nlgkit.data.captions import basic_tokenize
from nlgkit.data.vocab import Vocabulary
from nlgkit.models.base import Inputs, ModelContext
from nlgkit.models.trainable_encoder import WithTrainableEncoderTop
from nlgkit.tasks.base import Task, TaskData
from nlgkit.vision.cache import extract_features, gather_features
from nlgkit.vision.encoders import EncoderConfig, build_encoder, encoder_dims

SPLITS = ("train", "valid", "test")
ImageSource = tuple[Tensor, Tensor]  # one image's spatial (L, C) and pooled (P,) features


@dataclass(frozen=True)
class CaptioningPrepareConfig(PrepareConfig):
    """``[data.prepare]`` of captioning: the options of ``nlgkit prepare flickr8k|coco|flickr30k|captions|multi30k``
    (``multi30k``: task 2, five captions per image)."""

    corpus: Literal["flickr8k", "coco", "flickr30k", "captions", "multi30k", "none"] = "none"
    images: str = ""  # the images directory ("" = the corpus's default location, if it has one)
    captions: str = ""  # Flickr8k.token.txt, the CSV, or COCO annotation files (comma-separated)
    karpathy: str = ""  # Karpathy's dataset_{coco,flickr30k}.json with the papers' splits


@dataclass(frozen=True)
class CaptioningDataConfig(DataConfig):
    """``[data]`` of captioning: captions in ``tgt_lang``, one record per image."""

    prepare: CaptioningPrepareConfig = field(default_factory=CaptioningPrepareConfig)


@dataclass(frozen=True)
class CaptioningConfig(PluginConfig):
    """``[task] type = "captioning"`` with ``[task.encoder]`` naming the CNN whose features the model reads."""

    data_config: ClassVar[DataSection] = CaptioningDataConfig
    type: str = "captioning"
    metric: Literal["cider", "bleu4"] = "cider"  # selects checkpoints, drives the schedule and early stopping
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    features_dir: str = ""  # feature cache; "" = DATA_DIR/features
    extract_batch_size: int = 32

    def validate(self, source: str, run_config: Any) -> None:
        self.encoder.validate(source)
        if self.extract_batch_size <= 0:
            raise ConfigError(f"{source}: task.extract_batch_size = {self.extract_batch_size}: must be positive")


@dataclass
class CaptionExamples(Examples):
    """(image row, caption) pairs over a table of image features."""

    image_rows: list[int]
    captions: list[list[int]]
    spatial: Tensor  # (N, L, C) float16, one row per image
    pooled: Tensor  # (N, P) float16

    def __len__(self) -> int:
        return len(self.captions)

    @property
    def target_lengths(self) -> list[int]:
        return [len(c) for c in self.captions]

    @property
    def source_lengths(self) -> list[int]:
        return [0] * len(self.captions)


def read_records(path: Path, limit: int = 0) -> list[dict[str, Any]]:
    """The image records of one split file (the first ``limit`` images when limit > 0)."""
    if not path.is_file():
        raise DataError(f"{path}: file not found (run `nlgkit prepare` first)")
    records: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if limit and len(records) >= limit:
                    break
                records.append(_caption_record(line, f"{path}: line {number}"))
    except UnicodeDecodeError:
        raise DataError(invalid_utf8(path)) from None
    return records


def _caption_record(line: str, where: str) -> dict[str, Any]:
    """One line of a split file as an image record, checked."""
    try:
        record = json.loads(line)
        image, tokens, refs = record["image"], record["tokens"], record["refs"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"{where}: not a caption record ({exc})") from None
    if not isinstance(image, str) or not isinstance(tokens, list) or not isinstance(refs, list):
        raise DataError(f"{where}: 'image' must be a string, 'tokens' and 'refs' lists")
    return dict(record)


@TASKS.register("captioning", CaptioningConfig)
class CaptioningTask(Task):
    item_name = "image"
    @property
    def data(self) -> CaptioningDataConfig:
        return self.data_section(CaptioningDataConfig)

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.task_config: CaptioningConfig = config.task
        self.metric = self.task_config.metric

    @property
    def languages(self) -> tuple[str, ...]:
        return (self.data.tgt_lang,)

    def prepare(self, data_dir: Path, log: Callable[[str], None]) -> None:

        data = self.data
        prep = data.prepare
        log(f"preparing {data_dir} ({prep.corpus} captions)")
        prepare_captions(data_dir, prep.corpus, images=prep.images, captions=prep.captions, karpathy=prep.karpathy,
                         source=prep.source, lang=data.tgt_lang, min_freq=prep.min_freq, max_len=prep.max_len,
                         log=log)

    # -- data ---------------------------------------------------------------------------------------------
    def load_data(self, data_dir: Path, vocabs: dict[str, Vocabulary], device: torch.device) -> TaskData:
        cfg = self.data
        vocab = vocabs[self.target_lang]
        manifest = read_json(data_dir / "manifest.json")
        train = read_records(data_dir / "train.jsonl", cfg.train_limit)
        valid = read_records(data_dir / "valid.jsonl", cfg.valid_limit)
        if not train:
            raise DataError(f"{data_dir / 'train.jsonl'}: no training images")
        if not valid:
            raise DataError(f"{data_dir / 'valid.jsonl'}: no validation images")
        names = [r["image"] for r in train] + [r["image"] for r in valid]
        spatial, pooled = self.features(data_dir, manifest, names, device)
        offset = len(train)
        valid_sources = [(spatial[offset + i], pooled[offset + i]) for i in range(len(valid))]
        return TaskData(data_dir, manifest, vocabs, self._examples(train, 0, vocab, spatial, pooled),
                        self._examples(valid, offset, vocab, spatial, pooled), valid_sources,
                        [list(r["refs"]) for r in valid])

    def features(self, data_dir: Path, manifest: dict[str, Any], names: list[str],
                 device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
        """Cached features of ``names`` in that order: spatial (N, L, C) and pooled (N, P), float16.

        The cache holds every image of the data directory, so test images are extracted with the rest.
        """

        images_dir = Path(manifest.get("images_dir", ""))
        if not images_dir.is_dir():
            raise DataError(f"{data_dir / 'manifest.json'}: images_dir {str(images_dir)!r} is not a directory")
        every = sorted({r["image"] for split in SPLITS for r in read_records(data_dir / f"{split}.jsonl")})
        cache_dir = Path(self.task_config.features_dir or data_dir / "features")
        cache = extract_features(self.task_config.encoder, images_dir, every, cache_dir,
                                 batch_size=self.task_config.extract_batch_size, device=device, progress=True)
        return cache.rows(names, dtype=torch.float16)

    def _examples(self, records: list[dict[str, Any]], offset: int, vocab: Vocabulary, spatial: Tensor,
                  pooled: Tensor) -> CaptionExamples:
        rows, captions = [], []
        for i, record in enumerate(records):
            for caption in record["tokens"]:
                rows.append(offset + i)
                captions.append(vocab.encode(caption.split()))
        return CaptionExamples(rows, captions, spatial, pooled)

    def model_context(self, vocabs: dict[str, Vocabulary]) -> ModelContext:
        vocab = vocabs[self.target_lang]
        channels, regions, pooled = encoder_dims(self.task_config.encoder)
        return ModelContext(task="captioning", tgt_vocab_size=len(vocab), pad_index=vocab.pad_index,
                            inputs={"image_channels": channels, "image_regions": regions,
                                    "image_pooled_dim": pooled},
                            finish=self._with_trainable_top if self.task_config.encoder.fine_tune_top else None)

    def _with_trainable_top(self, model: Any) -> Any:
        """``fine_tune_top``: the model reads the cached map below the encoder's last block, which it trains."""

        return WithTrainableEncoderTop(model, build_encoder(self.task_config.encoder).trainable_top())

    # -- batches ------------------------------------------------------------------------------------------
    def collate(self, examples: Any, indices: list[int], vocab: Vocabulary) -> Batch:
        assert isinstance(examples, CaptionExamples)
        prev, gold, num_tokens = target_tensors([examples.captions[i] for i in indices], vocab)
        inputs = gather_features(examples.spatial, examples.pooled, [examples.image_rows[i] for i in indices])
        return Batch(inputs, prev, gold, list(indices), num_tokens)

    def source_length(self, source: ImageSource) -> int:
        return 0

    def source_inputs(self, sources: Sequence[ImageSource], vocab: Vocabulary) -> tuple[Inputs, Tensor]:
        spatial = torch.stack([s[0] for s in sources]).float()  # (B, L, C)
        pooled = torch.stack([s[1] for s in sources]).float()  # (B, P)
        return {"image_spatial": spatial, "image_pooled": pooled}, torch.zeros(len(sources), dtype=torch.long)

    # -- splits for generation and evaluation ---------------------------------------------------------------
    def split_sources(self, data_dir: Path, split: str, vocabs: dict[str, Vocabulary],
                      device: torch.device | str = "cpu") -> list[Any]:
        """Each image of the split as its cached (spatial, pooled) features."""
        data_dir = Path(data_dir)
        names = [r["image"] for r in read_records(data_dir / f"{split}.jsonl")]
        spatial, pooled = self.features(data_dir, read_json(data_dir / "manifest.json"), names, device)
        return [(spatial[i], pooled[i]) for i in range(len(names))]

    def reference_files(self, data_dir: Path, split: str) -> list[Path]:
        return [Path(data_dir) / f"{split}.jsonl"]

    def split_references(self, data_dir: Path, split: str) -> list[list[str]]:
        """Every reference caption of each image."""
        return [list(r["refs"]) for r in read_records(self.reference_files(data_dir, split)[0])]

    def split_target_tokens(self, data_dir: Path, split: str) -> list[list[list[str]]]:
        """Every caption of each image, tokenised as ``prepare`` made the training captions."""
        records = read_records(self.reference_files(data_dir, split)[0])
        return [[caption.split() for caption in record["tokens"]] for record in records]

    # -- text and scores ----------------------------------------------------------------------------------
    def detokenizer(self, assets_dir: Path) -> Callable[[list[str]], str]:
        return " ".join

    def target_tokenizer(self, assets_dir: Path) -> Callable[[str], list[str]]:
        return basic_tokenize

    def score(self, texts: list[str], refs: list[list[str]]) -> dict[str, float]:
        # lazy: every run loads every task's module (the plug-in registry), and a translation run must not need
        # pycocoevalcap (101 MB of jars: a GPU machine reached by copying the work tree cannot take it along)
        from nlgkit.metrics.captions import caption_scores

        scores = caption_scores(texts, refs, meteor=False)["scores"]
        return {"bleu4": scores["BLEU-4"]["score"], "cider": scores["CIDEr"]["score"],
                "rouge_l": scores["ROUGE-L"]["score"]}
