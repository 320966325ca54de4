"""DAPO's overlong reward shaping as an AgentGym reward transform (``reward: overlong_penalty``)."""
