"""The command line: argparse, the one error boundary, all terminal output.

- `cli/main.py`: the boundary (`main`: exceptions -> exit codes, `--json` errors);
- `cli/options.py`: the parser, the option groups several commands share, argparse types;
- `cli/settings.py`: the settings resolved once (flags, environment, configuration files)
  and what a command asks about (hosts, the project, the request), as values for below;
- `cli/commands/<verb>.py`: one module per command; `cli/ui/`: presentation (rich).
"""
