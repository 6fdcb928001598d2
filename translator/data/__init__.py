"""From raw corpus files to batches: readers, normalisation, prepare, tokenizers, batching."""
