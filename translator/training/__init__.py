"""Training (`translator train`): the run is one Trainer (trainer.py); the modules beside it
take explicit inputs."""
