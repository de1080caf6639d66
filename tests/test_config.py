"""Recipes: unknown keys, wrong types and bad overrides are one-line errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlgkit.core.config import RunConfig, config_from_dict, to_dict
from nlgkit.core.errors import ConfigError
from nlgkit.core.recipes import load_recipe

RECIPES = Path(__file__).resolve().parents[1] / "recipes"


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_recipe_loads_and_round_trips(path: Path) -> None:
    config = load_recipe(path)
    assert config_from_dict(to_dict(config)) == config


def test_paper_recipes_use_the_papers_settings() -> None:
    fixed = load_recipe(RECIPES / "multi30k_fixed.toml")
    assert (fixed.head.type, fixed.head.init, fixed.head.bias) == ("fixed", "l2", "fixed")
    assert (fixed.train.lr, fixed.train.batch_size, fixed.train.lr_decay) == (0.001, 128, 0.8)
    assert (fixed.train.lr_patience, fixed.train.early_stop_patience) == (8, 20)
    assert fixed.data.prepare.min_freq == 2 and fixed.data.prepare.lowercase


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text,expected", [
    ("[train]\nlrr = 0.1\n", "unknown key 'train.lrr' (did you mean 'train.lr'?)"),
    ("[train]\nlr = \"fast\"\n", "train.lr = 'fast': expected a number"),
    ("[train]\nbatch_size = 1.5\n", "train.batch_size = 1.5: expected an integer"),
    ("[head]\ntype = \"fixd\"\n", "unknown head 'fixd' (did you mean 'fixed'?)"),
    ("[head]\ntype = \"fixed\"\ninit = \"gauss\"\n", "head.init = 'gauss': expected one of"),
    ("[head]\ntype = \"learned\"\ninit = \"l2\"\n",
     "unknown key 'head.init': the 'learned' head has no such option (heads that have it: fixed)"),
    ("[head]\ntype = \"fixed\"\nscael = 2.0\n", "unknown key 'head.scael' (did you mean 'head.scale'?)"),  # a typo
    ("[model]\ntype = \"rnn\"\ncell = \"gru\"\nhiden = 3\n", "unknown key 'model.hiden'"),
    ("[nonsense]\n", "unknown key 'nonsense'"),
    ("[train\n", "invalid TOML"),
    ("[train]\nlr = -1.0\n", "train.lr = -1.0: must be positive"),
    ("[train]\nlr = nan\n", "train.lr = nan: expected a finite number"),
    ("[train]\nlr = inf\n", "train.lr = inf: expected a finite number"),
    ("[head]\ntype = \"fixed\"\nscale = -inf\n", "head.scale = -inf: expected a finite number"),
    ("[train]\nadam_betas = [0.9, nan]\n", "train.adam_betas[1] = nan: expected a finite number"),
    ("[search]\nno_repeat_ngram_size = -3\n", "search.no_repeat_ngram_size = -3: must be 0 or positive"),
    ("[search]\nmin_len = -1\n", "search.min_len = -1: must be 0 or positive"),
    ("[search]\nmax_len_a = -1.5\n", "search.max_len_a = -1.5: must be 0 or positive"),
    ("[train]\nlog_every = 0\n", "train.log_every = 0: must be positive"),  # (an update % 0 mid-run)
    ("[train]\nmax_updates = -3\n", "train.max_updates = -3: must be 0 or positive"),
    ("[train]\nmax_minutes = -1.0\n", "train.max_minutes = -1.0: must be 0 or positive"),
    ("[train]\nclip_norm = -1.0\n", "train.clip_norm = -1.0: must be 0 or positive"),
    ("[train]\nweight_decay = -0.1\n", "train.weight_decay = -0.1: must be 0 or positive"),
    ("[train]\nnum_threads = -2\n", "train.num_threads = -2: must be 0 or positive"),
    ("[data]\ntrain_limit = -5\n", "data.train_limit = -5: must be 0 or positive"),
    ("[data]\nvalid_limit = -1\n", "data.valid_limit = -1: must be 0 or positive"),
    ("[model]\ntype = 5\n", "model.type = 5: expected a name in quotes (one of: "),  # (was: "is required")
    ("[model]\ncell = \"gru\"\n", "model.type is required (one of: "),
])
def test_bad_recipes_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_recipe(write(tmp_path, text))
    message = str(info.value)
    assert expected in message and str(tmp_path / "r.toml") in message and "\n" not in message


def test_overrides_are_toml_values_and_type_checked(tmp_path: Path) -> None:
    path = write(tmp_path, "[head]\ntype = \"fixed\"\n")
    config = load_recipe(path, ["train.lr=0.5", "head.init=uniform", "head.scale=3", "run.dir='x y'"])
    assert config.train.lr == 0.5 and config.head.init == "uniform" and config.head.scale == 3.0
    assert config.run.dir == "x y"
    with pytest.raises(ConfigError, match="train.batch_size = 'big': expected an integer"):
        load_recipe(path, ["train.batch_size=big"])
    with pytest.raises(ConfigError, match="expected section.key=value"):
        load_recipe(path, ["train.lr"])


def test_errors_from_an_override_name_the_override(tmp_path: Path) -> None:
    """The file does not hold a key that --set misspelt: the error says which --set brought it."""
    path = write(tmp_path, "[head]\ntype = \"fixed\"\n[train]\nlr = 0.5\n")
    cases = {"train.nosuch=3": "unknown key 'train.nosuch'", "nosuch.key=1": "unknown key 'nosuch'",
             "train.lr=-1": "train.lr = -1.0: must be positive", "head.scale=x": "head.scale = 'x': expected a number"}
    for override, reason in cases.items():
        with pytest.raises(ConfigError) as info:
            load_recipe(path, ["train.seed=4", override])
        assert str(info.value) == f"{path} with --set {override}: {reason}"
    bad_file = write(tmp_path, "[train]\nnosuch = 1\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(bad_file, ["train.lr=0.1"])  # the file's own mistake stays the file's
    assert str(info.value) == f"{bad_file}: unknown key 'train.nosuch'"


def test_an_override_into_a_recipe_key_that_is_no_table_names_the_key_and_the_recipe(tmp_path: Path) -> None:
    """The recipe's ``train = 5`` was blamed on the --set alone ("'train' is not a table")."""
    path = write(tmp_path, "train = 5\n[model]\ntype = \"rnn\"\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(path, ["train.num_threads=1"])
    assert str(info.value) == f"--set 'train.num_threads=1': train = 5 in {path}, not a table"


def test_missing_keys_take_defaults_so_old_configs_load() -> None:
    old = {"head": {"type": "fixed"}, "train": {"lr": 0.01}}
    config = config_from_dict(old)
    assert config.train.lr == 0.01 and config.train.batch_size == RunConfig().train.batch_size
    assert config.head.init == "l2"


def test_missing_recipe_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="recipe not found"):
        load_recipe(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="a directory, not a recipe"):  # (was "recipe not found")
        load_recipe(tmp_path)
