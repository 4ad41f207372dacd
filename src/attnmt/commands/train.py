"""`attnmt train CONFIG [--set k=v ...] [--run-dir DIR] [--overwrite] [--seeds 1,2,3] | --resume RUN_DIR [--set k=v ...]`.

With --seeds, one run per seed (train.seed=S), one after the other, in DIR-seedS (DIR defaults to
runs/<config name>); an interrupted one is resumed on its own with --resume DIR-seedS."""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import sys
from contextlib import nullcontext
from pathlib import Path

from attnmt.allocator import keep_freed_memory
from attnmt.commands.arguments import seed_list
from attnmt.config import Config, apply_overrides, config_from_dict, load_config, packaged_configs, save_config
from attnmt.errors import AttnmtError
from attnmt.files import refuse_overwrite, writer_lock

HELP = "train a model from a YAML config"

log = logging.getLogger(__name__)


# What `--resume RUN --set ...` may change: how long and how verbosely the run goes on, never
# what it trains (data, model, optimizer, schedule), so the resumed run stays one consistent run.
EXTENDABLE_KEYS = ("train.epochs", "train.max_updates", "train.max_minutes", "train.early_stopping_patience", "train.num_threads",
                   "train.log_every", "train.save_every_steps", "train.keep_last", "train.max_bad_steps",
                   "train.tensorboard", "train.backend")


def _extend_run(cfg: Config, run_dir: Path, overrides: list[str]) -> Config:
    """Apply `overrides` limited to EXTENDABLE_KEYS to a saved run's config and save it."""
    from attnmt.run_dir import CONFIG, RunDir
    from attnmt.world import env_rank

    for item in overrides:
        key = item.partition("=")[0].strip()
        if key not in EXTENDABLE_KEYS:
            raise AttnmtError(f"--set {key} cannot change a run that is being resumed: it would no longer be the "
                              f"same run. On resume only these can change: {', '.join(EXTENDABLE_KEYS)}")
    source = str(run_dir / CONFIG)
    cfg = config_from_dict(apply_overrides(cfg.to_dict(), overrides, source=f"--set on {source}"), source=source)
    if env_rank() == 0:  # under torchrun, rank 0 alone writes
        save_config(cfg, run_dir / CONFIG)
        RunDir(run_dir).record_checksums([CONFIG])
    log.info("resumed run extended: %s", ", ".join(overrides))
    return cfg


def config_input(config: str) -> dict[str, str]:
    """The config file a fresh training reads (none for a packaged config's name): its run
    directory may never hold it (files.refuse_overwrite; the library checks the data files)."""
    return {"config": config} if Path(config).is_file() else {}  # (a run dir that is a file: the OS refuses it)


def seed_run_dir(run_dir: Path, seed: int) -> Path:
    """The run of one seed of `--seeds`: runs/x -> runs/x-seed3."""
    return run_dir.with_name(f"{run_dir.name}-seed{seed}")


def _train_seeds(args) -> list:
    """`--seeds`: one fresh run per seed, one after the other; their TrainResults."""
    from attnmt.training import train

    if args.resume:
        raise AttnmtError("--seeds starts new runs and cannot be combined with --resume: resume each "
                          "RUN_DIR-seedS on its own")
    if not args.config:
        raise AttnmtError("train --seeds needs a CONFIG file")
    if any(item.partition("=")[0].strip() == "train.seed" for item in args.overrides):
        raise AttnmtError("--seeds sets train.seed for each run: drop --set train.seed")
    base = Path(args.run_dir or Path("runs") / Path(args.config).stem)
    results = []
    for seed in args.seeds:
        cfg = load_config(args.config, [*args.overrides, f"train.seed={seed}"])
        log.info("seed %d of %s: %s", seed, ",".join(map(str, args.seeds)), seed_run_dir(base, seed))
        if not seed_run_dir(base, seed).is_file():
            refuse_overwrite(seed_run_dir(base, seed), config_input(args.config))
        results.append(train(cfg, seed_run_dir(base, seed), overwrite=args.overwrite))
    return results


def _summary(result) -> dict:
    return {"run_dir": str(result.run_dir), "epochs": result.epochs, "seconds": round(result.seconds, 1),
            "best": result.best}


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="YAML config file, or the name of a packaged config "
                        f"({', '.join(packaged_configs())}); not needed with --resume")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set train.lr=3e-4 (repeatable)")
    parser.add_argument("--run-dir", default=None, help="where to write the run (default: runs/<config name>)")
    parser.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue an interrupted run exactly")
    parser.add_argument("--overwrite", action="store_true",
                        help="start afresh in a --run-dir that holds a run, deleting that run's files")
    parser.add_argument("--seeds", type=seed_list, default=None, metavar="S1,S2,...",
                        help="train one run per seed, one after the other, in RUN_DIR-seedS (train.seed=S)")


def run(args) -> int:
    from attnmt.run_dir import RunDir
    from attnmt.training import train
    from attnmt.world import env_rank

    if args.resume and args.overwrite:
        raise AttnmtError("--overwrite starts a run afresh and cannot be combined with --resume")
    keep_freed_memory()  # a process that trains: logits-sized blocks are reused, not remapped (allocator.py)
    # a prepared file cut under the training is a DataError at the next read (PreparedData.check_unchanged);
    # cut in the microseconds between that check and the read, the SIGBUS still prints the Python stack
    if not faulthandler.is_enabled():
        try:
            faulthandler.enable(file=sys.__stderr__)
        except (AttributeError, ValueError, OSError):  # no real stderr (an embedding program)
            pass
    if getattr(args, "seeds", None):
        results = _train_seeds(args)
        if env_rank() == 0:
            print(json.dumps([_summary(result) for result in results], indent=2))
        return 0
    if args.resume:
        run_dir = Path(args.resume)
        RunDir(run_dir).require_run()
        with writer_lock(run_dir) if env_rank() == 0 else nullcontext():  # held from the config's extension on
            cfg = RunDir(run_dir).config()
            if args.overrides:
                cfg = _extend_run(cfg, run_dir, args.overrides)
            result = train(cfg, run_dir, resume=True)
    else:
        if not args.config:
            raise AttnmtError("train needs a CONFIG file (or --resume RUN_DIR)")
        cfg = load_config(args.config, args.overrides)
        run_dir = Path(args.run_dir or Path("runs") / Path(args.config).stem)
        if not run_dir.is_file():
            refuse_overwrite(run_dir, config_input(args.config))
        result = train(cfg, run_dir, overwrite=args.overwrite)
    if env_rank() == 0:
        print(json.dumps(_summary(result), indent=2))
    return 0
