"""Dr. GRPO as an AgentGym algorithm plugin (``algorithm: drgrpo``)."""
