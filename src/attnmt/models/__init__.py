"""Sequence-to-sequence models: the Bahdanau RNN (rnn.py) and the Transformer (transformer.py)."""
