"""translator: English→Chinese neural machine translation, from raw pairs to a scored model.

The Python API is one class, loaded once and called as often as needed:

    from translator import Translator
    translator = Translator.from_run("runs/tatoeba-cpu")        # or .from_checkpoint(path)
    translator.translate(["Hello.", "How are you?"], beam=5)
"""

__version__ = "0.2.0"
__all__ = ["Translator", "__version__"]


def __getattr__(name: str):
    """`Translator` is imported on first use: commands without a model skip PyTorch."""
    if name == "Translator":
        from translator.inference.text import Translator

        return Translator
    raise AttributeError(f"module 'translator' has no attribute {name!r}")
