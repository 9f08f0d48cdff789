"""The only HTTP: package index pages, the cache, wheel metadata and members."""
