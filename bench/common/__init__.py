"""What the benchmarks and experiments share: equal work on both sides of a ratio, readings of /proc."""
