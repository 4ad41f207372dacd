"""attnmt: attention-based neural machine translation, correct, readable and fast."""

__version__ = "0.1.0"

__all__ = ["Translator", "__version__"]


def __getattr__(name):
    # Lazy: `import attnmt` stays cheap; torch loads only when a model is needed.
    if name == "Translator":
        from attnmt.translator import Translator

        return Translator
    raise AttributeError(f"module 'attnmt' has no attribute {name!r}")
