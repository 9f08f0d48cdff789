"""`python -m torchfit` runs the CLI."""

from torchfit.installer.cli import main

raise SystemExit(main())
