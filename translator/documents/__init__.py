"""Documents as people have them (Word, slides, web pages, Markdown, subtitles, PO and
XLIFF): each format one module that reads a file's bytes into units of text with their
inline markup and writes the translations back in place (docs/documents.md).
"""
