"""Guess the number: the example third-party AgentGym env plugin."""
