# AgentGym's conformance suite against the babyai env. The expert solves every test task within 20
# turns, but long train missions (and its BabyAIBot fallback, one primitive per turn) need more,
# so it gets the levels' own step limits rather than the agent's default turn cap.
agentgym_conformance = {"env": "babyai", "sample": 4, "expert_sample": 16, "expert_max_turns": 600}
