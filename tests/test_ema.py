"""The weights' moving average (``train.ema_decay``): the formula, the swap in and out, and a run that validates and
keeps the average as best while the optimizer goes on from the raw weights, resumable to the same state."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import nlgkit_command, tiny_recipe
from safetensors.torch import load_file

from nlgkit.core.errors import ConfigError
from nlgkit.core.recipes import load_recipe
from nlgkit.train.ema import WeightAverage


def _model() -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
    model[1].bias.requires_grad_(False)  # frozen: not averaged
    model.register_buffer("fixed", torch.ones(2))
    return model


def test_the_average_follows_the_formula_and_skips_what_does_not_train() -> None:
    torch.manual_seed(0)
    model = _model()
    average = WeightAverage(model, decay=0.5)
    assert average.names == ["0.weight", "0.bias", "1.weight"]
    start = model[0].weight.detach().clone()
    expected = start.clone()
    for update in (1, 2, 3):
        with torch.no_grad():
            model[0].weight.add_(float(update))
        decay = min(0.5, (1 + update) / (10 + update))
        expected = decay * expected + (1 - decay) * model[0].weight.detach()
        average.update(model, update)
    assert average.decay_at(1) == pytest.approx(2 / 11) and average.decay_at(1000) == 0.5
    assert torch.allclose(average.shadow[0], expected)
    assert not torch.allclose(expected, model[0].weight)


def test_applied_swaps_the_average_in_and_restores_the_weights_even_on_an_error() -> None:
    model = _model()
    average = WeightAverage(model, decay=0.9)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    raw = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(RuntimeError), average.applied(model):
        assert torch.equal(model[0].weight, average.shadow[0])
        assert torch.equal(model[1].bias, raw["1.bias"])  # frozen: untouched
        raise RuntimeError("validation failed")
    assert all(torch.equal(v, raw[k]) for k, v in model.state_dict().items())
    fresh = WeightAverage(model, decay=0.9)
    fresh.load_state_dict(average.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(fresh.shadow, average.shadow, strict=True))


def _weights(run: Path, which: str) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / which / "model.safetensors"))


def test_a_run_keeps_the_average_as_best_trains_on_as_without_it_and_resumes(tmp_path: Path,
                                                                          paper: tuple[Path, dict]) -> None:
    """One epoch of 12 updates with decay 0.9: the raw weights end where a run without averaging ends (averaging
    never feeds back into training); best holds the average (the shadow kept in last's state), the fixed head as it
    was; stopped after 5 updates and resumed, the run ends with the same raw weights, average and best."""
    def run(name: str, *settings: str, resume: bool = False) -> Path:
        recipe = tiny_recipe(tmp_path, paper[0], tmp_path / name, max_epochs=1, valid_limit=10)
        argv = ["train", str(recipe), "--device", "cpu", *(["--resume"] if resume else [])]
        for setting in settings:
            argv += ["--set", setting]
        nlgkit_command(argv)
        return tmp_path / name

    plain, averaged = run("plain"), run("averaged", "train.ema_decay=0.9")
    run("resumed", "train.ema_decay=0.9", "train.max_updates=5")
    resumed = run("resumed", "train.ema_decay=0.9", resume=True)
    raw, best = _weights(averaged, "last"), _weights(averaged, "best")
    assert all(torch.equal(raw[k], v) for k, v in _weights(plain, "last").items())
    state = torch.load(averaged / "checkpoints" / "last" / "train_state.pt", weights_only=True)
    shadow = state["ema"]["shadow"]
    assert shadow and all(torch.equal(best[k], v) for k, v in shadow.items())
    assert all(torch.equal(best[k], raw[k]) for k in best if k not in shadow)  # the fixed head's buffers
    assert max(float((best[k] - raw[k]).abs().max()) for k in shadow) > 1e-3
    for which in ("last", "best"):
        assert all(torch.equal(v, _weights(averaged, which)[k]) for k, v in _weights(resumed, which).items())
    resumed_state = torch.load(resumed / "checkpoints" / "last" / "train_state.pt", weights_only=True)
    assert all(torch.equal(v, shadow[k]) for k, v in resumed_state["ema"]["shadow"].items())


def test_a_decay_outside_zero_to_one_is_named(tmp_path: Path, paper: tuple[Path, dict]) -> None:
    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "run")
    with pytest.raises(ConfigError, match=r"train.ema_decay = 1.0: must be in \[0, 1\)"):
        load_recipe(recipe, ["train.ema_decay=1.0"])
