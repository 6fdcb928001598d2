"""From raw corpus files to a prepared directory (`translator prepare`, `translator download`):
readers per format, the streaming scan, cleaning, the leak-free split, the split files in
order, and the prepare pipeline that runs them; and the downloads that fetch a corpus."""
