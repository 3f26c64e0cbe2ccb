"""make bench: the benchmarks against the local emulator (scripts, run by path)."""
