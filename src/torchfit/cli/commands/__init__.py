"""One module per torchfit command: register(subparsers) and run(args)."""
