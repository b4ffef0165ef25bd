"""Reusable demo code of the chapters: toy tasks, small training loops, hand-set
weights and the models the measurements use. Import the modules themselves, e.g.
``from transformer_lib.demos import reversal``."""
