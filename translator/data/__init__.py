"""What every stage shares about data: text normalisation, the SentencePiece tokenizers, the
prepared directory's layout, the encoded id arrays, sentence files, token-budget batching
and the dataset training reads. Below every stage; imports only the root modules."""
