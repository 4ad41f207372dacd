"""attnmt's own speed: training, decoding, attention, ranks against threads, serving."""
