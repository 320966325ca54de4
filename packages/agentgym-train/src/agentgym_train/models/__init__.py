"""Models and tokenizers: loading, chat templates, GGUF import, the tiny model, a run's checkpoints."""
