"""A PPO recipe with its own entry point, config folder, TaskRunner and trainer, adopted by verl-ctx."""
