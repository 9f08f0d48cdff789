"""`python -m torchfit` runs the CLI."""

from torchfit.cli import main

raise SystemExit(main())
