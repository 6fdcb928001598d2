"""Shipping a model: CTranslate2 export (`translator export`) and the HTTP server
(`translator serve`, with its page in static/)."""
