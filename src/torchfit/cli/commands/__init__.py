"""One module per torchfit command: `add_parser(subparsers, epilog)` and `run(args) -> int`."""
