"""attnmt's benchmarks (not part of the attnmt package), grouped by purpose.

common.py    what every script shares: environment, timing, torch threads, the one report schema
speed/       attnmt's own speed: bench.py (training and decoding next to a tutorial-style
             reference), bench_decode.py (native vs CTranslate2), bench_attention.py,
             bench_distributed.py, compare_decode.py (before/after a change), serve_load.py,
             serve_models.py (memory and start-up per served model), ceiling.py (the machine's limit)
peers/       attnmt next to other toolkits: onmt_compare.py, plot_quality_per_update.py
quality/     langid_multi30k.py (/detect's identifier), alignment_toy.py (attention alignments),
             alignment_marian.py, constraints_multi30k.py, moses_before_bpe.py (subwords with and
             without Moses tokenization first)
gpu/         gpu_suite.sh / gpu_suite.py: every GPU figure in one command (docs/gpu.md)
references/  the plain tutorial-style RNN and Transformer that bench.py measures against

A package, so that scripts import one another as ``benchmarks.common`` and so on. Run a script
as a file (``benchmarks/speed/bench.py ...``, which puts the repository on sys.path itself) or
as a module from the repository root (``python -m benchmarks.speed.bench ...``).
"""
