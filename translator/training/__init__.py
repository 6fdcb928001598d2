"""Training (`translator train`): the run is one Trainer (trainer.py); below it, with
explicit inputs, its state and random generators, what last.pt holds and resume, the
learning-rate schedule, the optimiser, torchrun, the out-of-memory guard and TensorBoard."""
