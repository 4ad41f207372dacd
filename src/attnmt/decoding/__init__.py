"""Decoding: raw sentences in, translations out, whatever the engine (engines/ holds the engines).

    options.py      DecodingOptions: how to decode, one checked value from every surface down to the search
    results.py      what engines return (TranslationResult, Alternative, ScoreResult) and the Engine protocol
    inputs.py       sources, translations, prefixes and constraints tokenized and cut
    alignment.py    what attention gives back: word alignment and <unk> replacement
    search.py       batched greedy, beam and sampling search over a model's decode_step
    hypotheses.py   what a search returns, and the beam searches' step records (BeamTrail)
    constraints.py  lexically constrained beam search (dynamic beam allocation)

Nothing is imported here: options, results, inputs and alignment need no torch, the searches do.
"""
