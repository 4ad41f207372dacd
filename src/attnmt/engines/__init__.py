"""Inference engines: native.py (attnmt's own search over the PyTorch model, the reference) and
CTranslate2 (ctranslate2_export.py writes a Transformer run as a CTranslate2 model; ctranslate2.py
decodes with it)."""
