# Runs agentgym's conformance suite (determinism, invalid actions, spaces, HTTP parity, expert)
# against this package's env: this one line is all a plugin needs.
agentgym_conformance = {"env": "guess", "sample": 6, "expert_sample": 30}
