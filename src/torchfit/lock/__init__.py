"""PEP 751 pylock.toml: the model, the reader, the writer."""
