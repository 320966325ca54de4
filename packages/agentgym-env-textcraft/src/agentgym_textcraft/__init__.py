"""TextCraft: crafting Minecraft items from recipes, as an AgentGym text environment."""
