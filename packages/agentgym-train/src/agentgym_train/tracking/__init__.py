"""What a run reports as it goes: trackers (console, TensorBoard, W&B) and plots."""
