"""Plumbing that every layer may use: the environment (quick mode, data folder, device), atomic
files and locks, and signals (how a command stops)."""
