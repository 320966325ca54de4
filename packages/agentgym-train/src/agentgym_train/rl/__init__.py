"""Reinforcement learning: the config, estimators and losses, the update, the learner, horizon schedules, the native trainer."""
