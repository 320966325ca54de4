"""Multi-turn rollout: env access, task sampling, the episode in play, the engine, evaluation."""
