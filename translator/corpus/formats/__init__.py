"""Reading corpora: each format's reader (sources.py says which a corpus gets), compressed
files and zip archives, and the count of malformed rows."""
