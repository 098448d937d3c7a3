"""Data: examples and evaluation sets, tasks, hub and local loaders, corpora and bias features."""
