"""Plain tutorial-style models that speed/bench.py measures attnmt against, holding attnmt's weights."""
