"""Sequence-level knowledge distillation: a teacher's translations of the train split as a
prepared directory for a student (distiller.py)."""
