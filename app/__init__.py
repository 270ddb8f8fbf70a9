"""Attention, step by step: an interactive walk through multi-head attention."""
