"""Reinforcement learning: the config, estimators and losses, one RL step (step.py), the learner, horizon schedules, the native trainer."""
