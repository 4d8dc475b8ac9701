"""Plumbing that every layer may use: the environment (quick mode, data folder, device), atomic
files and locks, argument checks, signals (how a command stops), and what torch.compile needs."""
