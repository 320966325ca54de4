"""Speed and memory benchmarks: each a ratio against a baseline measured in the same run, on equal work."""
