"""Scoring (`translator eval` and validation during training): sacrebleu BLEU and chrF
against one or several references, the eval driver, and the validation pass."""
