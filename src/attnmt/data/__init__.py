"""The data path: corpus -> tokenizer -> vocab -> batches."""
