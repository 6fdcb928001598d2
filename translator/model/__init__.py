"""The model and what belongs to it: the Transformer (read like the paper), its dropout and
loss, parameter and FLOP counts, checkpoints and the run directory that holds them."""
