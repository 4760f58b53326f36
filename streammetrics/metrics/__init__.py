"""Accumulators: one mergeable metric state per module."""
