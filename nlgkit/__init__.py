"""nlgkit: output layers of text generators — learned, tied, fixed random, Hadamard, joint, continuous."""

__version__ = "0.1.0"
