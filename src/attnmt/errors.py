"""User-facing errors. Each message names the file, line, or config key at fault."""


class AttnmtError(Exception):
    """Base class for errors the user can fix; the CLI prints them as one line and exits 2."""


class DataError(AttnmtError, ValueError):
    """Bad input data: names the file and line (`train.de:1042: invalid UTF-8`)."""


class ConfigError(AttnmtError, ValueError):
    """Bad config: names the file and dotted key (`x.yaml: model.heads=6 must divide d_model=256`)."""


class WriteError(AttnmtError):
    """A file that could not be written (disk full, I/O error): names it, the cause and what is kept."""


class CheckpointError(AttnmtError):
    """A missing, truncated, corrupted or unsafe checkpoint: names the file and what is wrong."""


class LanguageError(AttnmtError, ValueError):
    """A language or direction the model was not trained on: names the ones it has."""
