"""torchfit: pick, build and prove a working PyTorch GPU stack for a host."""

__version__ = "0.1.0"
