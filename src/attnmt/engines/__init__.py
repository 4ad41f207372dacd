"""Inference engines other than the native PyTorch search (decoding.NativeEngine):
ctranslate2.py exports a Transformer run to CTranslate2 and decodes with it."""
