"""Quality measurements that are not BLEU: language identification and attention alignments."""
