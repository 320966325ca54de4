"""``agentgym serve-model``: a local model behind an OpenAI-compatible server."""
