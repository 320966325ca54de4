"""ScienceWorld as an AgentGym text environment."""
