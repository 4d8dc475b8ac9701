"""convs2s: the tested helper package of the Convolutional Sequence to Sequence Learning course."""

__version__ = "0.1.0"

from convs2s import config  # noqa: E402,F401
