# AgentGym's conformance suite against the textcraft env (determinism, invalid actions, spaces,
# HTTP parity, the expert on a sample of both splits).
agentgym_conformance = {"env": "textcraft", "sample": 5, "expert_sample": 20}
