"""``train.compile`` on every model: a recurrent decoder gets the modules its step loop calls compiled, each
on its own, and keeps its loop in Python; a model without such a loop gets its whole training step compiled.
(Compiling the whole step of a recurrent model unrolled the loop for every target length: a tiny RNN had not
finished its first epoch after 10 minutes. test_slow trains both ways to the same weights.) Nothing here
compiles anything: ``torch.compile`` works lazily, at the first call."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from nlgkit.core.config import config_from_dict
from nlgkit.models import MODELS
from nlgkit.models.base import Generator, ModelContext
from nlgkit.runs.build import build_model, placeholder_vocabulary
from nlgkit.train.compilation import compile_training
from nlgkit.train.objective import TrainingObjective

RNN_SIZES = {"embedding_dim": 8, "encoder_dim": 6, "decoder_dim": 10, "attention_dim": 7, "pre_output_dim": 9}
SMALL: dict[str, dict[str, Any]] = {
    "rnn": RNN_SIZES,
    "doubly_attentive": RNN_SIZES,
    "imagination": {**RNN_SIZES, "latent_dim": 16},
    "vag_nmt": {**RNN_SIZES, "visual_attention_dim": 5, "shared_dim": 8},
    "lstm_luong": {"embedding_dim": 8, "hidden_dim": 12, "layers": 2},
    "show_attend_tell": {"embedding_dim": 8, "hidden_dim": 9, "attention_dim": 7},
    "show_tell": {"embedding_dim": 8, "hidden_dim": 9},
    "transformer": {"encoder_layers": 1, "decoder_layers": 1, "dim": 16, "ffn_dim": 24, "heads": 4},
    "convs2s": {"embedding_dim": 16, "encoder_layers": [[16, 3, 1]], "decoder_layers": [[16, 3, 1]],
                "output_dim": 16},
}
# the models whose teacher forcing loops over target steps in Python, and what the loop calls at every step
STEP_LOOPS = {"rnn": ("attention", "decoder"), "imagination": ("attention", "decoder"),
              "vag_nmt": ("attention", "decoder"), "doubly_attentive": ("attention", "image_attention", "decoder"),
              "lstm_luong": ("attention",), "show_attend_tell": ("cell",)}
V = 25


def build(name: str) -> Generator:
    torch.manual_seed(0)
    context = ModelContext(task="multimodal_translation", tgt_vocab_size=V, pad_index=1,
                           inputs={"src_vocab_size": 30, "image_channels": 6, "image_regions": 5,
                                   "image_pooled_dim": 12, "image_complete": 1})
    config = config_from_dict({"model": {"type": name, **SMALL[name]}, "head": {"type": "fixed"}})
    return build_model(config, context, placeholder_vocabulary(V))


def compiled(module: nn.Module) -> bool:
    """Whether ``module.compile()`` replaced its call in place."""
    return getattr(module, "_compiled_call_impl", None) is not None


def test_every_registered_model_is_covered() -> None:
    assert set(MODELS.names()) == set(SMALL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_compile_takes_the_step_modules_of_a_loop_and_the_whole_step_otherwise(name: str) -> None:
    model = build(name)
    objective = TrainingObjective(model)
    result = compile_training(objective, model)
    if name in STEP_LOOPS:
        expected = [getattr(model, attribute) for attribute in STEP_LOOPS[name]]
        assert result is objective
        assert list(model.step_modules() or ()) == expected
        assert all(compiled(part) for part in expected)
        others = [m for m in model.modules() if all(m is not part for part in expected)]
        assert others and not any(compiled(m) for m in others)
    else:
        assert model.step_modules() is None
        assert isinstance(result, torch._dynamo.eval_frame.OptimizedModule) and result._orig_mod is objective
        assert not any(compiled(m) for m in model.modules())
