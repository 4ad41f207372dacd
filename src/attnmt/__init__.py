"""attnmt: attention-based neural machine translation, correct, readable and fast."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attnmt")  # the one place it is written is pyproject.toml
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["Translator", "__version__"]


def __getattr__(name):
    # Lazy: `import attnmt` stays cheap; torch loads only when a model is needed.
    if name == "Translator":
        from attnmt.translator import Translator

        return Translator
    raise AttributeError(f"module 'attnmt' has no attribute {name!r}")
