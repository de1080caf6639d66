"""Reading photographs safely: every failure is one message naming the file, every odd mode becomes RGB.

Users point ``caption`` and ``prepare`` at whatever their disk holds, so a missing, empty, truncated or
corrupt file, a non-image and a decompression bomb must each give a clear error (and never a traceback),
while grayscale, CMYK, palette, 16-bit, alpha and EXIF-rotated pictures must simply work.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

from nlgkit.core.errors import DataError

# Pillow's own limit (~89 Mpx) warns and only fails at twice the size; 2 × 89 Mpx RGB is 0.5 GB of memory.
# We fail at the limit itself: no photograph a captioner is meant for comes close.
MAX_PIXELS = Image.MAX_IMAGE_PIXELS or 89_478_485


class ImageError(DataError):
    """An image file cannot be used; the message names the file and the reason."""


def load_image(path: str | Path, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """The picture at ``path`` as an upright 8-bit RGB image (alpha composited on white)."""
    path = Path(path)
    try:
        _check_file(path)
    except OSError as exc:  # a name too long for the file system, a folder that cannot be searched: this image's error
        raise ImageError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as opened:
                width, height = opened.size
                if width * height > max_pixels:
                    raise ImageError(f"{path}: {width}×{height} pixels exceeds the limit of {max_pixels:,} "
                                     f"(decompression bomb?)")
                opened.load()
                image = ImageOps.exif_transpose(opened) or opened
                return to_rgb(image)
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageError(f"{path}: refused as a decompression bomb ({exc})") from None
    except UnidentifiedImageError:
        raise ImageError(f"{path}: not an image (unrecognised format)") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:  # truncated / corrupt data
        raise ImageError(f"{path}: unreadable image ({' '.join(str(exc).split()) or type(exc).__name__})") \
            from None


def _check_file(path: Path) -> None:
    """An ImageError unless ``path`` is a non-empty regular file."""
    if not path.exists():
        if path.is_symlink():  # (exists() follows the link: a dangling one, or a loop of links, is there)
            raise ImageError(f"{path}: a link to nothing (its target is missing, or the links loop)")
        raise ImageError(f"{path}: file not found")
    if not path.is_file():
        raise ImageError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise ImageError(f"{path}: empty file")


def to_rgb(image: Image.Image) -> Image.Image:
    """Any Pillow mode → 8-bit RGB: 16/32-bit gray rescaled, palette and alpha composited on white."""
    mode = image.mode
    if mode == "RGB":
        return image
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        import numpy as np

        array = np.asarray(image, dtype=np.float64)
        high = array.max() if array.size else 0.0
        scaled = (array / high * 255.0) if high > 0 else array
        image = Image.fromarray(scaled.clip(0, 255).astype(np.uint8), mode="L")
    elif mode == "F":
        import numpy as np

        array = np.asarray(image, dtype=np.float64)
        low, high = (array.min(), array.max()) if array.size else (0.0, 0.0)
        scaled = (array - low) / (high - low) * 255.0 if high > low else array * 0
        image = Image.fromarray(scaled.clip(0, 255).astype(np.uint8), mode="L")
    if image.mode == "P":
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA", "La", "RGBa"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")
