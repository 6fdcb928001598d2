"""Translating text: greedy and beam search over the cached decoder, the engine-neutral
text path, the two engines (our model, CTranslate2) and the factory that picks one,
oneDNN for CPU decoding, and streaming input."""
