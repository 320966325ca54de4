# Runs agentgym's conformance suite (determinism, invalid actions, spaces, HTTP parity, expert)
# against this package's env: this one line is all a plugin needs. (min_distinct is lowered
# because a "small" task hides one of only 10 numbers, so two ids can be the same game.)
agentgym_conformance = {"env": "guess", "sample": 6, "expert_sample": 30, "min_distinct": 0.7}
