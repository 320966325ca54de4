"""Fine-tuning on episodes: SFT, DPO and AgentEvol."""
