"""`python -m attnmt` is the same as the `attnmt` command."""

from attnmt.cli import main

raise SystemExit(main())
