"""Multimodal translation: a source sentence and the image it describes in, its translation out (BLEU).

The data directory is a Multi30K translation directory with ``{split}.images`` beside the token files
(``nlgkit prepare multi30k --images DIR``, :mod:`nlgkit.data.multimodal`). The CNN runs once per image into
the same feature cache captioning uses; a batch carries the text inputs translation models read (``src``,
``src_lengths``) plus ``image_spatial`` (B, L, C), ``image_pooled`` (B, P) and ``image_mask`` (B,): 1 where
the pair has an image, 0 where it has none (zeros in its rows). So text-only models train on this task
unchanged (the baseline on the same sentences), IMAGINATION trains on every pair with its image loss on the
covered ones, and models that read the image at test time ask for a directory where every pair has one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from nlgkit.core.config import DataSection
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import read_json, read_lines
from nlgkit.core.registry import TASKS, PluginConfig
from nlgkit.data.batching import Batch, ParallelData, collate, pad_sources
from nlgkit.data.multimodal import IMAGES_SUFFIX, prepare_multimodal_multi30k
from nlgkit.data.vocab import Vocabulary
from nlgkit.models.base import Inputs, ModelContext
from nlgkit.tasks.base import TaskData, TextInput
from nlgkit.tasks.translation import TranslationDataConfig, TranslationPrepareConfig, TranslationTask
from nlgkit.vision.cache import extract_features, gather_features
from nlgkit.vision.encoders import EncoderConfig, build_encoder, encoder_dims
from nlgkit.vision.images import load_image


@dataclass(frozen=True)
class MultimodalPrepareConfig(TranslationPrepareConfig):
    """``[data.prepare]``: translation's options plus the images (``nlgkit prepare multi30k --images``)."""

    images: str = ""  # the directory holding the Flickr30K (or Flickr8k) photographs
    covered_only: bool = False  # keep only the pairs whose image is in ``images``, in every split


@dataclass(frozen=True)
class MultimodalDataConfig(TranslationDataConfig):
    dir: str = "data/multi30k_images_en-de"
    src_lang: str = "en"
    tgt_lang: str = "de"
    prepare: MultimodalPrepareConfig = field(default_factory=MultimodalPrepareConfig)


@dataclass(frozen=True)
class MultimodalTranslationConfig(PluginConfig):
    """``[task] type = "multimodal_translation"`` with ``[task.encoder]`` naming the CNN of the features."""

    data_config: ClassVar[DataSection] = MultimodalDataConfig
    type: str = "multimodal_translation"
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    features_dir: str = ""  # feature cache; "" = DATA_DIR/features
    extract_batch_size: int = 32

    def validate(self, source: str, run_config: Any) -> None:
        self.encoder.validate(source)
        if self.encoder.fine_tune_top:
            raise ConfigError(f"{source}: task.encoder.fine_tune_top: multimodal translation reads cached "
                              "features only")
        if self.extract_batch_size <= 0:
            raise ConfigError(f"{source}: task.extract_batch_size = {self.extract_batch_size}: must be positive")
        data = run_config.data
        if data.src_lang == data.tgt_lang:
            raise ConfigError(f"{source}: data.src_lang and data.tgt_lang are both {data.src_lang!r}")


# One source: token ids, the image's spatial (L, C) and pooled (P,) features, and 1.0 / 0.0 (has an image).
MultimodalSource = tuple[list[int], Tensor, Tensor, float]


@dataclass
class MultimodalExamples(ParallelData):
    """Sentence pairs with a row of the feature table each (the last row: zeros, for pairs without image)."""

    image_rows: list[int] = field(default_factory=list)
    spatial: Tensor = field(default_factory=lambda: torch.zeros(1, 1, 1))  # (N + 1, L, C) float16
    pooled: Tensor = field(default_factory=lambda: torch.zeros(1, 1))  # (N + 1, P) float16
    has_image: list[bool] = field(default_factory=list)


