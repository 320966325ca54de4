"""BabyAI (minigrid) as an AgentGym text environment."""
