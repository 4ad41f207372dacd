"""`attnmt prepare CONFIG [--set k=v ...] [--workers N]`: the config's training data tokenized and
written once into the cache ($ATTNMT_CACHE/prepared), where `attnmt train` finds it. Under
torchrun every rank prepares a part (data.prepare); rank 0 prints what was prepared."""

from __future__ import annotations

import argparse
import json

from attnmt.bounds import PREPARE_WORKERS
from attnmt.commands.arguments import bounded
from attnmt.config import load_config, packaged_configs

HELP = "tokenize a config's training data once, into the cache (ATTNMT_CACHE)"

PREPARE_TIMEOUT_S = 24 * 3600.0  # a rank waits this long for the others (a huge corpus encodes for hours)


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="YAML config file, or the name of a packaged config "
                        f"({', '.join(packaged_configs())})")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set data.max_len=80 (repeatable)")
    parser.add_argument("--workers", type=bounded(PREPARE_WORKERS), default=None, metavar="N",
                        help="tokenizing processes (default: data.workers, else one per CPU; under torchrun, per rank)")


def run(args) -> int:
    import torch

    from attnmt.data.prepare import prepare
    from attnmt.training.init_from import init_pipeline, resolve_init_from
    from attnmt.world import close_world, init_world

    cfg = load_config(args.config, args.overrides)
    if cfg.train.init_from:  # a fine-tuning config: the ids are in its init run's vocabularies, as train's are
        cfg = resolve_init_from(cfg)
        init_pipeline(cfg)
    world, _ = init_world("gloo", torch.device("cpu"), timeout_s=PREPARE_TIMEOUT_S)
    data = prepare(cfg.data, world=world, workers=args.workers, init_from=cfg.train.init_from)
    close_world(world)
    if world.main:
        m = data.manifest
        print(json.dumps({"folder": str(data.folder), "key": data.key, **m["counts"], "sides": m["sides"],
                          "inputs": m["inputs"], "prepared": m["prepared"]}, indent=2, ensure_ascii=False))
    return 0