@TASKS.register("multimodal_translation", MultimodalTranslationConfig)
class MultimodalTranslationTask(TranslationTask):
    item_name = "sentence"

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.task_config: MultimodalTranslationConfig = config.task

    @property
    def data(self) -> MultimodalDataConfig:
        return self.data_section(MultimodalDataConfig)

    def prepare(self, data_dir: Path, log: Callable[[str], None]) -> None:
        cfg = self.data
        prep = cfg.prepare
        if prep.corpus != "multi30k":
            raise ConfigError(f"data.prepare.corpus = {prep.corpus!r}: multimodal translation prepares "
                              "'multi30k' (or 'none' for a directory made with `nlgkit prepare multi30k --images`)")
        log(f"preparing {data_dir} from Multi30K ({cfg.src_lang}-{cfg.tgt_lang}) with images from {prep.images}")
        prepare_multimodal_multi30k(data_dir, cfg.src_lang, cfg.tgt_lang, prep.images,
                                    covered_only=prep.covered_only, source=prep.source, tokenizer=prep.tokenizer,
                                    lowercase=prep.lowercase, min_freq=prep.min_freq, max_len=prep.max_len,
                                    subword=prep.subword, log=log)

    # -- data ---------------------------------------------------------------------------------------------
    def load_data(self, data_dir: Path, vocabs: dict[str, Vocabulary], device: torch.device) -> TaskData:
        text = super().load_data(data_dir, vocabs, device)
        assert isinstance(text.train, ParallelData) and isinstance(text.valid, ParallelData)
        images = {}
        for split, examples in (("train", text.train), ("valid", text.valid)):
            names = self.split_images(data_dir, split)  # the whole file: a limit keeps the first lines of one that fits
            if len(names) != examples.lines_in_files:
                raise DataError(f"{data_dir / f'{split}.{IMAGES_SUFFIX}'}: {len(names)} lines for "
                                f"{examples.lines_in_files} sentence pairs")
            images[split] = names[: len(examples)]
        spatial, pooled, rows = self.image_table(data_dir, text.manifest, images["train"] + images["valid"],
                                                 device)
        n_train = len(images["train"])
        train = self._examples(text.train, rows[:n_train], spatial, pooled)
        valid = self._examples(text.valid, rows[n_train:], spatial, pooled)
        sources = self._sources(valid.src, rows[n_train:], spatial, pooled)
        return TaskData(data_dir, text.manifest, vocabs, train, valid, sources, text.valid_refs)

    def split_images(self, data_dir: Path, split: str) -> list[str]:
        """The image file of each line of ``split`` ("" where the pair has none)."""
        path = Path(data_dir) / f"{split}.{IMAGES_SUFFIX}"
        if not path.is_file():
            raise DataError(f"{path}: file not found (prepare the data with `nlgkit prepare multi30k --images DIR`)")
        return read_lines(path)

    def image_table(self, data_dir: Path, manifest: dict[str, Any], names: list[str],
                    device: torch.device | str = "cpu") -> tuple[Tensor, Tensor, list[int]]:
        """Features of the distinct images of ``names`` (spatial (N + 1, L, C), pooled (N + 1, P), float16; the
        last row zeros) and each name's row (the zero row for "")."""
        images_dir = Path(manifest.get("images_dir", ""))
        present = sorted({name for name in names if name})
        channels, regions, pooled_dim = encoder_dims(self.task_config.encoder)
        if not present:
            zeros = torch.zeros(1, regions, channels, dtype=torch.float16)
            return zeros, torch.zeros(1, pooled_dim, dtype=torch.float16), [0] * len(names)
        every = sorted({name for split in ("train", "valid", "test") for name in self.split_images(data_dir, split)
                        if name})
        cache_dir = Path(self.task_config.features_dir or Path(data_dir) / "features")
        cache = extract_features(self.task_config.encoder, images_dir, every, cache_dir,
                                 batch_size=self.task_config.extract_batch_size, device=device, progress=True)
        spatial, pooled = cache.rows(present, dtype=torch.float16)
        spatial = torch.cat([spatial, spatial.new_zeros(1, *spatial.shape[1:])])
        pooled = torch.cat([pooled, pooled.new_zeros(1, pooled.size(1))])
        row_of = {name: i for i, name in enumerate(present)}
        return spatial, pooled, [row_of.get(name, len(present)) for name in names]

    @staticmethod
    def _examples(text: ParallelData, rows: list[int], spatial: Tensor, pooled: Tensor) -> MultimodalExamples:
        zero_row = spatial.size(0) - 1
        return MultimodalExamples(text.src, text.tgt, text.file_lines, image_rows=rows, spatial=spatial,
                                  pooled=pooled, has_image=[row != zero_row for row in rows])

    @staticmethod
    def _sources(sentences: Sequence[list[int]], rows: list[int], spatial: Tensor,
                 pooled: Tensor) -> list[MultimodalSource]:
        zero_row = spatial.size(0) - 1
        return [(ids, spatial[row], pooled[row], float(row != zero_row)) for ids, row in zip(sentences, rows)]

    def model_context(self, vocabs: dict[str, Vocabulary]) -> ModelContext:
        text = super().model_context(vocabs)
        channels, regions, pooled = encoder_dims(self.task_config.encoder)
        return ModelContext(task="multimodal_translation", tgt_vocab_size=text.tgt_vocab_size,
                            pad_index=text.pad_index,
                            inputs={**text.inputs, "image_channels": channels, "image_regions": regions,
                                    "image_pooled_dim": pooled, "image_complete": int(self._complete())})

    def _complete(self) -> bool:
        """Whether every pair of every split has its image (read from the prepared directory, when there)."""
        manifest_path = Path(self.data.dir) / "manifest.json"
        if not manifest_path.is_file():
            return self.data.prepare.covered_only
        manifest = read_json(manifest_path)
        coverage = manifest.get("image_coverage", {})
        return bool(manifest.get("covered_only")) or bool(coverage) and all(
            c["covered"] == c["lines"] for c in coverage.values())

    # -- batches ------------------------------------------------------------------------------------------
    def collate(self, examples: Any, indices: list[int], vocab: Vocabulary) -> Batch:
        if not isinstance(examples, MultimodalExamples):
            raise TypeError(f"multimodal translation batches MultimodalExamples, not {type(examples).__name__}")
        batch = collate(examples, indices, vocab)
        batch.inputs.update(gather_features(examples.spatial, examples.pooled, [examples.image_rows[i] for i in indices]),
                            image_mask=torch.tensor([float(examples.has_image[i]) for i in indices]))  # (B,)
        return batch

    def source_length(self, source: Any) -> int:  # a MultimodalSource
        return len(source[0])

    def source_inputs(self, sources: Sequence[Any], vocab: Vocabulary) -> tuple[Inputs, Tensor]:
        src, lengths = pad_sources([s[0] for s in sources], vocab.pad_index, vocab.eos_index)  # (B, S), (B,)
        return {"src": src, "src_lengths": lengths,
                "image_spatial": torch.stack([s[1] for s in sources]).float(),  # (B, L, C)
                "image_pooled": torch.stack([s[2] for s in sources]).float(),  # (B, P)
                "image_mask": torch.tensor([s[3] for s in sources])}, lengths

    # -- splits and raw input -------------------------------------------------------------------------------
    def split_sources(self, data_dir: Path, split: str, vocabs: dict[str, Vocabulary],
                      device: torch.device | str = "cpu") -> list[Any]:
        sentences = super().split_sources(data_dir, split, vocabs, device)
        names = self.split_images(data_dir, split)
        if len(names) != len(sentences):
            raise DataError(f"{Path(data_dir) / f'{split}.{IMAGES_SUFFIX}'}: {len(names)} lines for "
                            f"{len(sentences)} sentences")
        spatial, pooled, rows = self.image_table(data_dir, read_json(Path(data_dir) / "manifest.json"), names,
                                                 device)
        return self._sources(sentences, rows, spatial, pooled)

    def text_input(self, assets_dir: Path, vocabs: dict[str, Vocabulary]) -> TextInput:
        text = super().text_input(assets_dir, vocabs)
        encoders: list[Any] = []  # built on the first image only: text-only input never loads the CNN
        channels, regions, pooled_dim = encoder_dims(self.task_config.encoder)
        needs_image = bool(getattr(self.run_config.model, "needs_image", False))

        def encode(tokens: list[str]) -> MultimodalSource:
            if needs_image:
                raise DataError(f"model.type = {self.run_config.model.type!r} reads the image of each sentence: "
                                "give the images (--images FILE|DIR)")
            return (text.encode(tokens), torch.zeros(regions, channels), torch.zeros(pooled_dim), 0.0)

        def attach_image(tokens: list[str], image: Path) -> MultimodalSource:
            if not encoders:
                encoders.append(build_encoder(self.task_config.encoder).eval())
            encoder = encoders[0]
            with torch.no_grad():
                pixels = encoder.preprocess(load_image(image)).unsqueeze(0)
                spatial, pooled = encoder(pixels)
            return (text.encode(tokens), spatial[0].float(), pooled[0].float(), 1.0)

        return TextInput(text.tokenize, encode, attach_image)
