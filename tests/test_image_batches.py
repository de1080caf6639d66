"""Captioning and multimodal translation batch cached image features through one gathering
(:func:`nlgkit.vision.cache.gather_features`), so that a model reads the same inputs under either task."""

from __future__ import annotations

import torch

from nlgkit.data.vocab import Vocabulary
from nlgkit.tasks.captioning import CaptionExamples, CaptioningTask
from nlgkit.tasks.multimodal import MultimodalExamples, MultimodalTranslationTask
from nlgkit.vision.cache import gather_features


def test_both_tasks_gather_the_same_float32_rows_of_the_cached_tables() -> None:
    spatial = torch.arange(3 * 2 * 4, dtype=torch.float16).reshape(3, 2, 4)  # (N, L, C), as the cache keeps them
    pooled = torch.arange(3 * 5, dtype=torch.float16).reshape(3, 5)  # (N, P)
    gathered = gather_features(spatial, pooled, [2, 0, 2])
    assert set(gathered) == {"image_spatial", "image_pooled"}
    assert gathered["image_spatial"].dtype == gathered["image_pooled"].dtype == torch.float32
    torch.testing.assert_close(gathered["image_spatial"], spatial[[2, 0, 2]].float())
    torch.testing.assert_close(gathered["image_pooled"], pooled[[2, 0, 2]].float())

    vocab = Vocabulary.build({"a": 2, "b": 1})
    a, b = vocab.encode(["a", "b"])
    captions = CaptionExamples(image_rows=[1, 2, 0], captions=[[a], [b], [a, b]], spatial=spatial, pooled=pooled)
    captioned = CaptioningTask.collate(object.__new__(CaptioningTask), captions, [1, 2], vocab)
    pairs = MultimodalExamples(src=[[a], [b], [a, b]], tgt=[[b], [a], [b, a]], image_rows=[1, 2, 0], spatial=spatial,
                               pooled=pooled, has_image=[True, True, False])
    translated = MultimodalTranslationTask.collate(object.__new__(MultimodalTranslationTask), pairs, [1, 2], vocab)
    expected = gather_features(spatial, pooled, [2, 0])
    for batch in (captioned, translated):
        for name, value in expected.items():
            torch.testing.assert_close(batch.inputs[name], value)
    assert translated.inputs["image_mask"].tolist() == [1.0, 0.0]
