"""Argos Translate packages (.argosmodel): `attnmt export --format argos` (export.py) and `attnmt
import X.argosmodel` (importing.py); the format (package.py), CTranslate2's model.bin (model_bin.py),
the sentence splitter a package carries (splitter.py, onnx_proto.py). docs/interop.md, "Argos
Translate packages"."""
