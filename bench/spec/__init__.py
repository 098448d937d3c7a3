"""What to run: a run resolved once into a typed spec, sweep files, the job plan and its executors."""
